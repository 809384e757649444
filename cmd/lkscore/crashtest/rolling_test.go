//go:build !race

package crashtest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/testenv"
)

// The lame duck timings of the rolling restart's NATS nodes, the official
// NATS chart's: 30 s in all (nats-server's minimum), a 10 s grace period
// before the server closes its clients. lkscore leaves a server the moment
// it enters lame duck mode (broker.Connect), so the grace period costs no
// scoring (issue 67: with 10 s, scoring stood still 11.75 s before).
const rollingNATSConf = "lame_duck_grace_period: 10s\nlame_duck_duration: 30s\n"

// TestRollingRestart (issue 51): restarts as Kubernetes does them, under a
// steady load. A 3-node JetStream cluster (every lkscore stream at 3
// replicas) and two lkscore replicas (--role all). Each round restarts
// every NATS node in turn as the official chart's preStop does (lame duck
// mode: SIGUSR2; the server hands its leaderships over, then closes its
// clients; started again once it exited, and the next only once /healthz
// says it is current), then every lkscore process as `kubectl rollout
// restart` does (the load moved off it, as a Service stops routing to a
// terminating pod; SIGTERM; a new process, ready before the next). Scoring
// never stands still more than 2 s, p99 webhook → scorecard stays within
// 500 ms, nothing is lost or scored twice. LKSCORE_ROLLING_ROUNDS sets the
// rounds (CI runs 1; the figure is 3).
func TestRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: restarts a 3-node NATS cluster and two lkscore processes")
	}
	rounds := 1
	if v, err := strconv.Atoi(os.Getenv("LKSCORE_ROLLING_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	testenv.WriteFile(t, conf, rollingNATSConf)
	nodes := make([]*natsNode, 3)
	var routes []string
	for i := range nodes {
		nodes[i] = &natsNode{name: fmt.Sprintf("n%d", i+1), client: freeAddr(t), route: freeAddr(t), monitor: freeAddr(t),
			dir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)), conf: conf}
		routes = append(routes, "nats://"+nodes[i].route)
	}
	for _, n := range nodes {
		n.start(t, routes)
	}
	waitClusterReady(t, nodes, 30*time.Second)
	c := clusterOn(t, dir, nodes)
	procs := []*proc{c.spawn("lk-a", "all"), c.spawn("lk-b", "all")}
	for _, p := range procs {
		waitReady(t, p, 60*time.Second)
	}
	c.ingest = procs[0]
	c.front.Store(procs[0])

	l := c.startLoad("Roll", 20)
	time.Sleep(5 * time.Second)
	startAt := time.Now()
	for r := range rounds {
		for _, n := range nodes {
			took := restartLameDuck(t, n, routes)
			t.Logf("round %d: NATS %s restarted in lame duck mode, current again after %.1f s", r+1, n.name, took.Seconds())
		}
		for i := range procs {
			other := procs[(i+1)%len(procs)]
			c.front.Store(other)
			time.Sleep(200 * time.Millisecond) // the sessions in flight to it finish their request
			took := func() time.Duration {
				began := time.Now()
				if err := procs[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-procs[i].exit:
					if err != nil {
						t.Errorf("%s exited after SIGTERM: %v", procs[i].name, err)
					}
				case <-time.After(crashShutdownTimeout + 5*time.Second):
					t.Fatalf("%s did not exit within its grace period", procs[i].name)
				}
				procs[i] = c.spawn(procs[i].name, "all")
				waitReady(t, procs[i], 60*time.Second)
				return time.Since(began)
			}()
			t.Logf("round %d: %s terminated and replaced in %.1f s", r+1, procs[i].name, took.Seconds())
		}
	}
	endAt := time.Now()
	time.Sleep(3 * time.Second)
	sent := l.finish()
	cards := c.checkExactlyOnce(sent, 60*time.Second)
	stall := longestGap(cards, startAt, endAt)
	var lags []time.Duration
	var worstKey string
	var worstLag time.Duration
	for k, ackAt := range sent {
		if at, ok := cards[k]; ok && !ackAt.Before(startAt) && ackAt.Before(endAt) {
			lags = append(lags, at.Sub(ackAt))
			if at.Sub(ackAt) > worstLag {
				worstKey, worstLag = k, at.Sub(ackAt)
			}
		}
	}
	if worstKey != "" { // for the processes' logs (LKSCORE_CRASH_LOGS keeps them)
		t.Logf("the longest wait: %s, acknowledged %s after the start, scored %s later", worstKey,
			sent[worstKey].Sub(startAt).Round(time.Millisecond), worstLag.Round(time.Millisecond))
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
	p99 := time.Duration(0)
	if len(lags) > 0 {
		p99 = lags[len(lags)*99/100]
	}
	worst := lags[len(lags)-1]
	t.Logf("%d rounds over %.0f s: %d sessions, %d scorecards; longest stall %.2f s; webhook → scorecard p50 %s, p99 %s, max %s",
		rounds, endAt.Sub(startAt).Seconds(), len(sent), len(cards), stall.Seconds(), lags[len(lags)/2].Round(time.Millisecond),
		p99.Round(time.Millisecond), worst.Round(time.Millisecond))
	if worst > 2*time.Second {
		t.Errorf("a session waited %s from webhook to scorecard during the rolling restarts, want every one within 2 s", worst)
	}
	if stall > 2*time.Second {
		t.Errorf("scoring stood still %s during the rolling restarts, want at most 2 s", stall)
	}
	if p99 > 500*time.Millisecond {
		t.Errorf("webhook → scorecard p99 %s during the rolling restarts, want within 500 ms", p99)
	}
}

// restartLameDuck restarts one node as the official chart's preStop hook
// does (lame duck mode), waits for it to exit, starts it again and waits
// until its /healthz says JetStream is current; it returns how long that
// took.
func restartLameDuck(t *testing.T, n *natsNode, routes []string) time.Duration {
	t.Helper()
	began := time.Now()
	if err := n.proc.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.proc.exit:
	case <-time.After(60 * time.Second):
		t.Fatalf("NATS %s did not leave lame duck mode within 60 s", n.name)
	}
	n.start(t, routes)
	testenv.WaitFor(t, 60*time.Second, "NATS "+n.name+" current (/healthz)", func() bool {
		resp, err := http.Get("http://" + n.monitor + "/healthz")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return time.Since(began)
}
