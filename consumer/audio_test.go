package consumer

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/internal/testenv"
)

// TestPipelineMeasuresAudio: an upload with a stereo recording gets an audio
// block and heard turns in its scorecard; the same session without one is
// scored as the golden says.
func TestPipelineMeasuresAudio(t *testing.T) {
	t.Parallel()
	ns := startNATS(t)
	d, _ := startDaemon(t, pipelineConfig(t, ns.URL()))
	header := mustReadFile(t, filepath.Join(scenarioDir, "1_clean_call", "header.binpb"))
	chat := mustReadFile(t, filepath.Join(scenarioDir, "1_clean_call", "chat_history.json"))
	ogg := mustReadFile(t, "../audio/testdata/short.ogg")
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, ogg))
	if resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body)); resp.StatusCode != 200 {
		t.Fatalf("upload: %d %s", resp.StatusCode, msg)
	}
	sendWebhook(t, d, jobEnded("EV_audio", "RM_CleanCall01", "AJ_CleanCall01", "booking-agent", livekit.JobStatus_JS_SUCCESS))
	testenv.WaitFor(t, settleWait, "the scorecard", func() bool { return len(streamMsgs(t, ns.URL(), "LKSCORE_RESULTS")) >= 1 })
	cards := results(t, ns.URL())
	if len(cards) != 1 || cards[0].Audio == nil {
		t.Fatalf("%d scorecards, audio %+v", len(cards), cards)
	}
	au := cards[0].Audio
	if au.Refused != "" || len(au.Turns) != 1 || au.Turns[0].HeardLatencyMs < 150 || au.Turns[0].HeardLatencyMs > 350 {
		t.Fatalf("audio block %+v", au)
	}
}
