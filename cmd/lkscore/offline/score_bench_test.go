package offline

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"

	"github.com/lkscore/lkscore/scenarios"
)

// BenchmarkScoreCommand runs `lkscore score --format json` in-process over
// 100 session directories with the field mix's full-precision 200-turn
// histories (both SDKs' forms), as tools/perf-vs-python.sh runs the binary.
// Per session: divide ns/op by 100. rules=20 scores them with
// testdata/rules20.yaml (two agents' policies and 20 rules, every session
// of one of the two agents): the difference is what the rules cost in a
// whole run.
func BenchmarkScoreCommand(b *testing.B) {
	dir := b.TempDir()
	var chats [][]byte
	for _, name := range []string{"py_200.json", "js_200.json"} {
		f, ok := scenarios.FieldFixture(name)
		if !ok {
			b.Fatalf("no field fixture %s", name)
		}
		chats = append(chats, f.Chat)
	}
	args := []string{"score", "--format", "json"}
	for i := range 100 {
		d := filepath.Join(dir, fmt.Sprintf("s%03d", i))
		header, _ := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: fmt.Sprintf("RM_%03d", i), JobId: fmt.Sprintf("AJ_%03d", i),
			SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "header.binpb"), header, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "chat_history.json"), chats[i%2], 0o644); err != nil {
			b.Fatal(err)
		}
		args = append(args, d)
	}
	for _, c := range []struct{ name, config string }{{"rules=0", ""}, {"rules=20", "testdata/rules20.yaml"}} {
		b.Run(c.name, func(b *testing.B) {
			run := args
			if c.config != "" {
				run = append([]string{"score", "--config", c.config, "--agent", "booking"}, args[1:]...)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := Score(func(string) string { return "" }, io.Discard).Run(context.Background(), run); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
