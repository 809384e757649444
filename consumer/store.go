package consumer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Object names of a recording upload in the directory layout. A session's
// upload is complete once its header object exists: stores write it last.
const (
	ObjectHeader      = "header.binpb"
	ObjectChatHistory = "chat_history.json"
	ObjectAudio       = "recording.ogg"
)

// ErrLimit is returned (wrapped) when an object exceeds its size limit.
var ErrLimit = errors.New("size limit exceeded")

// Upload is one recording upload being written. Nothing is visible to
// readers before Commit; Abort discards everything written.
type Upload interface {
	// Write streams r into the named object, failing with ErrLimit beyond limit bytes.
	Write(ctx context.Context, name string, r io.Reader, limit int64) (int64, error)
	// Commit makes the upload visible, header last.
	Commit(ctx context.Context) error
	// Abort removes what was written. It is safe after Commit (then a no-op).
	Abort(ctx context.Context) error
}

// recordingWriter starts uploads; the collector depends only on this.
type recordingWriter interface {
	Begin(ctx context.Context, dir string) (Upload, error)
	// Location describes where dir lives, for upload notices (e.g. file:///… or s3://…).
	Location(dir string) string
}

// LocalStore keeps recordings in a local directory (the embedded default).
// Uploads are staged under root/.staging and renamed into place on Commit.
type LocalStore struct {
	root string
}

// NewLocalStore opens (creating) root and removes staging left by a crash.
func NewLocalStore(root string) (*LocalStore, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local store %s: %w", root, err)
	}
	staging := filepath.Join(abs, ".staging")
	if err := os.MkdirAll(staging, 0o750); err != nil {
		return nil, fmt.Errorf("local store: %w", err)
	}
	entries, err := os.ReadDir(staging)
	if err != nil {
		return nil, fmt.Errorf("local store: %w", err)
	}
	for _, e := range entries {
		// Staging older than a day belongs to a process that died mid-upload.
		if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(filepath.Join(staging, e.Name()))
		}
	}
	return &LocalStore{root: abs}, nil
}

// Root is the store's absolute directory.
func (s *LocalStore) Root() string { return s.root }

// Location implements recordingWriter.
func (s *LocalStore) Location(dir string) string {
	return "file://" + filepath.ToSlash(filepath.Join(s.root, dir)) + "/"
}

// Begin implements recordingWriter.
func (s *LocalStore) Begin(_ context.Context, dir string) (Upload, error) {
	if err := checkRelDir(dir); err != nil {
		return nil, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.root, ".staging", hex.EncodeToString(rnd[:]))
	if err := os.Mkdir(tmp, 0o750); err != nil {
		return nil, fmt.Errorf("begin upload: %w", err)
	}
	return &localUpload{tmp: tmp, final: filepath.Join(s.root, filepath.FromSlash(dir))}, nil
}

// checkRelDir refuses paths that could escape the store.
func checkRelDir(dir string) error {
	if dir == "" || strings.HasPrefix(dir, "/") || strings.Contains(dir, "\\") {
		return fmt.Errorf("invalid store path %q", dir)
	}
	for _, seg := range strings.Split(strings.TrimSuffix(dir, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, ".") {
			return fmt.Errorf("invalid store path %q", dir)
		}
	}
	return nil
}

type localUpload struct {
	tmp, final string
	names      []string
	done       bool
}

func (u *localUpload) Write(_ context.Context, name string, r io.Reader, limit int64) (int64, error) {
	if strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return 0, fmt.Errorf("invalid object name %q", name)
	}
	f, err := os.OpenFile(filepath.Join(u.tmp, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", name, err)
	}
	n, err := io.Copy(f, &limitReader{r: r, left: limit})
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write %s: %w", name, err)
	}
	u.names = append(u.names, name)
	return n, nil
}

// Commit renames each object into place with the header last, so a reader
// that sees header.binpb sees the whole upload. A re-upload replaces files
// one by one, each rename atomic.
func (u *localUpload) Commit(_ context.Context) error {
	if err := os.MkdirAll(u.final, 0o750); err != nil {
		return fmt.Errorf("commit upload: %w", err)
	}
	order := make([]string, 0, len(u.names))
	hasHeader := false
	for _, n := range u.names {
		if n == ObjectHeader {
			hasHeader = true
			continue
		}
		order = append(order, n)
	}
	if hasHeader {
		order = append(order, ObjectHeader)
	}
	for _, n := range order {
		if err := os.Rename(filepath.Join(u.tmp, n), filepath.Join(u.final, n)); err != nil {
			return fmt.Errorf("commit upload: %w", err)
		}
	}
	if d, err := os.Open(u.final); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	u.done = true
	return os.RemoveAll(u.tmp)
}

func (u *localUpload) Abort(_ context.Context) error {
	if u.done {
		return nil
	}
	u.done = true
	return os.RemoveAll(u.tmp)
}

// limitReader fails with ErrLimit once more than left bytes are read, unlike
// io.LimitReader, which would truncate silently.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, ErrLimit
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n - 1, ErrLimit
	}
	return n, err
}
