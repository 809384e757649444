package consumer

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/scenarios"
)

var updateGoldens = flag.Bool("update", false, "rewrite the golden scorecards of the scenarios scored from their signals")

// TestScenariosFromSignals: each acceptance scenario whose facts come from
// the room's webhooks and the SDK's logs (8_room_deleted_no_logs: session
// f of the real livekit-server and agents-js recording, the caller
// deleting the room, the agent's logs off) is sent as they were, to a
// daemon with the default pipeline settings, and gets its golden scorecard
// byte for byte (but for where the daemon stored the recording).
func TestScenariosFromSignals(t *testing.T) {
	t.Parallel()
	all, err := scenarios.All()
	if err != nil {
		t.Fatal(err)
	}
	cfg := pipelineConfig(t, "")
	def := config.Default().Pipeline
	cfg.Pipeline.CloseReasons, cfg.Pipeline.SettleWindow, cfg.Pipeline.RoomFinishedWait = def.CloseReasons, def.SettleWindow, def.RoomFinishedWait
	d, _ := startDaemon(t, cfg)
	snd := sdkclient.New("http://"+d.IngestAddr(), testenv.Key, testenv.Secret)
	want := map[string]scenarios.Scenario{}
	for _, sc := range all {
		if !sc.FromSignals() {
			continue
		}
		if err := snd.Upload(context.Background(), sc.Header, sc.Chat); err != nil {
			t.Fatal(err)
		}
		for _, body := range sc.Webhooks {
			if err := snd.WebhookBody(context.Background(), body); err != nil {
				t.Fatal(err)
			}
		}
		if sc.Logs != nil {
			if err := snd.Logs(context.Background(), sc.Logs); err != nil {
				t.Fatal(err)
			}
		}
		want[sc.Name] = sc
	}
	if len(want) == 0 {
		t.Fatal("no scenario is scored from its signals")
	}
	url := d.NATSURL()
	testenv.WaitFor(t, settleWait, "the scenarios' scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) >= len(want) })
	quiesce(t, url, defaultConsumers)
	cards := results(t, url)
	if len(cards) != len(want) {
		t.Fatalf("%d scorecards for %d scenarios", len(cards), len(want))
	}
	for name, sc := range want {
		var golden struct {
			Session struct{ Key string } `json:"session"`
		}
		_ = json.Unmarshal(sc.Golden, &golden)
		for _, c := range cards {
			if *updateGoldens && golden.Session.Key == "" || c.Session.Key == golden.Session.Key {
				c.Session.Source = "scenarios/data/" + name + "/" // the daemon's store: a temporary directory
				got, err := json.MarshalIndent(c, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, '\n')
				path := filepath.Join("..", "scenarios", "data", name, "scorecard.golden.json")
				if *updateGoldens {
					if err := os.WriteFile(path, got, 0o644); err != nil {
						t.Fatal(err)
					}
					sc.Golden = got
				}
				if !bytes.Equal(got, sc.Golden) {
					t.Errorf("%s: the daemon's scorecard differs from %s (rerun with -update if intended):\n%s", name, path, got)
				}
			}
		}
	}
}
