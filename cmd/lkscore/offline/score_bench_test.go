package offline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/scenarios"
)

// BenchmarkScoreCommand runs `lkscore score --format json` in-process over
// 100 session directories, as tools/perf-vs-python.sh runs the binary:
// form=py|js and turns=20|100|200 score 100 copies of one field-mix history
// (full-precision numbers, each SDK's own form); mix scores the 200-turn
// histories of both SDKs alternating, with rules=0 or rules=20
// (testdata/rules20.yaml: two agents' policies and 20 rules, every session
// of one of the two agents; the difference is what the rules cost). It
// reports ns/session and the history bytes read per second.
func BenchmarkScoreCommand(b *testing.B) {
	for _, form := range []string{"py", "js"} {
		for _, turns := range []string{"020a", "100", "200"} {
			name := fmt.Sprintf("form=%s/turns=%s", form, strings.TrimSuffix(strings.TrimPrefix(turns, "0"), "a"))
			b.Run(name, func(b *testing.B) { benchScore(b, "", form+"_"+turns+".json") })
		}
	}
	b.Run("mix/rules=0", func(b *testing.B) { benchScore(b, "", "py_200.json", "js_200.json") })
	b.Run("mix/rules=20", func(b *testing.B) { benchScore(b, "testdata/rules20.yaml", "py_200.json", "js_200.json") })
}

// benchScore scores 100 session directories holding the named field
// fixtures in turn, with the config when not "".
func benchScore(b *testing.B, config string, fixtures ...string) {
	dir := b.TempDir()
	var chats [][]byte
	for _, name := range fixtures {
		f, ok := scenarios.FieldFixture(name)
		if !ok {
			b.Fatalf("no field fixture %s", name)
		}
		chats = append(chats, f.Chat)
	}
	args := []string{"score", "--format", "json"}
	if config != "" {
		args = append(args, "--config", config, "--agent", "booking")
	}
	var bytes int64
	const sessions = 100
	for i := range sessions {
		d := filepath.Join(dir, fmt.Sprintf("s%03d", i))
		header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: fmt.Sprintf("RM_%03d", i), JobId: fmt.Sprintf("AJ_%03d", i),
			SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "header.binpb"), header, 0o644); err != nil {
			b.Fatal(err)
		}
		chat := chats[i%len(chats)]
		if err := os.WriteFile(filepath.Join(d, "chat_history.json"), chat, 0o644); err != nil {
			b.Fatal(err)
		}
		bytes += int64(len(chat))
		args = append(args, d)
	}
	b.SetBytes(bytes)
	b.ReportAllocs()
	for b.Loop() {
		if err := Score(func(string) string { return "" }, io.Discard).Run(context.Background(), args); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sessions), "ns/session")
}
