package consumer

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs the package's parallel tests six at a time under -short
// unless -parallel says otherwise: each starts its own NATS and daemon and
// spends its time waiting on them, on timers and on HTTP, not on the cores
// (this package's `go test -short` 39 s → 24 s on two cores). The full run
// (tools/test.sh, under -race, beside the crash tests' timings) keeps Go's
// default.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if testing.Short() && !set {
		if err := flag.Set("test.parallel", "6"); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}
