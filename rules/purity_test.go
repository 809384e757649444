package rules

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPurity keeps rule evaluation as pure as scoring: its own files import
// the standard library (none of the packages that do I/O, log, read the
// clock or reach the network), scoring, internal/typo and CEL only; and nothing it depends
// on, CEL included, is a network, logging, NATS, S3 or LiveKit package.
// CEL brings google.golang.org/protobuf for its value types (no I/O): that
// is why this is a package of its own, and scoring has no protobuf at all.
func TestPurity(t *testing.T) {
	banned := map[string]bool{"net": true, "net/http": true, "os": true, "os/exec": true, "io/fs": true, "io/ioutil": true,
		"log": true, "log/slog": true, "syscall": true, "time": true, "math/rand": true, "math/rand/v2": true, "crypto/rand": true, "unsafe": true}
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		pf, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range pf.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			third := strings.Contains(strings.Split(path, "/")[0], ".")
			allowed := path == "github.com/lkscore/lkscore/scoring" || path == "github.com/lkscore/lkscore/session" ||
				path == "github.com/lkscore/lkscore/internal/typo" ||
				strings.HasPrefix(path, "github.com/google/cel-go/")
			if banned[path] || (third && !allowed) {
				t.Errorf("%s imports %s: rules must stay pure (standard library, scoring, session, CEL)", f, path)
			}
		}
	}
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		if dep == "net/http" || dep == "log/slog" || strings.Contains(dep, "nats-io") || strings.Contains(dep, "aws-sdk") ||
			strings.Contains(dep, "livekit/protocol") || strings.Contains(dep, "lkscore/lkscore/consumer") {
			t.Errorf("rules depends on %s", dep)
		}
	}
}
