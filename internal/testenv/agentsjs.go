package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// AgentsJS returns the directory of the real agents-js SDK the tests run
// (consumer/testdata/agents-js, `npm ci` there) and node. When either is
// missing it fails t under LKSCORE_REQUIRE_AGENTS_JS, and otherwise returns
// empty strings for the caller to skip.
func AgentsJS(t testing.TB) (dir, node string) {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir = filepath.Join(filepath.Dir(file), "..", "..", "consumer", "testdata", "agents-js")
	node, err := exec.LookPath("node")
	if _, statErr := os.Stat(filepath.Join(dir, "node_modules", "@livekit", "agents")); err != nil || statErr != nil {
		if os.Getenv("LKSCORE_REQUIRE_AGENTS_JS") != "" {
			t.Fatalf("the agents-js SDK is required: node %v, node_modules %v (run npm ci in %s)", err, statErr, dir)
		}
		return "", ""
	}
	return dir, node
}
