package forget

import (
	"context"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/store"
)

// versionedStore is a recording store whose bucket keeps versions.
type versionedStore struct {
	objs    []store.ObjectInfo
	deleted []string
}

func (v *versionedStore) List(context.Context, string) ([]store.ObjectInfo, error) {
	return v.objs, nil
}
func (v *versionedStore) Delete(_ context.Context, key string) error {
	v.deleted = append(v.deleted, key)
	return nil
}
func (v *versionedStore) Versioning(context.Context) (string, error) { return "Enabled", nil }

// TestForgetSaysVersionsRemain: deleting from a bucket that keeps versions,
// forget says that S3 keeps the earlier versions, rather than claiming the
// upload is gone.
func TestForgetSaysVersionsRemain(t *testing.T) {
	st := &versionedStore{objs: []store.ObjectInfo{{Key: "RM_v/AJ_v/chat_history.json"}, {Key: "RM_v/AJ_v/header.binpb"}}}
	layout, _ := config.Default().Layout()
	step := forgetUpload(context.Background(), st, layout, nil, "RM_v", "AJ_v")
	if step.Removed != 2 || len(st.deleted) != 2 || !strings.Contains(step.Note, "versioning is Enabled") {
		t.Errorf("%+v, deleted %v", step, st.deleted)
	}
}
