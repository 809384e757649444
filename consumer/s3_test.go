package consumer

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/recording"
	"github.com/lkscore/lkscore/store"
)

// TestCollectorToS3: the collector writes uploads through the S3 store.
func TestCollectorToS3(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	st := testenv.OpenBucket(t, srv, "lk-recordings", store.NewS3)
	ns := startNATS(t)
	cfg := testConfig(t, ns.URL())
	cfg.S3 = srv.Config("lk-recordings")
	cfg.S3.Prefix = "agents"
	d, _ := startDaemon(t, cfg)
	header := testenv.Header(t, "RM_c", "AJ_c")
	chat := mustReadFile(t, "../recording/testdata/chat_js.json")
	body, ct := testenv.PythonUpload(t, testenv.FullParts(header, chat, []byte("OggS"))[:3])
	resp, msg := post(t, "http://"+d.IngestAddr()+"/observability/recordings/v0", testenv.Bearer(testenv.PythonToken(t, testenv.Key, testenv.Secret, true)), ct, bytes.NewReader(body))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, msg)
	}
	s, err := recording.Load(context.Background(), st, "agents/RM_c/AJ_c/", recording.DefaultLimits())
	if err != nil || s.Chat == nil || s.Chat.TimestampUnit != "ms" {
		t.Fatalf("load from S3: %v %+v", err, s)
	}
	n := streamMsgs(t, ns.URL(), "LKSCORE_UPLOADS")
	if len(n) != 1 || !strings.Contains(string(n[0].Data), `"location":"s3://lk-recordings/agents/RM_c/AJ_c/"`) {
		t.Fatalf("notice: %d %s", len(n), n[0].Data)
	}
}

func mustReadFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
