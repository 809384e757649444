package consumer

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/cases"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/rules"
	"github.com/lkscore/lkscore/store"
)

// TestCasesOfFieldSessions: the six sessions a real livekit-server and
// agents-js worker sent (testdata/field, replayed in order), each exported
// as a case and checked again: every one gets what its card got (their
// audio measurement reused from the card), and each gives an agent test.
// Data the case code was not built around, beside the acceptance scenarios
// of TestCaseExportAndCheck.
func TestCasesOfFieldSessions(t *testing.T) {
	t.Parallel()
	cfg := pipelineConfig(t, "")
	def := config.Default().Pipeline
	cfg.Pipeline.CloseReasons, cfg.Pipeline.SettleWindow, cfg.Pipeline.RoomFinishedWait = def.CloseReasons, def.SettleWindow, def.RoomFinishedWait
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	replayField(t, d)
	testenv.WaitFor(t, settleWait+def.RoomFinishedWait, "six scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) >= 6 })
	quiesce(t, url, defaultConsumers)
	st, err := store.OpenLocalDir(filepath.Join(cfg.DataDir, "recordings"))
	if err != nil {
		t.Fatal(err)
	}
	scorer, err := rules.NewScorer(cfg.Scoring)
	if err != nil {
		t.Fatal(err)
	}
	e := cases.Exporter{JS: testenv.JetStream(t, url), Subjects: d.subjects, Store: st, Config: cfg, Scorer: scorer}
	cards := results(t, url)
	if len(cards) != 6 {
		t.Fatalf("%d scorecards, want 6", len(cards))
	}
	for _, c := range cards {
		f, err := e.Export(context.Background(), c.Session.Key)
		if err != nil {
			t.Errorf("%s: %v", c.Session.Key, err)
			continue
		}
		dir := t.TempDir()
		if err := f.WriteDir(dir); err != nil {
			t.Fatal(err)
		}
		if r := cases.Check(context.Background(), dir); !r.OK() {
			t.Errorf("%s: the case does not reproduce its card: %v %v", c.Session.Key, r.Err, r.Diff)
		}
		if _, err := f.Pytest(); err != nil {
			t.Errorf("%s: pytest: %v", c.Session.Key, err)
		}
	}
}
