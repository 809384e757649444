package stagetest

import (
	"context"
	"testing"
)

// TestStartMakesTheStreams: what the stages' tests take for granted is
// there: every stream of lkscore and the facts bucket.
func TestStartMakesTheStreams(t *testing.T) {
	t.Parallel()
	set := Start(t)
	ctx := context.Background()
	s := set.Env.Subjects
	for _, name := range []string{s.WebhookStream(), s.UploadStream(), s.SessionStream(), s.ResultStream(), s.DLQStream(), s.AlertStream()} {
		if _, err := set.JS.Stream(ctx, name); err != nil {
			t.Errorf("stream %s: %v", name, err)
		}
	}
	if b := set.Facts(t).Bucket(); b.Bucket() != s.SessionFacts() {
		t.Errorf("facts bucket %s, want %s", b.Bucket(), s.SessionFacts())
	}
}
