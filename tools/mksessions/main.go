// Command mksessions writes session directories as the daemon stores an
// upload (header.binpb and chat_history.json), for `lkscore score` to read:
//
//	go run ./tools/mksessions DIR N FIXTURE…
//
// Session i gets FIXTURE[i mod len] as its chat history and a header with
// its own room and job ids and a named close reason. tools/perf-vs-python.sh
// uses it.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/livekit/protocol/livekit"
	"google.golang.org/protobuf/proto"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mksessions:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 {
		return fmt.Errorf("usage: mksessions DIR N FIXTURE…")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 1 {
		return fmt.Errorf("N: want a positive number, got %q", args[1])
	}
	chats := make([][]byte, 0, len(args)-2)
	for _, p := range args[2:] {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		chats = append(chats, b)
	}
	for i := range n {
		dir := filepath.Join(args[0], fmt.Sprintf("s%05d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		header, err := proto.Marshal(&livekit.MetricsRecordingHeader{RoomId: fmt.Sprintf("RM_perf%05d", i),
			JobId: fmt.Sprintf("AJ_perf%05d", i), SessionSummary: `{"close_reason":"CR_USER_INITIATED"}`})
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "header.binpb"), header, 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "chat_history.json"), chats[i%len(chats)], 0o644); err != nil {
			return err
		}
	}
	return nil
}
