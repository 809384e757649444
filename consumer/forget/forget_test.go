package forget

import (
	"context"
	"strings"
	"testing"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/store"
)

// fakeVersionedStore is a recording store whose bucket keeps versions.
type fakeVersionedStore struct {
	objs    []store.ObjectInfo
	deleted []string
	purged  string // the prefix whose versions were deleted
}

func (v *fakeVersionedStore) List(context.Context, string) ([]store.ObjectInfo, error) {
	return v.objs, nil
}
func (v *fakeVersionedStore) Delete(_ context.Context, key string) error {
	v.deleted = append(v.deleted, key)
	return nil
}
func (v *fakeVersionedStore) Versioning(context.Context) (string, error) { return "Enabled", nil }
func (v *fakeVersionedStore) DeleteVersions(_ context.Context, prefix string, _ bool) (int, []store.VersionsLeft, error) {
	v.purged = prefix
	return 3, []store.VersionsLeft{{Key: "RM_v/AJ_v/chat_history.json", VersionID: "v1", Err: "AccessDenied"}}, nil
}

// TestForgetNamesVersionsLeft: in a bucket that keeps versions, forget
// deletes the session's versions by id (TestForgetVersionedBucket, on a
// real S3 server) and names each one it could not delete, by key and
// version id, as an error of its report.
func TestForgetNamesVersionsLeft(t *testing.T) {
	st := &fakeVersionedStore{objs: []store.ObjectInfo{{Key: "RM_v/AJ_v/chat_history.json"}, {Key: "RM_v/AJ_v/header.binpb"}}}
	layout, _ := config.Default().Layout()
	step := forgetUpload(context.Background(), st, layout, nil, "RM_v", "AJ_v")
	if step.Removed != 2 || len(st.deleted) != 2 || st.purged != "RM_v/AJ_v/" || !strings.Contains(step.Note, "versioning is Enabled: 3 versions") ||
		step.Err != "1 versions left: RM_v/AJ_v/chat_history.json (version v1): AccessDenied" {
		t.Errorf("%+v, deleted %v, purged %q", step, st.deleted, st.purged)
	}
}
