package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemo: `lkscore demo` on a fresh machine (embedded NATS, temporary
// data) scores the eight scenarios through the real HTTP paths and passes.
func TestDemo(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"lkscore", "demo", "--data-dir", t.TempDir()},
		func(string) string { return "" }, &stdout, &stderr)
	out := stdout.String()
	if code != 0 || !strings.Contains(out, "demo passed: 8 sessions") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr.String())
	}
	// Without --keep the daemon stops with the demo: no dead dashboard URL.
	if strings.Contains(out, "/ui") || !strings.Contains(out, "run with --keep") {
		t.Errorf("without --keep the demo printed a dashboard URL or no hint:\n%s", out)
	}
	for _, key := range []string{"RM_CleanCall01/AJ_CleanCall01", "RM_ErrorClose06/AJ_ErrorClose06"} {
		if !strings.Contains(out, key) {
			t.Errorf("table lacks %s", key)
		}
	}
}
