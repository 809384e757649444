package offline

import (
	"context"
	"io"
	"path/filepath"
	"testing"
)

func BenchmarkZZScore100(b *testing.B) {
	dirs, _ := filepath.Glob("/tmp/sess/*")
	args := append([]string{"score", "--format", "json"}, dirs...)
	for b.Loop() {
		cmd := Score(func(string) string { return "" }, io.Discard)
		if err := cmd.Run(context.Background(), args); err != nil {
			b.Fatal(err)
		}
	}
}
