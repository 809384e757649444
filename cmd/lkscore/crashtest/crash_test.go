//go:build !race

// Crash tests: lkscore as separate processes (one ingest, one or two
// workers) on an external nats-server and a versitygw S3 gateway, under a
// steady load of sessions sent as LiveKit and the agents SDK send them
// (retried the way they retry). Each test really kills, stops or restarts
// something, then checks the invariant: every session whose upload and
// webhook were acknowledged has exactly one scorecard, and no dead letter;
// and measures how long the pipeline stood still, against a bound taken
// from the configuration. They are skipped under -race (the binaries they
// run are built without it; the race run covers the same code in process).
package crashtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
)

const (
	crashKey    = "APIcrash"
	crashSecret = "crash-secret-0123456789abcdef0123"
)

// The configuration every process of a crash test runs with; the bounds
// the tests assert come from these values.
const (
	crashAckWait         = 6 * time.Second
	crashHealthInterval  = 250 * time.Millisecond
	crashSettle          = time.Second
	crashShutdownTimeout = 10 * time.Second
	crashConfig          = `
shutdown_timeout: 10s
nats: {publish_timeout: 2s, request_timeout: 2s}
s3: {bucket: rec, region: us-east-1, force_path_style: true, max_attempts: 1, request_timeout: 2s}
pipeline:
  concurrency: 4
  ack_wait: 6s
  health_interval: 250ms
  settle_window: 1s
  retry_base: 200ms
  stall_after: 10s
`
)

var (
	buildOnce           sync.Once
	lkscoreBin, natsBin string
	buildErr            error
)

// binaries builds lkscore and nats-server (the module version in go.mod)
// once per test binary.
func binaries(t *testing.T) (string, string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "lkscore-crash-bin")
		if err != nil {
			buildErr = err
			return
		}
		lkscoreBin, natsBin = filepath.Join(dir, "lkscore"), filepath.Join(dir, "nats-server")
		for _, b := range [][]string{{lkscoreBin, "github.com/lkscore/lkscore/cmd/lkscore"}, {natsBin, "github.com/nats-io/nats-server/v2"}} {
			out, err := exec.Command("go", "build", "-o", b[0], b[1]).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b[1], err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return lkscoreBin, natsBin
}

func freeAddr(t *testing.T) string { return testenv.FreeAddr(t) }

// proc is one process of the test.
type proc struct {
	name  string
	cmd   *exec.Cmd
	log   *testenv.SyncBuffer
	ops   string
	http  string
	exit  chan error
	state atomic.Bool // running
}

func startProc(t *testing.T, name string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{name: name, cmd: cmd, log: &testenv.SyncBuffer{}, exit: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p.state.Store(true)
	go func() { p.exit <- cmd.Wait(); p.state.Store(false) }()
	t.Cleanup(func() {
		if p.state.Load() {
			_ = cmd.Process.Kill()
			<-p.exit
		}
		if t.Failed() {
			t.Logf("--- %s log (last 3000 bytes) ---\n%s", name, lastBytes(p.log.String(), 3000))
		}
		if dir := os.Getenv("LKSCORE_CRASH_LOGS"); dir != "" { // every process's whole log, for a post-mortem
			_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%d.log", name, cmd.Process.Pid)), []byte(p.log.String()), 0o644)
		}
	})
	return p
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// cluster is NATS, S3 and lkscore processes.
type cluster struct {
	t        *testing.T
	dir      string
	natsAddr string
	natsDir  string
	nats     *proc
	s3       *testenv.S3
	ingest   *proc
	workers  map[string]*proc
	cfgFile  string
	// urls, when set, is a NATS cluster's client URLs (cluster_test.go);
	// env is added to every lkscore process.
	urls []string
	env  []string
	// front, when set, is the process the load sends to instead of ingest:
	// a test that restarts every process moves it first, as a Service
	// stops routing to a pod that is terminating.
	front atomic.Pointer[proc]
}

// frontHTTP is the ingest address the load sends to.
func (c *cluster) frontHTTP() string {
	if p := c.front.Load(); p != nil {
		return p.http
	}
	return c.ingest.http
}

// natsURL is the NATS URL the processes and the test connect to.
func (c *cluster) natsURL() string {
	if len(c.urls) > 0 {
		return strings.Join(c.urls, ",")
	}
	return "nats://" + c.natsAddr
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	lk, _ := binaries(t)
	_ = lk
	c := &cluster{t: t, dir: t.TempDir(), natsAddr: freeAddr(t), workers: map[string]*proc{}}
	c.natsDir = filepath.Join(c.dir, "nats")
	c.startNATS()
	c.s3 = testenv.StartS3(t)
	c.s3.CreateBucket(t, "rec")
	c.cfgFile = filepath.Join(c.dir, "lkscore.yaml")
	if err := os.WriteFile(c.cfgFile, []byte(crashConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	c.ingest = c.startLkscore("ingest", "ingest")
	return c
}

func (c *cluster) startNATS() {
	_, bin := binaries(c.t)
	host, port, _ := net.SplitHostPort(c.natsAddr)
	c.nats = startProc(c.t, "nats-server", exec.Command(bin, "-a", host, "-p", port, "-js", "-sd", c.natsDir))
	testenv.WaitFor(c.t, 10*time.Second, "nats-server to be reachable", func() bool {
		nc, err := nats.Connect("nats://" + c.natsAddr)
		if err == nil {
			nc.Close()
		}
		return err == nil
	})
}

// spawn starts an lkscore serve process of the given role against the
// cluster's NATS and S3, without waiting for it.
func (c *cluster) spawn(name, role string) *proc {
	c.t.Helper()
	bin, _ := binaries(c.t)
	listen, ops := freeAddr(c.t), freeAddr(c.t)
	cmd := exec.Command(bin, "serve", "--config", c.cfgFile, "--role", role, "--listen", listen, "--ops-listen", ops,
		"--nats-url", c.natsURL(), "--data-dir", filepath.Join(c.dir, name))
	cmd.Env = append(c.s3Env(), "LIVEKIT_API_KEY="+crashKey, "LIVEKIT_API_SECRET="+crashSecret)
	cmd.Env = append(cmd.Env, c.env...)
	p := startProc(c.t, name, cmd)
	p.ops, p.http = ops, listen
	return p
}

// s3Env is the environment of an lkscore process that uses the cluster's
// S3 (versitygw) and nothing else of AWS.
func (c *cluster) s3Env() []string {
	return append(os.Environ(), "LKSCORE_S3_ENDPOINT="+c.s3.Endpoint, "AWS_ACCESS_KEY_ID="+testenv.S3AccessKey,
		"AWS_SECRET_ACCESS_KEY="+testenv.S3SecretKey, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE="+filepath.Join(c.dir, "none"), "AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(c.dir, "none"))
}

func (c *cluster) startLkscore(name, role string) *proc {
	c.t.Helper()
	p := c.spawn(name, role)
	waitReady(c.t, p, 20*time.Second)
	if role == "worker" {
		c.workers[name] = p
	}
	return p
}

// load sends sessions at a steady rate, each an SDK upload and LiveKit's
// agent_job_ended, both retried until acknowledged (as the SDK retries a
// 503 with RetryInfo and LiveKit's notifier retries 5xx and connection
// errors). sent records when each session was fully acknowledged.
type load struct {
	c      *cluster
	rate   int
	prefix string
	chat   []byte

	mu   sync.Mutex
	sent map[string]time.Time // session key → acknowledged at
	stop chan struct{}
	wg   sync.WaitGroup
	n    atomic.Int64
}

func (c *cluster) startLoad(prefix string, rate int) *load {
	chat, err := os.ReadFile(filepath.Join(testenv.ScenarioDir(), "1_clean_call", "chat_history.json"))
	if err != nil {
		c.t.Fatal(err)
	}
	l := &load{c: c, rate: rate, prefix: prefix, chat: chat, sent: map[string]time.Time{}, stop: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		var senders sync.WaitGroup
		defer senders.Wait()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			senders.Add(1)
			go func() {
				defer senders.Done()
				l.session(i)
			}()
		}
	}()
	return l
}

// finish stops sending and waits for every session in progress to be acknowledged.
func (l *load) finish() map[string]time.Time {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent
}

func (l *load) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sent)
}

// burst sends n more sessions at once from senders goroutines; the channel
// closes when all are acknowledged.
func (l *load) burst(n, senders int) <-chan struct{} {
	done := make(chan struct{})
	next := make(chan int)
	var wg sync.WaitGroup
	for range senders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				l.session(i)
			}
		}()
	}
	go func() {
		for i := range n {
			next <- 100000 + i
		}
		close(next)
		wg.Wait()
		close(done)
	}()
	return done
}

func (l *load) sentAt(key string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent[key]
}

func (l *load) sentBefore(at time.Time) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for k, ts := range l.sent {
		if ts.Before(at) {
			out = append(out, k)
		}
	}
	return out
}

func (l *load) session(i int) {
	room, job := fmt.Sprintf("RM_%s%05d", l.prefix, i), fmt.Sprintf("AJ_%s%05d", l.prefix, i)
	header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: room, JobId: job, SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
	// Each try goes to the current front, as a retry through a Service
	// reaches another pod once one is terminating.
	snd := func() *sdkclient.Sender { return sdkclient.New("http://"+l.c.frontHTTP(), crashKey, crashSecret) }
	ctx := context.Background()
	l.retry("upload", func() error { return snd().Upload(ctx, header, l.chat) })
	ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_" + job, CreatedAt: time.Now().Unix(),
		Job: &livekit.Job{Id: job, AgentName: "crash-agent", Room: &livekit.Room{Sid: room}, State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}
	l.retry("webhook", func() error { return snd().Webhook(ctx, ev) })
	l.mu.Lock()
	l.sent[room+"/"+job] = time.Now()
	l.mu.Unlock()
}

// retry repeats op as LiveKit and the SDK do: on connection errors and 5xx.
func (l *load) retry(what string, op func() error) {
	for attempt := 0; ; attempt++ {
		err := op()
		if err == nil {
			return
		}
		var se *sdkclient.StatusError
		if errors.As(err, &se) && !se.Retryable() {
			l.c.t.Errorf("%s refused: %v", what, err)
			return
		}
		time.Sleep(min(200*time.Millisecond*time.Duration(attempt+1), 2*time.Second))
	}
}

// scorecards reads the results stream: the server's receive time of each
// scorecard by session key, and how many keys appear more than once.
func (c *cluster) scorecards() (map[string]time.Time, int) {
	c.t.Helper()
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		c.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, "LKSCORE_RESULTS")
	if err != nil {
		return map[string]time.Time{}, 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	out, dup := map[string]time.Time{}, 0
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			c.t.Fatalf("result %d: %v", seq, err)
		}
		key := m.Header.Get("Lk-Session-Key")
		if _, ok := out[key]; ok {
			dup++
		}
		out[key] = m.Time
	}
	return out, dup
}

func (c *cluster) deadLetters() int {
	nc, err := nats.Connect(c.natsURL())
	if err != nil {
		c.t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	s, err := js.Stream(context.Background(), "LKSCORE_DLQ")
	if err != nil {
		return 0
	}
	info, _ := s.Info(context.Background())
	return int(info.State.Msgs)
}

// settle waits until every sent session has a scorecard (or the timeout),
// then checks exactly-once.
func (c *cluster) checkExactlyOnce(sent map[string]time.Time, within time.Duration) map[string]time.Time {
	c.t.Helper()
	deadline := time.Now().Add(within)
	var cards map[string]time.Time
	var dup int
	for {
		cards, dup = c.scorecards()
		if len(cards) >= len(sent) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	missing := 0
	for k := range sent {
		if _, ok := cards[k]; !ok {
			missing++
		}
	}
	if missing > 0 || dup > 0 || len(cards) != len(sent) {
		c.t.Errorf("%d sessions acknowledged: %d scorecards, %d missing, %d duplicated", len(sent), len(cards), missing, dup)
	}
	if n := c.deadLetters(); n != 0 {
		c.t.Errorf("%d dead letters", n)
	}
	return cards
}

// rate is scorecards per second in [from, to).
func rate(cards map[string]time.Time, from, to time.Time) float64 {
	n := 0
	for _, ts := range cards {
		if !ts.Before(from) && ts.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}

// firstAfter is the first scorecard received at or after t.
func firstAfter(cards map[string]time.Time, t time.Time) (time.Time, bool) {
	var ts []time.Time
	for _, c := range cards {
		if !c.Before(t) {
			ts = append(ts, c)
		}
	}
	if len(ts) == 0 {
		return time.Time{}, false
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	return ts[0], true
}

// TestCrashWorkerKill9: with two workers under load, one dies holding
// messages (it is frozen with SIGSTOP, so its open pull requests take
// messages it will never process, then killed with SIGKILL). The other keeps
// scoring without a pause, and the dead worker's sessions are scored once
// their ack_wait has passed.
func TestCrashWorkerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: crash test: kills and restarts real processes")
	}
	c := newCluster(t)
	a := c.startLkscore("worker-a", "worker")
	c.startLkscore("worker-b", "worker")
	l := c.startLoad("Kill", 40)
	time.Sleep(8 * time.Second)
	// A burst on top of the steady load, so that many sessions are in
	// flight (acknowledged, not yet scored) when the worker dies.
	burstAt := time.Now()
	burstDone := l.burst(300, 32)
	time.Sleep(2 * time.Second)
	diedAt := time.Now()
	cards, _ := c.scorecards()
	t.Logf("kill -9: %d sessions acknowledged, %d scored: %d in flight when the worker died", l.count(), len(cards), l.count()-len(cards))
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // its pull requests take messages meanwhile
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.exit
	before := l.sentBefore(time.Now())
	time.Sleep(10 * time.Second)
	<-burstDone
	sent := l.finish()
	cards = c.checkExactlyOnce(sent, 3*crashAckWait)

	// The pool's rate before: the steady load, before the burst (which
	// would inflate it); after: the 10 s that follow the death.
	rBefore, rAfter := rate(cards, burstAt.Add(-6*time.Second), burstAt), rate(cards, diedAt, diedAt.Add(10*time.Second))
	gap := longestGap(cards, diedAt, diedAt.Add(10*time.Second))
	t.Logf("kill -9: pool %.1f scorecards/s before (steady load), %.1f in the 10 s after; longest pause after %.2f s", rBefore, rAfter, gap.Seconds())
	if rBefore == 0 || rAfter < rBefore/2 {
		t.Errorf("scoring rate after the kill %.1f/s, want at least half of %.1f/s", rAfter, rBefore)
	}
	// The survivor scores the steady load's sessions as they settle: no
	// pause longer than two settle windows.
	if bound := 2 * crashSettle; gap > bound {
		t.Errorf("scoring paused %s after the kill, want at most %s (2 × settle_window)", gap, bound)
	}
	// Sessions acknowledged before the kill that took more than 2 s to be
	// scored were held by the dead worker.
	var last time.Time
	held := 0
	for _, k := range before {
		ts := cards[k]
		if ts.Sub(l.sentAt(k)) > 2*time.Second {
			held++
		}
		if ts.After(last) {
			last = ts
		}
	}
	t.Logf("kill -9: the dead worker held %d sessions; the last session acknowledged before the kill was scored %.1f s after it died (ack_wait %s)",
		held, last.Sub(diedAt).Seconds(), crashAckWait)
	if held == 0 {
		t.Error("the dead worker held no session: the test proved nothing about its in-flight work")
	}
	if bound := crashAckWait + crashSettle + 3*time.Second; last.Sub(diedAt) > bound {
		t.Errorf("the dead worker's sessions were scored %s after it died, want within %s (ack_wait + settle + 3 s)", last.Sub(diedAt), bound)
	}
}

// longestGap is the longest time in [from, to) without a scorecard.
func longestGap(cards map[string]time.Time, from, to time.Time) time.Duration {
	ts := []time.Time{from}
	for _, c := range cards {
		if c.After(from) && c.Before(to) {
			ts = append(ts, c)
		}
	}
	ts = append(ts, to)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	var gap time.Duration
	for i := 1; i < len(ts); i++ {
		gap = max(gap, ts[i].Sub(ts[i-1]))
	}
	return gap
}

// TestCrashNATSRestart: kill -9 the nats-server under load and start it
// again: scoring resumes within 5 s of its return, nothing lost or doubled.
func TestCrashNATSRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: crash test: kills and restarts real processes")
	}
	c := newCluster(t)
	c.startLkscore("worker-a", "worker")
	l := c.startLoad("Nats", 30)
	time.Sleep(6 * time.Second)
	if err := c.nats.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-c.nats.exit
	time.Sleep(3 * time.Second)
	c.startNATS()
	backAt := time.Now()
	time.Sleep(8 * time.Second)
	sent := l.finish()
	cards := c.checkExactlyOnce(sent, 3*crashAckWait)
	// After a reconnect (the client retries every 0.5 s) a stage's open fetch
	// may wait out its pull (ack_wait/2), then the session settles.
	assertResumed(t, "NATS restart", cards, backAt, 500*time.Millisecond+crashAckWait/2+time.Second)
}

// assertResumed checks that scoring resumed within bound of back, and
// never later than the 5 s the pipeline promises.
func assertResumed(t *testing.T, fault string, cards map[string]time.Time, back time.Time, bound time.Duration) {
	t.Helper()
	first, ok := firstAfter(cards, back)
	if !ok {
		t.Fatalf("%s: nothing scored after the fault ended", fault)
	}
	took := first.Sub(back)
	t.Logf("%s: first scorecard %.2f s after the fault ended (bound %s)", fault, took.Seconds(), bound)
	if took > min(bound, 5*time.Second) {
		t.Errorf("%s: scoring resumed %s after the fault ended, want within %s", fault, took, min(bound, 5*time.Second))
	}
}

// TestCrashS3Outage: stop the S3 gateway under load for 8 s: the workers
// pause (readiness says so) and resume within 5 s of its return.
func TestCrashS3Outage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: crash test: kills and restarts real processes")
	}
	c := newCluster(t)
	w := c.startLkscore("worker-a", "worker")
	l := c.startLoad("S3", 30)
	time.Sleep(5 * time.Second)
	c.s3.Stop()
	stoppedAt := time.Now()
	// The worker notices within its up-probe interval (5 s), even with no
	// work touching the store, and says so.
	testenv.WaitFor(t, 7*time.Second, "the worker's /readyz to report the outage", func() bool {
		resp, err := http.Get("http://" + w.ops + "/readyz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == 503
	})
	t.Logf("S3 outage: worker not ready %.1f s after the store stopped", time.Since(stoppedAt).Seconds())
	time.Sleep(time.Until(stoppedAt.Add(8 * time.Second)))
	c.s3.Start(t)
	backAt := time.Now()
	time.Sleep(8 * time.Second)
	sent := l.finish()
	cards := c.checkExactlyOnce(sent, 3*crashAckWait)
	// The probe notices within health_interval; the held messages are
	// retried at once and their sessions settle.
	assertResumed(t, "S3 outage", cards, backAt, crashHealthInterval+crashSettle+time.Second)
}

// TestCrashSIGTERMUnderLoad: SIGTERM one of two workers under load: it
// drains and exits 0 within shutdown_timeout; nothing is lost or doubled.
func TestCrashSIGTERMUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: crash test: kills and restarts real processes")
	}
	c := newCluster(t)
	a := c.startLkscore("worker-a", "worker")
	c.startLkscore("worker-b", "worker")
	l := c.startLoad("Term", 40)
	time.Sleep(6 * time.Second)
	termAt := time.Now()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.exit:
		if err != nil {
			t.Errorf("worker-a after SIGTERM: %v", err)
		}
		t.Logf("SIGTERM: worker-a exited after %.2f s", time.Since(termAt).Seconds())
	case <-time.After(crashShutdownTimeout + time.Second):
		t.Fatalf("worker-a did not exit within its shutdown_timeout (%s)", crashShutdownTimeout)
	}
	time.Sleep(5 * time.Second)
	sent := l.finish()
	c.checkExactlyOnce(sent, 3*crashAckWait)
}

// TestCrashRestartMidWork: a single worker is killed while it provably has
// work in progress (some sessions scored, others not), and a new worker
// process finishes them: each exactly once.
func TestCrashRestartMidWork(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: crash test: kills and restarts real processes")
	}
	c := newCluster(t)
	l := c.startLoad("Mid", 60)
	time.Sleep(4 * time.Second) // a backlog, nothing scored yet: no worker runs
	sent := l.finish()
	if n, _ := c.scorecards(); len(n) != 0 {
		t.Fatalf("%d scorecards without a worker", len(n))
	}
	w := c.startLkscore("worker-a", "worker")
	var scored int
	testenv.WaitFor(t, 20*time.Second, "some but not all sessions scored", func() bool {
		cards, _ := c.scorecards()
		scored = len(cards)
		return scored > 0
	})
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.exit
	atKill, _ := c.scorecards()
	if len(atKill) >= len(sent) {
		t.Fatalf("all %d sessions were scored before the kill: the test interrupted nothing", len(sent))
	}
	t.Logf("restart mid-work: %d of %d sessions scored when the worker was killed", len(atKill), len(sent))
	restartAt := time.Now()
	c.startLkscore("worker-b", "worker")
	cards := c.checkExactlyOnce(sent, 3*crashAckWait)
	var last time.Time
	for _, ts := range cards {
		if ts.After(last) {
			last = ts
		}
	}
	t.Logf("restart mid-work: the rest scored %.1f s after the new worker started", last.Sub(restartAt).Seconds())
	if bound := crashAckWait + crashSettle + 5*time.Second; last.Sub(restartAt) > bound {
		t.Errorf("the rest took %s after the restart, want within %s (ack_wait + settle + 5 s)", last.Sub(restartAt), bound)
	}
}
