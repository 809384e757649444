package scoring

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPurity keeps scoring pure: standard library only, and none of the
// packages that do I/O, log, read the clock or reach the network. The
// teams' rules are evaluated by a RuleEngine scoring is handed (package
// rules, CEL), which has its own purity test.
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
			// The vocabulary (package session) is pure too: .ci/run checks it.
			if (strings.Contains(strings.Split(path, "/")[0], ".") && path != "github.com/lkscore/lkscore/session") || banned[path] {
				t.Errorf("%s imports %s: scoring must stay pure (standard library, no I/O, no clock)", f, path)
			}
		}
	}
}
