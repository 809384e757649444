package consumer

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scenarios"
	"github.com/lkscore/lkscore/wire"
)

// maxMessagesPerSession bounds the NATS messages (into the server and out
// of it) one session of the field mix costs lkscore, as TestMessagesPerSession
// counts them. docs/performance.md ("Every message of a session") has the
// table it prints; lower this when a change cuts messages, never raise it
// without a line there saying why.
const maxMessagesPerSession = 31.0

// TestMessagesPerSession sends the field mix as `lkscore bench` does (an
// upload, then agent_job_ended, from 8 clients) to `--role all` on a
// nats-server of its own, waits until every scorecard is stored and every
// consumer has caught up, and counts the server's messages in and out per
// session (its /varz counters, less the test's own subscription). A spy
// subscribed to everything classes each message by subject (the table in
// docs/performance.md); the test fails when the total per session exceeds
// maxMessagesPerSession.
func TestMessagesPerSession(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 200 sessions")
	}
	const sessions = 200
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	d, _ := startDaemon(t, cfg)
	subj := wire.Default()
	spy := newMessageSpy(t, ns.URL(), subj)
	idle := func() { testenv.WaitFor(t, 60*time.Second, "every consumer idle", ns.ConsumersIdle) }
	idle()
	time.Sleep(500 * time.Millisecond) // start-up's own traffic settles
	spy.reset()
	in0, out0 := ns.Msgs()

	sendFieldMix(t, "http://"+d.IngestAddr(), sessions, 8)
	testenv.WaitFor(t, 60*time.Second, "every scorecard", func() bool { return spy.scorecards() >= sessions })
	idle()
	in1, out1 := ns.Msgs()
	// What the server delivered to the spy is counted out; it is not lkscore's.
	in, out := float64(in1-in0), float64(out1-out0)-float64(spy.total())
	perIn, perOut := in/sessions, out/sessions
	t.Logf("per session of the field mix (%d sessions): %.1f messages in, %.1f out, %.1f in all", sessions, perIn, perOut, perIn+perOut)
	t.Logf("by subject (messages seen per session; a request and its reply are two):\n%s", spy.table(sessions))
	if perIn+perOut > maxMessagesPerSession {
		t.Errorf("%.1f NATS messages per session, bound %.1f: which subject grew is in the table above", perIn+perOut, maxMessagesPerSession)
	}
}

// sendFieldMix sends n sessions of the field mix from clients goroutines as
// lkscore bench does: each its upload, then its agent_job_ended webhook.
func sendFieldMix(t *testing.T, base string, n, clients int) {
	t.Helper()
	mix := scenarios.FieldMix()
	snd := sdkclient.New(base, testenv.Key, testenv.Secret)
	next := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				room, job := fmt.Sprintf("RM_msgs_%06d", i), fmt.Sprintf("AJ_msgs_%06d", i)
				header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: room, JobId: job,
					SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
				if err := snd.Upload(context.Background(), header, mix[i%len(mix)].Chat); err != nil {
					errs <- fmt.Errorf("session %d upload: %w", i, err)
					continue
				}
				ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_" + job, CreatedAt: time.Now().Unix(),
					Job: &livekit.Job{Id: job, AgentName: "msgs-agent", Room: &livekit.Room{Sid: room},
						State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}
				if err := snd.Webhook(context.Background(), ev); err != nil {
					errs <- fmt.Errorf("session %d webhook: %w", i, err)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// messageSpy subscribes to every subject and classes what it sees.
type messageSpy struct {
	subj    wire.Subjects
	mu      sync.Mutex
	count   map[string]int
	replyOf map[string]string // a request's reply subject → the request's class
	n       int
	cards   int
}

func newMessageSpy(t *testing.T, url string, subj wire.Subjects) *messageSpy {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	s := &messageSpy{subj: subj, count: map[string]int{}, replyOf: map[string]string{}}
	// Not ">": the server sends its advisories ($JS.EVENT.>) only where
	// someone listens, so a spy on everything would add messages. These
	// subjects hold every message lkscore sends or is sent (deliveries and
	// replies go to inboxes).
	// One channel for all, filled in the order the connection reads: a
	// request is seen before its reply.
	ch := make(chan *nats.Msg, 1<<20)
	for _, subject := range []string{"$JS.API.>", "$JS.ACK.>", "$KV.>", "_INBOX.>", wire.DefaultSubjectPrefix + ">"} {
		if _, err := nc.ChanSubscribe(subject, ch); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m := range ch {
			s.see(m)
		}
	}()
	t.Cleanup(func() { nc.Close(); close(ch); <-done })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *messageSpy) see(m *nats.Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	class := s.class(m)
	if m.Reply != "" && !strings.HasPrefix(m.Reply, "$JS.ACK.") {
		s.replyOf[m.Reply] = class
	}
	s.count[class]++
	if strings.HasPrefix(m.Subject, strings.TrimSuffix(s.subj.ResultAll(), ">")) {
		s.cards++
	}
}

// class names a message by what it is: a request, publish or ack by its
// subject's leading tokens, a delivery by the stream and consumer it came
// from, a reply by the request it answers.
func (s *messageSpy) class(m *nats.Msg) string {
	sub := m.Subject
	switch {
	case strings.HasPrefix(m.Reply, "$JS.ACK."):
		return "out delivery " + tokens(m.Reply, 2, 4)
	case strings.HasPrefix(sub, "$JS.ACK."):
		return "in  ack " + tokens(sub, 2, 4)
	case strings.HasPrefix(sub, "$JS.API.CONSUMER.MSG.NEXT."):
		return "in  pull request " + tokens(sub, 5, 7)
	case strings.HasPrefix(sub, "$JS.API.DIRECT.GET."):
		return "in  direct get " + tokens(sub, 4, 5) + keyKind(sub, 7)
	case strings.HasPrefix(sub, "$JS.API."):
		return "in  api " + tokens(sub, 2, 4)
	case strings.HasPrefix(sub, "$KV."):
		return "in  kv put " + tokens(sub, 1, 2) + keyKind(sub, 2)
	case strings.HasPrefix(sub, "_INBOX."):
		if c, ok := s.replyOf[sub]; ok {
			return "out reply to " + strings.TrimPrefix(c, "in  ")
		}
		return "out reply (request not seen)"
	}
	return "in  publish " + tokens(sub, 0, 2)
}

// keyKind names the kind of a KV key that starts at token from: a room's
// facts entry, a session's, or the key itself (one token).
func keyKind(subject string, from int) string {
	t := strings.Split(subject, ".")
	switch key := t[min(from, len(t)):]; {
	case len(key) == 2 && key[1] == "_room":
		return " (a room's entry)"
	case len(key) == 2:
		return " (a session's entry)"
	case len(key) > 1:
		return " " + key[0] + ".… (regression: " + key[0] + ")"
	default:
		return " " + strings.Join(key, ".")
	}
}

// tokens joins the subject's dot-separated tokens [from, to), shortening
// generated consumer names (ordered consumers, watchers).
func tokens(subject string, from, to int) string {
	t := strings.Split(subject, ".")
	t = t[min(from, len(t)):min(to, len(t))]
	for i, tok := range t {
		if len(tok) >= 16 && !strings.ContainsAny(tok, "_-") {
			t[i] = "(generated)"
		}
	}
	return strings.Join(t, ".")
}

func (s *messageSpy) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

func (s *messageSpy) scorecards() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cards
}

func (s *messageSpy) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count, s.n, s.cards = map[string]int{}, 0, 0
}

// table prints each class per session, largest first.
func (s *messageSpy) table(sessions int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	type row struct {
		class string
		n     int
	}
	rows := make([]row, 0, len(s.count))
	for c, n := range s.count {
		rows = append(rows, row{c, n})
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].n != rows[j].n {
			return rows[i].n > rows[j].n
		}
		return rows[i].class < rows[j].class
	})
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "  %6.2f  %s\n", float64(r.n)/float64(sessions), r.class)
	}
	fmt.Fprintf(&b, "  %6.2f  seen in all", float64(s.n)/float64(sessions))
	return b.String()
}
