package consumer

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lkscore/lkscore/consumer/forget"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/store"
)

// TestForgetVersionedBucket: recordings in a real S3 server's bucket
// (versitygw) with versioning on, the daemon in privacy.mode metadata_only,
// which deletes each chat history once scored: in a versioned bucket that
// delete only adds a marker, and the gateway's files still hold the
// transcript (the test checks it does: the scan sees versions). Forget
// deletes every version and delete marker of the session by version id:
// none is listed after, no marker of its text is in any byte of the
// gateway's files, and the other session's versions are still there.
func TestForgetVersionedBucket(t *testing.T) {
	srv := testenv.StartS3Versioned(t)
	testenv.SetAWSEnv(t, testenv.S3SecretKey)
	const bucket = "lk-versioned"
	st := testenv.OpenBucket(t, srv, bucket, store.NewS3)
	srv.EnableVersioning(t, bucket)

	gone, kept := newTrustSession("RM_VGone", "AJ_VGone", false), newTrustSession("RM_VKept", "AJ_VKept", false)
	cfg := pipelineConfig(t, "")
	cfg.S3 = srv.Config(bucket)
	cfg.Privacy.Mode = "metadata_only"
	d, _ := startDaemon(t, cfg)
	url := d.NATSURL()
	gone.send(t, d)
	kept.send(t, d)
	testenv.WaitFor(t, settleWait, "both scorecards", func() bool { return len(streamMsgs(t, url, "LKSCORE_RESULTS")) == 2 })
	quiesce(t, url, defaultConsumers)

	versions := func(prefix string) (n int, keys []string) {
		out, err := srv.Client().ListObjectVersions(context.Background(), &s3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Versions {
			keys = append(keys, aws.ToString(v.Key)+"@"+aws.ToString(v.VersionId))
		}
		for _, m := range out.DeleteMarkers {
			keys = append(keys, aws.ToString(m.Key)+"@"+aws.ToString(m.VersionId)+"(marker)")
		}
		return len(keys), keys
	}
	gatewayBytes := func() string { return string(rawBytes(t, srv.Dir)) + string(rawBytes(t, srv.VersionsDir)) }
	text := []string{gone.markers["user_text"], gone.markers["agent_text"], gone.markers["tool_output"]}
	if l := leaked(gatewayBytes(), text); len(l) != len(text) {
		t.Fatalf("before forget the gateway's files hold %d of %d markers of the deleted chat history: the scan sees nothing", len(l), len(text))
	}
	if n, keys := versions("RM_VGone/"); n < 2 {
		t.Fatalf("before forget the session has %d versions (%v): metadata_only's delete left none to test", n, keys)
	}

	layout, _ := cfg.Layout()
	steps := forget.Run(context.Background(), testenv.JetStream(t, url), d.subjects, st, layout, 2*time.Second, "RM_VGone/AJ_VGone")
	var report strings.Builder
	for _, s := range steps {
		report.WriteString(s.Place + ": " + s.Note + " " + s.Err + "\n")
		if s.Err != "" {
			t.Errorf("%s: %s", s.Place, s.Err)
		}
	}
	if !strings.Contains(report.String(), "versioning is Enabled") {
		t.Errorf("the report does not say the bucket keeps versions:\n%s", report.String())
	}
	if n, keys := versions("RM_VGone/"); n != 0 {
		t.Errorf("after forget %d versions are left: %v", n, keys)
	}
	for _, l := range leaked(gatewayBytes(), text) {
		t.Errorf("the gateway's files after forget: %s", l)
	}
	if n, _ := versions("RM_VKept/"); n < 2 {
		t.Errorf("the session not forgotten lost its versions: %d left", n)
	}
	if l := leaked(gatewayBytes(), []string{kept.markers["user_text"]}); len(l) != 1 {
		t.Error("the scan no longer finds the session not forgotten: it proves nothing")
	}
}
