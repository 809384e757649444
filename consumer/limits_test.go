package consumer

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/scoring"
	"github.com/lkscore/lkscore/session"
	"github.com/lkscore/lkscore/wire"
)

// limitsChat is a chat history at the documented limits
// (recording.DefaultMaxChatItems items, under DefaultMaxChatBytes) made
// to give the most findings: every tool call fails, with a long name, and
// every agent turn is interrupted; a few tool names are 100,000
// characters long.
func limitsChat(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	name := strings.Repeat("lookup_booking_", 12)
	at := 1764417600.0
	for i := 0; i < recording.DefaultMaxChatItems; i += 4 {
		tool := name
		if i%20_000 == 0 {
			tool = strings.Repeat("t", 100_000)
		}
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"u%d","type":"message","role":"user","content":["hello there"],"transcript_confidence":0.2,`+
			`"metrics":{"started_speaking_at":%.3f,"stopped_speaking_at":%.3f,"end_of_turn_delay":3.5},"created_at":%.3f},`, i, at, at+1, at)
		fmt.Fprintf(&b, `{"id":"f%d","type":"function_call","call_id":"c%d","name":%q,"arguments":"{}","created_at":%.3f},`, i, i, tool, at+1)
		fmt.Fprintf(&b, `{"id":"o%d","type":"function_call_output","call_id":"c%d","name":%q,"output":"error: timeout","is_error":true,"created_at":%.3f},`,
			i, i, tool, at+2)
		fmt.Fprintf(&b, `{"id":"a%d","type":"message","role":"assistant","content":["sorry"],"interrupted":true,"metrics":{"e2e_latency":4.5},"created_at":%.3f}`,
			i, at+3)
		at += 4
	}
	b.WriteString(`]}`)
	if b.Len() > recording.DefaultMaxChatBytes {
		t.Fatalf("the chat at the limits is %d bytes, over the %d-byte limit", b.Len(), recording.DefaultMaxChatBytes)
	}
	return b.Bytes()
}

// TestUploadAtTheLimits: an upload at the documented limits (100,000
// items, the most findings they can give) is accepted and scored within a
// minute, its scorecard within NATS's max payload (issue 65: a 99,999-item
// chat was stored and then failed to publish, retried for ever).
func TestUploadAtTheLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("a 100,000-item upload")
	}
	t.Parallel()
	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	chat := limitsChat(t)
	header := testenv.Header(t, "RM_Limits", "AJ_Limits")
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, nil)[:2])
	start := time.Now()
	resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0",
		testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("upload of %d bytes at the limits: %d %s", len(chat), resp.StatusCode, msg)
	}
	sendWebhook(t, d, jobEnded("EV_Limits", "RM_Limits", "AJ_Limits", "a", livekit.JobStatus_JS_SUCCESS))
	var card session.Scorecard
	testenv.WaitFor(t, time.Minute, "the scorecard of a chat at the limits", func() bool {
		cards := results(t, ns.URL())
		i := slices.IndexFunc(cards, func(c session.Scorecard) bool { return c.Session.RoomID == "RM_Limits" })
		if i >= 0 {
			card = cards[i]
		}
		return i >= 0
	})
	omitted := 0
	for _, c := range card.Components {
		omitted += c.FindingsOmitted
		if len(c.Findings) > scoring.MaxFindings {
			t.Errorf("%s lists %d findings", c.Name, len(c.Findings))
		}
	}
	if omitted == 0 {
		t.Error("the card says no finding was left out")
	}
	t.Logf("%d-byte chat of %d items scored in %v; %d findings left out", len(chat), recording.DefaultMaxChatItems,
		time.Since(start).Round(time.Millisecond), omitted)
}

// TestScorecardOverMaxPayload: a NATS server whose max_payload (16 KiB)
// is smaller than a scorecard: the card is dead-lettered with the reason
// at its first failure, the connection stays up (/readyz 200), and a
// session with a small card is scored after it.
func TestScorecardOverMaxPayload(t *testing.T) {
	t.Parallel()
	ns := testenv.StartNATSMaxPayload(t, 16<<10)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := range 2000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"f%d","type":"function_call","call_id":"c%d","name":"lookup","arguments":"{}"},`+
			`{"id":"o%d","type":"function_call_output","call_id":"c%d","name":"lookup","output":"error: timeout","is_error":true}`, i, i, i, i)
	}
	b.WriteString(`]}`)
	body, ct := testenv.PythonUpload(t, testenv.FullParts(testenv.Header(t, "RM_Big", "AJ_Big"), b.Bytes(), nil)[:2])
	resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0",
		testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, msg)
	}
	sendWebhook(t, d, jobEnded("EV_Big", "RM_Big", "AJ_Big", "a", livekit.JobStatus_JS_SUCCESS))
	admin := broker.NewDeadLetterAdmin(testenv.JetStream(t, ns.URL()), wire.NewSubjects("lkscore.", "LKSCORE"))
	var dls []wire.DeadLetter
	testenv.WaitFor(t, time.Minute, "the dead letter of a card over max_payload", func() bool {
		dls, _ = admin.List(context.Background(), wire.StageScore, 10)
		return len(dls) > 0
	})
	if !strings.Contains(dls[0].Error, "payload") || dls[0].Deliveries != 1 {
		t.Errorf("dead letter: %d deliveries, %q: want one, naming the payload", dls[0].Deliveries, dls[0].Error)
	}
	if c := readyz(t, d); c != 200 {
		t.Fatalf("/readyz %d after a card over max_payload", c)
	}
	dir := t.TempDir()
	writeScenarioCopy(t, dir, "1_clean_call", "RM_Small", "AJ_Small", "")
	uploadDir(t, d, dir)
	sendWebhook(t, d, jobEnded("EV_Small", "RM_Small", "AJ_Small", "a", livekit.JobStatus_JS_SUCCESS))
	testenv.WaitFor(t, settleWait, "the small session's scorecard", func() bool {
		return slices.ContainsFunc(results(t, ns.URL()), func(c session.Scorecard) bool { return c.Session.RoomID == "RM_Small" })
	})
}
