package crashtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lkscore/lkscore/internal/testenv"
)

// TestNATSRestartBacklog (issue 59): an ingest and a worker process against
// a standalone nats-server; a burst of sessions from 32 clients; while it
// is sent, nats-server is stopped with SIGTERM and started again on the
// same port and store 5 s later, five times in a row. Every session
// acknowledged before NATS answered again (the backlog) is scored within
// 2 s of it answering; nothing lost, nothing scored twice. The rest of the
// burst, acknowledged after, is logged (its wait is the burst's queue). Per restart it logs
// the scorecards per second from the fault and each session's wait.
func TestNATSRestartBacklog(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: crash test: restarts nats-server five times under load")
	}
	rounds, perRound := 5, 300
	if v, err := strconv.Atoi(os.Getenv("LKSCORE_BACKLOG_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	const bound = 2 * time.Second
	c := newCluster(t)
	// The pipeline as a deployment runs it: its defaults (retry_base 5 s,
	// ack_wait 15 s, nats timeouts), not the crash tests' short ones.
	c.cfgFile = filepath.Join(c.dir, "defaults.yaml")
	testenv.WriteFile(t, c.cfgFile, backlogConfig)
	// The daemon as one process, as the issue measured it: the load goes to
	// its ingest server (the cluster's own ingest process stays idle).
	c.ingest = c.startLkscore("all", "all")
	var worst []string
	for r := range rounds {
		l := c.startLoad(fmt.Sprintf("Bk%d", r), 1) // a trickle; the burst is the load
		time.Sleep(500 * time.Millisecond)
		done := l.burst(perRound, 32)
		for l.count() < perRound/3 {
			time.Sleep(10 * time.Millisecond)
		}
		if err := c.nats.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		stopAt := time.Now()
		<-c.nats.exit
		time.Sleep(time.Until(stopAt.Add(5 * time.Second)))
		c.startNATS()
		backAt := time.Now() // startNATS returns once a client connects
		<-done
		sent := l.finish()
		cards := c.checkRoundScored(sent, 30*time.Second)
		// The backlog (acknowledged before NATS answered) must be scored
		// within bound of NATS answering; the rest of the burst is logged.
		late, waiting, maxLag := 0, 0, time.Duration(0)
		for k, ackAt := range sent {
			ready := ackAt
			if ackAt.Before(backAt) {
				ready, waiting = backAt, waiting+1
			}
			scored, ok := cards[k]
			if !ok {
				continue // checkExactlyOnce says so
			}
			lag := scored.Sub(ready)
			if ackAt.Before(backAt) && lag > maxLag {
				maxLag = lag
			}
			if ackAt.Before(backAt) && lag > bound {
				late++
				if len(worst) < 10 {
					worst = append(worst, fmt.Sprintf("round %d %s: acknowledged %s, scored %.2f s after it was ready", r, k,
						ackAt.Sub(stopAt).Round(time.Millisecond), lag.Seconds()))
				}
			}
		}
		t.Logf("restart %d: %d sessions (%d waiting when NATS answered %.1f s after SIGTERM); the backlog's longest wait %.2f s; %d of it over %s; "+
			"scorecards per second from the fault: %s", r+1, len(sent), waiting, backAt.Sub(stopAt).Seconds(), maxLag.Seconds(), late, bound,
			perSecond(cards, stopAt, 14))
		if late > 0 {
			t.Errorf("restart %d: %d waiting sessions scored more than %s after NATS answered", r+1, late, bound)
		}
	}
	for _, w := range worst {
		t.Log(w)
	}
}

// checkRoundScored waits until every session of sent (one round of
// several on one cluster) has a scorecard, then checks that none is
// missing, none of the stream's is duplicated and nothing is dead-lettered.
func (c *cluster) checkRoundScored(sent map[string]time.Time, within time.Duration) map[string]time.Time {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for {
		cards, dup := c.scorecards()
		missing := 0
		for k := range sent {
			if _, ok := cards[k]; !ok {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			if missing > 0 || dup > 0 {
				c.t.Errorf("%d sessions acknowledged: %d missing, %d scorecards of the stream duplicated", len(sent), missing, dup)
			}
			if n := c.deadLetters(); n != 0 {
				c.t.Errorf("%d dead letters", n)
			}
			return cards
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// backlogConfig is lkscore's defaults but for what the test environment
// needs (its S3 bucket) and a settle window the sessions never wait for
// (they name their close reason).
const backlogConfig = `
shutdown_timeout: 10s
s3: {bucket: rec, region: us-east-1, force_path_style: true}
`

// perSecond is the scorecards received in each second from `from`, for n
// seconds: "9 0 0 0 0 130 …".
func perSecond(cards map[string]time.Time, from time.Time, n int) string {
	counts := make([]int, n)
	for _, at := range cards {
		if i := int(at.Sub(from) / time.Second); i >= 0 && i < n {
			counts[i]++
		}
	}
	out := make([]string, n)
	for i, c := range counts {
		out[i] = strconv.Itoa(c)
	}
	return strings.Join(out, " ")
}
