//go:build !race

package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
)

// nodeBytes is every byte of every file in a NATS node's store directory:
// its streams' block files, and its Raft logs and snapshots.
func nodeBytes(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if os.IsNotExist(err) {
			return nil // compacted away while we walked
		}
		all = append(append(all, b...), 0)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// filesWith names the files under dir whose bytes hold marker.
func filesWith(t *testing.T, dir, marker string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(marker)) {
			rel, _ := filepath.Rel(dir, path)
			out = append(out, rel)
		}
		return nil
	})
	return out
}

// forgetRaftWait bounds how long the test waits for every node's store to
// lose the marker after forget: a stream's Raft log keeps an entry's bytes
// until the stream's next snapshot, which nats-server takes every 2 minutes
// plus up to a minute of jitter (server/jetstream_cluster.go
// monitorStream's compactInterval).
const forgetRaftWait = 4 * time.Minute

// markedSession sends a session whose tool output carries marker (the
// scorecard quotes a failed tool's output as evidence) and its job's end.
func markedSession(t *testing.T, ingest, room, job, marker string) {
	t.Helper()
	items := []map[string]any{
		{"id": "i1", "type": "message", "role": "assistant", "content": []string{"Hello"}, "created_at": 1764417601.0},
		{"id": "i2", "type": "message", "role": "user", "content": []string{"say " + marker}, "created_at": 1764417603.0},
		{"id": "i3", "type": "function_call", "call_id": "c1", "name": "lookup", "arguments": `{}`, "created_at": 1764417604.0},
		{"id": "i4", "type": "function_call_output", "call_id": "c1", "name": "lookup", "output": "timeout for " + marker, "is_error": true,
			"created_at": 1764417605.0},
		{"id": "i5", "type": "message", "role": "assistant", "content": []string{"Sorry"}, "created_at": 1764417606.0},
	}
	chat, _ := json.Marshal(map[string]any{"items": items})
	header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: room, JobId: job, SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
	snd := sdkclient.New("http://"+ingest, crashKey, crashSecret)
	ctx := context.Background()
	if err := snd.Upload(ctx, header, chat); err != nil {
		t.Fatal(err)
	}
	ev := &livekit.WebhookEvent{Event: "agent_job_ended", Id: "EV_" + job, CreatedAt: time.Now().Unix(),
		Job: &livekit.Job{Id: job, AgentName: "forget-agent", Room: &livekit.Room{Sid: room}, State: &livekit.JobState{Status: livekit.JobStatus_JS_SUCCESS}}}
	if err := snd.Webhook(ctx, ev); err != nil {
		t.Fatal(err)
	}
}

// TestForgetR3Cluster: lkscore on a real 3-node NATS cluster, every stream
// and bucket with 3 replicas. Two sessions are scored; each node's store
// (block files, Raft logs) holds both sessions' markers. `lkscore forget`
// (the binary, as an operator runs it) of one session: at once no stream's
// own store on any node holds its marker, only the nodes' Raft logs; within
// the next stream snapshot (2-3 minutes) no byte of any node's store
// directory does; every node still holds the other session's (the scan
// sees what is there).
func TestForgetR3Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a 3-node NATS cluster")
	}
	dir := t.TempDir()
	nodes := startNATSCluster(t, dir)
	c := clusterOn(t, dir, nodes)
	lk := c.spawn("lk-a", "all")
	waitReady(t, lk, 60*time.Second)
	const gone, kept = "MRKforgetR3gone", "MRKforgetR3kept"
	markedSession(t, lk.http, "RM_R3Gone", "AJ_R3Gone", gone)
	markedSession(t, lk.http, "RM_R3Kept", "AJ_R3Kept", kept)
	testenv.WaitFor(t, 60*time.Second, "both scorecards", func() bool { cards, _ := c.scorecards(); return len(cards) == 2 })
	time.Sleep(2 * time.Second) // the followers apply the last entries
	for _, n := range nodes {
		raw := nodeBytes(t, n.dir)
		if !bytes.Contains(raw, []byte(gone)) || !bytes.Contains(raw, []byte(kept)) {
			t.Fatalf("before forget node %s holds gone=%v kept=%v: the scan sees nothing", n.name,
				bytes.Contains(raw, []byte(gone)), bytes.Contains(raw, []byte(kept)))
		}
	}

	bin, _ := binaries(t)
	cmd := exec.Command(bin, "forget", "--config", c.cfgFile, "--nats-url", c.natsURL(), "--data-dir", filepath.Join(dir, "lk-a"),
		"--session", "RM_R3Gone/AJ_R3Gone")
	cmd.Env = append(c.s3Env(), "LIVEKIT_API_KEY="+crashKey, "LIVEKIT_API_SECRET="+crashSecret)
	out, err := cmd.CombinedOutput()
	t.Logf("lkscore forget:\n%s", out)
	if err != nil {
		t.Fatalf("lkscore forget: %v", err)
	}
	// At once: no stream's own store on any node holds the marker (secure
	// delete on every replica); only the nodes' Raft logs may, until the
	// stream's next snapshot compacts them.
	time.Sleep(2 * time.Second)
	for _, n := range nodes {
		for _, f := range filesWith(t, n.dir, gone) {
			if !strings.HasPrefix(f, filepath.Join("jetstream", "$SYS", "_js_")+string(filepath.Separator)) {
				t.Errorf("node %s: %s holds the marker after forget", n.name, f)
			}
		}
	}
	var left []string
	deadline := time.Now().Add(forgetRaftWait)
	forgotAt := time.Now()
	for {
		left = nil
		for _, n := range nodes {
			raw := nodeBytes(t, n.dir)
			if i := bytes.Index(raw, []byte(gone)); i >= 0 {
				left = append(left, fmt.Sprintf("%s %v: …%q…", n.name, filesWith(t, n.dir, gone), raw[max(0, i-80):min(len(raw), i+40)]))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	for _, l := range left {
		t.Errorf("%s after forget: %s", forgetRaftWait, l)
	}
	t.Logf("the marker left every node's store, Raft logs included, %s after forget", time.Since(forgotAt).Round(time.Second))
	for _, n := range nodes {
		if !bytes.Contains(nodeBytes(t, n.dir), []byte(kept)) {
			t.Errorf("node %s lost the session not forgotten: the scan proves nothing", n.name)
		}
	}
}
