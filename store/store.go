package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/recording"
)

// ErrNotFound is returned for a missing object. It is recording.ErrNotFound,
// so the recording parser's loaders and the store agree on one sentinel.
var ErrNotFound = recording.ErrNotFound

// ErrPermanent marks store errors that retrying cannot fix (access denied,
// no such bucket, a bad request). S3 errors that are neither ErrNotFound nor
// ErrPermanent are ErrUnavailable.
var ErrPermanent = errors.New("permanent store error")

// ErrUnavailable marks transient store errors: 5xx after the SDK's own
// retries, timeouts, a refused connection. The daemon treats the store as
// down until a probe succeeds.
var ErrUnavailable = errors.New("store unavailable")

// ObjectInfo describes a listed object.
type ObjectInfo struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Upload is one recording upload being written. Nothing is visible to
// readers before Commit; Abort discards everything written.
type Upload interface {
	// Write streams r into the named object, failing with recording.ErrLimit beyond limit bytes.
	Write(ctx context.Context, name string, r io.Reader, limit int64) (int64, error)
	// Commit makes the upload visible, header last.
	Commit(ctx context.Context) error
	// Abort removes what was written. It is a no-op after Commit.
	Abort(ctx context.Context) error
}

// The capabilities a store offers, each small so that a caller can ask for
// only what it uses.
type (
	// Lister lists objects under a key prefix, sorted by key.
	Lister interface {
		List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	}
	// Writer starts uploads and names where a session directory lives.
	Writer interface {
		Begin(ctx context.Context, dir string) (Upload, error)
		// Location describes where dir lives, for upload notices and
		// scorecards (file:///… or s3://…).
		Location(dir string) string
		// Identity names the store, so that a process can tell whether what
		// another stored is in its own (upload notices carry it).
		Identity() string
	}
	// Deleter removes an object; a missing one is not an error.
	Deleter interface {
		Delete(ctx context.Context, key string) error
	}
	// BucketReader reads an object in a named bucket (an egress location).
	// Stores without buckets fail with ErrPermanent for any bucket but "".
	BucketReader interface {
		OpenBucket(ctx context.Context, bucket, key string, maxBytes int64) (io.ReadCloser, error)
	}
)

// Store is everything the daemon needs: read, list, write, other buckets.
type Store interface {
	recording.ObjectReader
	Lister
	Writer
	BucketReader
	Deleter
}

var (
	_ Store = (*Local)(nil)
	_ Store = (*S3)(nil)
)

// Open returns the S3 store when a bucket is configured, else the local
// store under DataDir/recordings.
func Open(ctx context.Context, cfg config.Config) (Store, error) {
	if cfg.S3.Bucket != "" {
		return NewS3(ctx, cfg.S3)
	}
	l, err := NewLocal(filepath.Join(cfg.DataDir, "recordings"))
	if err != nil {
		return nil, err
	}
	if err := l.SetSync(cfg.HTTP.UploadSync); err != nil {
		return nil, fmt.Errorf("http.upload_sync: %w", err)
	}
	return l, nil
}

// readCloser joins a (limited) reader with the closer of what it reads.
type readCloser struct {
	io.Reader
	io.Closer
	size int64 // the object's size when known, else -1
}

// SizeHint is the object's size, or -1 (recording.SizeHinter): a reader
// of the whole object allocates once instead of growing its buffer.
func (r readCloser) SizeHint() int64 { return r.size }

type closeFunc func() error

func (f closeFunc) Close() error { return f() }

// headerLast orders object names so the header comes last: an upload is
// complete once its header exists.
func headerLast(names []string) []string {
	out := make([]string, 0, len(names))
	hasHeader := false
	for _, n := range names {
		if n == recording.ObjectHeader {
			hasHeader = true
			continue
		}
		out = append(out, n)
	}
	if hasHeader {
		out = append(out, recording.ObjectHeader)
	}
	return out
}

// OpenBucket on a local store reads the store itself; it cannot reach a
// bucket.
func (s *Local) OpenBucket(ctx context.Context, bucket, key string, maxBytes int64) (io.ReadCloser, error) {
	if bucket != "" {
		return nil, fmt.Errorf("open s3://%s/%s: the recording store is a local directory, not S3: %w", bucket, key, ErrPermanent)
	}
	return s.Open(ctx, key, maxBytes)
}

// Delete removes an object and the directories it leaves empty.
func (s *Local) Delete(_ context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	path := filepath.Join(s.root, filepath.FromSlash(key))
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	for dir := filepath.Dir(path); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break // not empty
		}
	}
	return nil
}
