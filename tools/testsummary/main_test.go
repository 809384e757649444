package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestSummarize: passing packages print their ok line, failing tests their
// output, and skipped tests are listed at the end with their reason.
func TestSummarize(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"run","Package":"p/a","Test":"TestSkip"}`,
		`{"Action":"output","Package":"p/a","Test":"TestSkip","Output":"=== RUN   TestSkip\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestSkip","Output":"    s3_test.go:12: SKIPPING S3 TESTS: install versitygw\n"}`,
		`{"Action":"output","Package":"p/a","Test":"TestSkip","Output":"--- SKIP: TestSkip (0.00s)\n"}`,
		`{"Action":"skip","Package":"p/a","Test":"TestSkip"}`,
		`{"Action":"output","Package":"p/a","Output":"PASS\n"}`,
		`{"Action":"output","Package":"p/a","Output":"ok  \tp/a\t0.01s\n"}`,
		`{"Action":"pass","Package":"p/a"}`,
		`{"Action":"output","Package":"p/b","Test":"TestBad","Output":"    b_test.go:3: boom\n"}`,
		`{"Action":"fail","Package":"p/b","Test":"TestBad"}`,
		`{"Action":"output","Package":"p/b","Output":"FAIL\tp/b\t0.02s\n"}`,
		`{"Action":"fail","Package":"p/b"}`,
	}, "\n")
	var out bytes.Buffer
	failed, err := summarize(strings.NewReader(in), &out)
	if err != nil || !failed {
		t.Fatalf("failed %v, err %v", failed, err)
	}
	got := out.String()
	for _, want := range []string{"ok  \tp/a\t0.01s\n", "b_test.go:3: boom", "FAIL\tp/b",
		"1 tests skipped, each with its reason", "p/a TestSkip: SKIPPING S3 TESTS: install versitygw"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "PASS\n") || strings.Contains(got, "=== RUN") {
		t.Errorf("output has go test -json's extra lines:\n%s", got)
	}
	if failed, _ := summarize(strings.NewReader(in[:strings.Index(in, "\n{\"Action\":\"output\",\"Package\":\"p/b\"")]), &out); failed {
		t.Error("a run without failures reported as failed")
	}
}
