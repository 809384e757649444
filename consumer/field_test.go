package consumer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/internal/facts"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/session"
)

// fieldDir is a real livekit-server v1.13.11 and agents-js 1.9.0 worker's
// traffic, as recorded (testdata/field/README.md has its provenance).
var fieldDir = filepath.Join("testdata", "field", "lkreal-2026-12-03")

// fieldRequest is one request of recv.jsonl.
type fieldRequest struct {
	Seq             int             `json:"seq"`
	Method          string          `json:"method"`
	Path            string          `json:"path"`
	ContentType     string          `json:"content_type"`
	ContentEncoding string          `json:"content_encoding"`
	JSON            json.RawMessage `json:"json"`
}

// body is the request's body: the JSON the recorder kept, or the binary
// body it saved in bodies/.
func (r fieldRequest) body(t *testing.T) []byte {
	t.Helper()
	if len(r.JSON) > 0 && string(r.JSON) != "null" {
		return r.JSON
	}
	name := fmt.Sprintf("%05d_%s.bin", r.Seq, strings.ReplaceAll(strings.Trim(r.Path, "/"), "/", "_"))
	return mustReadFile(t, filepath.Join(fieldDir, "bodies", name))
}

// sentBody is the body as the server or the SDK sent it: the recorder saved
// gzipped bodies decoded, so those are compressed again, as the SDK's
// exporter sent them.
func (r fieldRequest) sentBody(t *testing.T) []byte {
	t.Helper()
	body := r.body(t)
	if r.ContentEncoding != "gzip" {
		return body
	}
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	_, _ = zw.Write(body)
	_ = zw.Close()
	return zb.Bytes()
}

// fieldSession is what the job process itself saw of one session
// (sdk-http.jsonl): its room and the close reason the SDK reported.
type fieldSession struct {
	Room, Mode string
	NoLogs     bool
	SDKReason  string // as the SDK's close event named it
}

func fieldSessions(t *testing.T) map[string]*fieldSession {
	t.Helper()
	f, err := os.Open(filepath.Join(fieldDir, "sdk-http.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	byJob := map[string]*fieldSession{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e struct {
			Event  string `json:"event"`
			JobID  string `json:"job_id"`
			Room   string `json:"room"`
			Mode   string `json:"mode"`
			Reason string `json:"reason"`
			NoLogs bool   `json:"nologs"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Event {
		case "job_entry":
			byJob[e.JobID] = &fieldSession{Room: e.Room, Mode: e.Mode, NoLogs: e.NoLogs}
		case "session_close":
			if s := byJob[e.JobID]; s != nil {
				s.SDKReason = e.Reason
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return byJob
}

// TestFieldSessionsReplayed replays everything a real livekit-server and a
// real agents-js worker sent during six sessions (webhooks, OTLP logs,
// traces and metrics, the recording uploads, in arrival order, each
// re-signed with the test's key) into a daemon with the default pipeline
// settings. Three endings, each with the agent's logs on (a, b, c: the
// SDK names its close reason) and off (d, e, f: only the room's webhooks
// and the traces are there). Every session is scored exactly once; each
// card's close reason is the one the SDK itself reported for that session,
// whatever signal told it; each carries its room's name and end reason.
func TestFieldSessionsReplayed(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	def := config.Default().Pipeline
	cfg.Pipeline.CloseReasons, cfg.Pipeline.SettleWindow, cfg.Pipeline.RoomFinishedWait = def.CloseReasons, def.SettleWindow, def.RoomFinishedWait
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	sessions := fieldSessions(t)
	if len(sessions) != 6 {
		t.Fatalf("sdk-http.jsonl names %d sessions, want 6", len(sessions))
	}

	reports := fieldUsageReports(t)
	sent := replayField(t, d)
	if sent["/webhook"] != 60 || sent["/observability/recordings/v0"] != 6 {
		t.Fatalf("replayed %v; want 60 webhooks and 6 uploads", sent)
	}

	testenv.WaitFor(t, settleWait+def.RoomFinishedWait, "six scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) >= len(sessions) })
	quiesce(t, url, defaultConsumers)
	cards := results(t, url)
	if len(cards) != len(sessions) {
		t.Fatalf("%d scorecards for %d sessions: each is scored exactly once", len(cards), len(sessions))
	}
	byMode := map[string]session.Scorecard{}
	for _, c := range cards {
		job := c.Session.JobID
		s := sessions[job]
		if s == nil {
			t.Errorf("scorecard for job %q, which no session ran", job)
			continue
		}
		if _, dup := byMode[s.Mode+fmt.Sprint(s.NoLogs)]; dup {
			t.Errorf("%s scored twice", s.Room)
		}
		byMode[s.Mode+fmt.Sprint(s.NoLogs)] = c
		sdkReason, _ := recording.NormalizeCloseReasonString(s.SDKReason)
		wantSource := facts.SourceOTLPLog
		if s.NoLogs {
			wantSource = facts.SourceRoom
		}
		t.Logf("%s (logs off %v): SDK said %s; card %s from %s (%s); room %q ended %s; verdict %s %v", s.Room, s.NoLogs, s.SDKReason,
			c.Completion.CloseReason, c.Completion.CloseReasonSource, c.Completion.CloseReasonEvidence, c.Session.RoomName,
			c.Session.RoomEndReason, c.Overall.Verdict, c.Overall.Score)
		if c.Completion.CloseReason != sdkReason || c.Completion.CloseReasonSource != wantSource {
			t.Errorf("%s: close reason %s from %s (%q); the SDK reported %s", s.Room, c.Completion.CloseReason,
				c.Completion.CloseReasonSource, c.Completion.CloseReasonEvidence, sdkReason)
		}
		if c.Session.RoomName != s.Room {
			t.Errorf("%s: card's room name %q", s.Room, c.Session.RoomName)
		}
		if c.Session.RoomEndReason == "" {
			t.Errorf("%s: no room end reason, although room_finished came", s.Room)
		}
		if c.Session.APIKey != testenv.Key {
			t.Errorf("%s: the card's project (API key) is %q, the key that signed everything is %q", s.Room, c.Session.APIKey, testenv.Key)
		}
		if c.Overall.Verdict == session.Unscored || c.Session.SDK == nil || c.Session.SDK.Language != facts.SDKNode {
			t.Errorf("%s: verdict %s, SDK %+v", s.Room, c.Overall.Verdict, c.Session.SDK)
		}
		checkFieldUsage(t, s.Room, c.Usage, reports[job])
	}
	// The same ending, logs on or off: the same close reason.
	for _, mode := range []string{"caller_leaves", "agent_shutdown", "room_deleted"} {
		on, off := byMode[mode+"false"], byMode[mode+"true"]
		if on.Completion.CloseReason != off.Completion.CloseReason {
			t.Errorf("%s: %s with the agent's logs, %s without", mode, on.Completion.CloseReason, off.Completion.CloseReason)
		}
	}
}

// replayField posts every request of the recorded traffic to d's ingest, as
// the server and the SDK sent it (bodies the recorder saved decoded are
// gzipped again), and fails on any answer but 200. It returns how many
// requests went to each path.
func replayField(t *testing.T, d *Daemon) map[string]int {
	t.Helper()
	sent := map[string]int{}
	for _, r := range fieldRequests(t) {
		auth := testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true))
		if r.Path == "/webhook" {
			auth = testenv.SignWebhook(t, testenv.Key, testenv.Secret, r.body(t), 5*time.Minute)
		}
		body := r.sentBody(t)
		req, _ := http.NewRequest(http.MethodPost, "http://"+d.IngestAddr()+r.Path, bytes.NewReader(body))
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", r.ContentType)
		if r.ContentEncoding != "" {
			req.Header.Set("Content-Encoding", r.ContentEncoding)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var msg bytes.Buffer
		_, _ = msg.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d %s: %d %s", r.Seq, r.Path, resp.StatusCode, msg.String())
		}
		sent[r.Path]++
	}
	return sent
}

// fieldRequests are the recording's POST requests (recv.jsonl), in arrival order.
func fieldRequests(t *testing.T) []fieldRequest {
	t.Helper()
	f, err := os.Open(filepath.Join(fieldDir, "recv.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 4<<20)
	var out []fieldRequest
	for sc.Scan() {
		var r fieldRequest
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.Method == http.MethodPost {
			out = append(out, r)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// fieldPIIValues are the values of every lk.pii.* span attribute in the
// recorded traces (agents-js 1.9.0 puts transcripts, the chat context, the
// LLM's responses and tool payloads there), at least 8 bytes long.
func fieldPIIValues(t *testing.T) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fieldDir, "bodies", "*_observability_traces_otlp_v0.bin"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recorded traces: %v", err)
	}
	seen := map[string]bool{}
	for _, p := range paths {
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(mustReadFile(t, p), &req); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, sp := range ss.GetSpans() {
					for _, kv := range sp.GetAttributes() {
						if v := kv.GetValue().GetStringValue(); strings.HasPrefix(kv.GetKey(), "lk.pii.") && len(v) >= 8 {
							seen[v] = true
						}
					}
				}
			}
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// TestFieldPIISpansKeptNowhere: the real agents-js sessions' spans carry
// their transcripts and the LLM's text under lk.pii.*; replayed with every
// session redacted (privacy.redaction: always) and privacy.mode
// metadata_only, none of that text is in any stream or bucket message, nor,
// once the daemon has stopped, in any byte under its data directory (the
// NATS store and the recording store).
func TestFieldPIISpansKeptNowhere(t *testing.T) {
	t.Parallel()
	pii := fieldPIIValues(t)
	if len(pii) < 5 {
		t.Fatalf("only %d lk.pii.* values in the recorded traces: the scan would prove little", len(pii))
	}
	cfg := pipelineConfig(t, "")
	def := config.Default().Pipeline
	cfg.Pipeline.CloseReasons, cfg.Pipeline.SettleWindow, cfg.Pipeline.RoomFinishedWait = def.CloseReasons, def.SettleWindow, def.RoomFinishedWait
	cfg.Privacy.Redaction, cfg.Privacy.Mode = "always", "metadata_only"
	d, _ := startDaemon(t, cfg)
	replayField(t, d)
	url := d.NATSURL()
	testenv.WaitFor(t, settleWait+def.RoomFinishedWait, "six scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) >= 6 })
	quiesce(t, url, defaultConsumers)
	stored := storedMessages(t, url)
	if !strings.Contains(stored, "AgentSession closed") && !strings.Contains(stored, "CR_") {
		t.Fatal("the streams hold nothing recognisable: the scan proves nothing")
	}
	for _, l := range leaked(stored, pii) {
		t.Errorf("a stream message keeps span text: %s", l)
	}
	if err := d.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, l := range leaked(string(rawBytes(t, cfg.DataDir)), pii) {
		t.Errorf("the data directory keeps span text: %s", l)
	}
}

// fieldUsageReports are the usage lists of the recorded session reports
// (OTLP/JSON logs, body "session report", attribute usage), by job id, each
// entry as the SDK sent it: its keys and values, numbers as JSON numbers.
func fieldUsageReports(t *testing.T) map[string][]map[string]any {
	t.Helper()
	type anyValue struct {
		StringValue *string  `json:"stringValue"`
		IntValue    *string  `json:"intValue"`
		DoubleValue *float64 `json:"doubleValue"`
		ArrayValue  *struct {
			Values []json.RawMessage `json:"values"`
		} `json:"arrayValue"`
		KvlistValue *struct {
			Values []struct {
				Key   string   `json:"key"`
				Value anyValue `json:"value"`
			} `json:"values"`
		} `json:"kvlistValue"`
	}
	out := map[string][]map[string]any{}
	for _, r := range fieldRequests(t) {
		if r.Path != "/observability/logs/otlp/v0" || len(r.JSON) == 0 {
			continue
		}
		var req struct {
			ResourceLogs []struct {
				ScopeLogs []struct {
					LogRecords []struct {
						Body       anyValue `json:"body"`
						Attributes []struct {
							Key   string   `json:"key"`
							Value anyValue `json:"value"`
						} `json:"attributes"`
					} `json:"logRecords"`
				} `json:"scopeLogs"`
			} `json:"resourceLogs"`
		}
		if err := json.Unmarshal(r.JSON, &req); err != nil {
			t.Fatal(err)
		}
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, rec := range sl.LogRecords {
					if rec.Body.StringValue == nil || *rec.Body.StringValue != "session report" {
						continue
					}
					var job string
					var usage []map[string]any
					for _, a := range rec.Attributes {
						switch {
						case a.Key == "job_id" && a.Value.StringValue != nil:
							job = *a.Value.StringValue
						case a.Key == "usage" && a.Value.ArrayValue != nil:
							for _, raw := range a.Value.ArrayValue.Values {
								var e anyValue
								if err := json.Unmarshal(raw, &e); err != nil || e.KvlistValue == nil {
									t.Fatalf("usage entry %s: %v", raw, err)
								}
								m := map[string]any{}
								for _, kv := range e.KvlistValue.Values {
									switch {
									case kv.Value.StringValue != nil:
										m[kv.Key] = *kv.Value.StringValue
									case kv.Value.IntValue != nil:
										n, err := strconv.ParseFloat(*kv.Value.IntValue, 64)
										if err != nil {
											t.Fatal(err)
										}
										m[kv.Key] = n
									case kv.Value.DoubleValue != nil:
										m[kv.Key] = *kv.Value.DoubleValue
									}
								}
								usage = append(usage, m)
							}
						}
					}
					if job != "" && usage != nil {
						out[job] = usage
					}
				}
			}
		}
	}
	return out
}

// checkFieldUsage: the card's usage lists the report's models in its order,
// each count equal to the one the SDK sent (agents-js names in camelCase,
// durations in ms: the card's in s), nothing the report left out, and the
// totals are the report's sums. No report: not reported.
func checkFieldUsage(t *testing.T, room string, u *session.Usage, report []map[string]any) {
	t.Helper()
	if report == nil {
		if u == nil || u.Reported {
			t.Errorf("%s: no usage report was sent, and the card says %+v", room, u)
		}
		return
	}
	if u == nil || !u.Reported || len(u.Models) != len(report) {
		t.Fatalf("%s: usage %+v; the report listed %d models", room, u, len(report))
	}
	var chars float64
	for i, want := range report {
		got, _ := json.Marshal(u.Models[i])
		var card map[string]any
		_ = json.Unmarshal(got, &card)
		for k, v := range want {
			key := k
			if n, ok := v.(float64); ok && strings.HasSuffix(k, "Ms") {
				key, v = strings.TrimSuffix(k, "Ms")+"_s", n/1000
			}
			key = snakeCase(key)
			if card[key] != v {
				t.Errorf("%s: model %d %s: card %v, report %v (%s)", room, i, key, card[key], v, got)
			}
			if k == "charactersCount" {
				chars += v.(float64)
			}
		}
		if len(card) != len(want) {
			t.Errorf("%s: model %d: the card has %d fields, the report %d: %s", room, i, len(card), len(want), got)
		}
	}
	if !u.TTSCharacters.Set || float64(u.TTSCharacters.V) != chars || !u.InputTokens.Set {
		t.Errorf("%s: totals %+v, the report's characters %v", room, u, chars)
	}
}

func snakeCase(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return strings.ReplaceAll(b.String(), "__", "_")
}
