package consumer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/session"
)

// TestNoEvidenceNoPass: uploads as a user with transcripts off or a part
// lost would send them, through the daemon: a header alone, an empty chat
// history, and a chat history where only the agent spoke. None is a pass;
// each card names what was missing; the regression history takes none of
// them, and takes the clean call sent beside them.
func TestNoEvidenceNoPass(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	clean := mustReadFile(t, scenarioDir+"/1_clean_call/chat_history.json")
	agentOnly := []byte(`{"items":[{"id":"item_a1","type":"message","role":"assistant","content":["Hello, how can I help?"],` +
		`"interrupted":false,"created_at":1764417600.5,"metrics":{"started_speaking_at":1764417601.0,"stopped_speaking_at":1764417602.5}}]}`)
	uploads := map[string][]byte{"RM_NoChat": nil, "RM_EmptyChat": []byte(`{"items":[]}`), "RM_Silent": agentOnly, "RM_Clean": clean}
	for room, chat := range uploads {
		parts := testenv.FullParts(testenv.HeaderWithSummary(t, room, "AJ_"+room, `{"close_reason":"CR_PARTICIPANT_DISCONNECTED"}`), chat, nil)[:2]
		if chat == nil {
			parts = parts[:1]
		}
		body, ct := testenv.PythonUpload(t, parts)
		if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)),
			ct, bytes.NewReader(body)); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", room, resp.StatusCode, msg)
		}
	}
	testenv.WaitFor(t, settleWait, "four scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) == len(uploads) })
	quiesce(t, url, defaultConsumers)
	want := map[string]struct{ verdict, says string }{
		"RM_NoChat":    {session.Unscored, "no chat history"},
		"RM_EmptyChat": {session.Unscored, "no chat history"},
		"RM_Silent":    {session.Warn, "no user turn"},
		"RM_Clean":     {session.Pass, "weighted score"},
	}
	for _, c := range results(t, url) {
		w := want[c.Session.RoomID]
		if c.Overall.Verdict != w.verdict || !strings.Contains(strings.Join(c.Overall.Reasons, "; "), w.says) {
			t.Errorf("%s: %s %v, want %s saying %q", c.Session.RoomID, c.Overall.Verdict, c.Overall.Reasons, w.verdict, w.says)
		}
	}
	var history string
	testenv.WaitFor(t, settleWait, "the clean call in the regression history", func() bool {
		history = ""
		for _, m := range streamMsgs(t, url, "KV_LKSCORE_REGRESSION") {
			history += string(m.Data)
		}
		return strings.Contains(history, "RM_Clean/AJ_RM_Clean")
	})
	for room := range want {
		if room != "RM_Clean" && strings.Contains(history, room+"/") {
			t.Errorf("%s is in the regression history", room)
		}
	}
}

// TestNotSelectedIsVisible: a located session whose close reason the pool's
// pipeline.close_reasons leaves out is logged once at info with its reason,
// and the dashboard's pipeline line counts it.
func TestNotSelectedIsVisible(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	cfg.Pipeline.CloseReasons = slices.DeleteFunc(config.Default().Pipeline.CloseReasons, func(r string) bool { return r == "CR_USER_INITIATED" })
	d, _, logs := startDaemonLogging(t, cfg, slog.LevelInfo)
	body, ct := testenv.PythonUpload(t, testenv.FullParts(testenv.HeaderWithSummary(t, "RM_Off", "AJ_Off", `{"close_reason":"CR_USER_INITIATED"}`),
		mustReadFile(t, scenarioDir+"/1_clean_call/chat_history.json"), nil)[:2])
	if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)),
		ct, bytes.NewReader(body)); resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, msg)
	}
	const line = "session not scored by configuration"
	testenv.WaitFor(t, settleWait, "the not-selected log line", func() bool { return strings.Contains(logs.String(), line) })
	time.Sleep(2 * cfg.Pipeline.SettleWindow) // a second settler pass must not log it again
	var found []map[string]any
	for _, l := range strings.Split(logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(l), &rec) == nil && strings.HasPrefix(fmt.Sprint(rec["msg"]), line) {
			found = append(found, rec)
		}
	}
	if len(found) != 1 || found[0]["level"] != "INFO" || found[0]["close_reason"] != "CR_USER_INITIATED" || found[0]["session_key"] != "RM_Off/AJ_Off" {
		t.Errorf("not-selected log lines: %v", found)
	}
	resp, err := http.Get("http://" + d.OpsAddr() + "/ui")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !regexp.MustCompile(`class="not-selected"><b>CR_USER_INITIATED</b> 1<`).Match(page) {
		i := bytes.Index(page, []byte(`id="pipeline"`))
		t.Errorf("the dashboard's pipeline line does not count the session: %s", page[max(i, 0):min(max(i, 0)+400, len(page))])
	}
}
