package consumer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/session"
)

// Identity keys of the tests below (LKSCORE_IDENTITY_KEYS).
const (
	oldIdentityKey = "old-identity-key-0123456789abcdef"
	newIdentityKey = "new-identity-key-fedcba9876543210"
)

// TestPhoneNumbersNotRecoverable: SIP callers' identities are their phone
// numbers. After their webhooks went through the daemon, an attacker holding
// every stored byte (the streams' messages, the data directory's raw files)
// but not the key hashes every number of the range the callers are in and
// finds none of them; the same search against the hash lkscore stored
// before (unkeyed SHA-256) finds every one, so the search itself works.
// The range is every number of the callers' exchanges, 10^6 of them
// (IDENTITY_BRUTE_DIGITS=10 tries all 10^10, hours of CPU).
func TestPhoneNumbersNotRecoverable(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	d, _ := startDaemon(t, cfg)
	const base = 4155550000                                 // +1 415 555 ….
	planted := []int{base + 1234, base + 4321, base + 8765} // sorted, as bruteForce returns them
	now := time.Now().Unix()
	for i, n := range planted {
		id := fmt.Sprintf("sip_+1%010d", n)
		sendWebhook(t, d, testenv.ParticipantLeft(fmt.Sprintf("EV_sip%d", i), fmt.Sprintf("RM_sip%d", i), id,
			livekit.ParticipantInfo_SIP, livekit.DisconnectReason_CLIENT_INITIATED, now))
	}
	url := d.NATSURL()
	var stored string
	testenv.WaitFor(t, settleWait, "the callers' departures", func() bool {
		stored = storedMessages(t, url)
		return len(regexp.MustCompile(`"field":"departure"`).FindAllString(stored, -1)) >= len(planted)
	})
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	everything := stored + string(rawBytes(t, cfg.DataDir))
	keys, err := facts.IdentityKeysFor(cfg.Privacy.IdentityKeys, cfg.LiveKit.Keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range planted {
		// With the key, the stored token is there: the identity is kept, keyed.
		tok := facts.IdentityHash(keys.Stored(fmt.Sprintf("sip_+1%010d", n)))
		if !strings.Contains(everything, tok) {
			t.Errorf("the keyed hash %s of a planted caller is not stored", tok)
		}
		if strings.Contains(everything, strconv.Itoa(n)) {
			t.Errorf("a planted number is stored in clear")
		}
	}
	// Every number of the callers' exchanges 415-5xx (10^6): the search an
	// attacker who knows where the callers live runs first.
	lo, hi := 4155000000, 4156000000
	if os.Getenv("IDENTITY_BRUTE_DIGITS") == "10" {
		lo, hi = 0, 10_000_000_000
	}
	if found := bruteForce(everything, lo, hi); len(found) > 0 {
		t.Errorf("recovered %v from the stored bytes without the key", found)
	}
	// The same search on what lkscore stored before the key finds them all.
	var before strings.Builder
	for _, n := range planted {
		h := sha256.Sum256(fmt.Appendf(nil, "sip_+1%010d", n))
		before.WriteString(`"identity":"lkscore-hash:` + hex.EncodeToString(h[:6]) + `"` + "\n")
	}
	if found := bruteForce(before.String(), lo, hi); !slices.Equal(found, planted) {
		t.Errorf("the search found %v in unkeyed hashes, want %v: it cannot tell", found, planted)
	}
}

// bruteForce hashes every number in [lo, hi) as an attacker without the key
// would (SHA-256 of the identity, of "+1…" and of the bare digits), and
// returns those whose hash starts any run of hex digits in stored (6 bytes or
// more of it, as any truncation would), sorted. It uses every core.
func bruteForce(stored string, lo, hi int) []int {
	prefixes := map[[6]byte]bool{}
	for _, run := range regexp.MustCompile(`[0-9a-f]{12,}`).FindAllString(stored, -1) {
		for i := 0; i+12 <= len(run); i++ {
			var p [6]byte
			if _, err := hex.Decode(p[:], []byte(run[i:i+12])); err == nil {
				prefixes[p] = true
			}
		}
	}
	workers := runtime.GOMAXPROCS(0)
	found := make([][]int, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := []byte("sip_+1")
			for n := lo + w; n < hi; n += workers {
				buf = strconv.AppendInt(buf[:6], int64(n), 10)
				for len(buf) < 16 { // zero-pad to 10 digits
					buf = append(buf[:6], append([]byte("0"), buf[6:]...)...)
				}
				for _, form := range [][]byte{buf, buf[4:], buf[6:]} {
					sum := sha256.Sum256(form)
					if prefixes[[6]byte(sum[:6])] {
						found[w] = append(found[w], n)
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(found...)
	slices.Sort(all)
	return all
}

// TestIdentityKeyRotationKeepsRoomStory: a job's participant identity marks
// its departure as the agent's whatever the participant's kind says, which
// takes matching the job webhook's hashed identity with the departure's.
// The job's webhooks are stored under the old key; the room's departures by
// a daemon rotating (LKSCORE_IDENTITY_KEYS=new,old): the agent still ended
// the call. A daemon that dropped the old key at once (new only) cannot tie
// them, which is why a rotation keeps both for a while.
func TestIdentityKeyRotationKeepsRoomStory(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	cfg := pipelineConfig(t, ns.URL())
	cfg.Privacy.IdentityKeys = []string{oldIdentityKey}
	started := func(room, job string) *livekit.WebhookEvent {
		ev := jobEnded("EV_s"+job, room, job, "py-agent", livekit.JobStatus_JS_RUNNING)
		ev.Event, ev.Job.State.ParticipantIdentity = "agent_job_started", "agent-"+job
		return ev
	}
	rooms := map[string][]string{"RM_Rotated": {newIdentityKey, oldIdentityKey}, "RM_Dropped": {newIdentityKey}}
	d, _ := startDaemon(t, cfg)
	for room := range rooms {
		sendWebhook(t, d, started(room, "AJ_"+room))
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	now := time.Now().Unix()
	for _, room := range []string{"RM_Rotated", "RM_Dropped"} {
		rcfg := cfg
		rcfg.Privacy.IdentityKeys = rooms[room]
		d, _ := startDaemon(t, rcfg)
		dir := t.TempDir()
		writeScenarioCopy(t, dir, "1_clean_call", room, "AJ_"+room, "")
		uploadDir(t, d, dir)
		// The agent's participant is not of kind AGENT: only its identity
		// says it is the job's.
		for _, ev := range []*livekit.WebhookEvent{
			testenv.ParticipantLeft("EV_a"+room, room, "agent-AJ_"+room, livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_CLIENT_INITIATED, now-3),
			testenv.ParticipantLeft("EV_c"+room, room, "caller", livekit.ParticipantInfo_STANDARD, livekit.DisconnectReason_CLIENT_INITIATED, now),
			testenv.RoomFinished("EV_f"+room, room, livekit.RoomEndReason_ROOM_END_IDLE_TIMEOUT),
		} {
			sendWebhook(t, d, ev)
		}
		testenv.WaitFor(t, settleWait, room+"'s scorecard", func() bool {
			return slices.ContainsFunc(results(t, ns.URL()), func(c session.Scorecard) bool { return c.Session.RoomID == room })
		})
		quiesce(t, ns.URL(), defaultConsumers)
		if err := d.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]string{"RM_Rotated": facts.RoleAgent, "RM_Dropped": facts.RoleCaller}
	for _, c := range results(t, ns.URL()) {
		if w, ok := want[c.Session.RoomID]; ok && c.Session.EndedBy != w {
			t.Errorf("%s: ended by %q, want %q (departures %v)", c.Session.RoomID, c.Session.EndedBy, w, c.Session.Departures)
		}
	}
}
