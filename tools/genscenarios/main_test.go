package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestGeneratorReproducesCommitted: the generator still writes, byte for
// byte, the uploads committed in scenarios/data, so `go generate
// ./scenarios` changes nothing until the generator does.
func TestGeneratorReproducesCommitted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	all := scenarios()
	if len(all) != 6 {
		t.Fatalf("%d scenarios, want 6", len(all))
	}
	for _, sc := range all {
		if err := sc.write(dir); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"header.binpb", "chat_history.json"} {
			got, err := os.ReadFile(filepath.Join(dir, sc.name, name))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "data", sc.name, name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s/%s: the generator writes %d bytes that differ from the committed %d", sc.name, name, len(got), len(want))
			}
		}
	}
}
