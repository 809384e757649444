// Package store keeps recording uploads: a local directory (the embedded
// default) or an S3 bucket. It classifies every failure as not found,
// permanent or transient, and knows nothing of NATS or HTTP.
package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/lkscore/lkscore/recording"
)

// Local keeps recordings in a local directory (the embedded default).
// Keys are slash-separated paths relative to the root. Uploads are staged
// as files in root/.staging and renamed into place on Commit.
type Local struct {
	root string
	id   string // the directory's identity marker (storeIDFile); "" when read-only and absent
	// group makes uploads durable together (one syncfs for those that
	// commit at once); nil: each file and directory is fsynced on its own.
	group *groupSync
}

// storeIDFile holds a random id written once into the store's root, so that
// processes can tell whether they share the directory (Identity).
const storeIDFile = ".lkscore-store-id"

// NewLocal opens root, creating it, and removes staging left by a
// crash. Use OpenLocalDir to read a directory without writing to it.
func NewLocal(root string) (*Local, error) {
	s, err := OpenLocalDir(root)
	if err != nil {
		return nil, err
	}
	staging := filepath.Join(s.root, ".staging")
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
	if s.id, err = ensureStoreID(s.root); err != nil {
		return nil, fmt.Errorf("local store: %w", err)
	}
	return s, nil
}

// ensureStoreID reads the root's identity marker, writing a new one first
// when there is none (exclusive create: concurrent openers agree on one).
func ensureStoreID(root string) (string, error) {
	path := filepath.Join(root, storeIDFile)
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	tmp := path + "." + hex.EncodeToString(raw[:]) + ".tmp"
	if err := os.WriteFile(tmp, []byte(hex.EncodeToString(raw[:])+"\n"), 0o640); err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Identity names the store: its directory and the directory's marker, so
// two processes with the same path on different volumes differ.
func (s *Local) Identity() string {
	return "file://" + filepath.ToSlash(s.root) + "#" + s.id
}

// OpenLocalDir returns a store over root for reading only (no staging is created).
func OpenLocalDir(root string) (*Local, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local store %s: %w", root, err)
	}
	l := &Local{root: abs}
	if b, err := os.ReadFile(filepath.Join(abs, storeIDFile)); err == nil {
		l.id = strings.TrimSpace(string(b))
	}
	return l, nil
}

// Location implements Writer.
func (s *Local) Location(dir string) string {
	return "file://" + filepath.ToSlash(filepath.Join(s.root, dir)) + "/"
}

// Open implements recording.ObjectReader.
func (s *Local) Open(_ context.Context, key string, maxBytes int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	f, err := os.Open(filepath.Join(s.root, filepath.FromSlash(key)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", key, osError(err))
	}
	size := int64(-1)
	if st, err := f.Stat(); err == nil {
		if st.IsDir() || st.Size() > maxBytes {
			_ = f.Close()
			if st.IsDir() {
				return nil, fmt.Errorf("open %s: %w", key, ErrNotFound)
			}
			return nil, fmt.Errorf("open %s: %d bytes: %w", key, st.Size(), recording.ErrLimit)
		}
		size = st.Size()
	}
	if size >= 0 {
		// Within the limit, and written once by a rename: seekable, so the
		// dashboard serves range requests from it as it is.
		return fileObject{File: f, size: size}, nil
	}
	return readCloser{Reader: recording.LimitReader(f, maxBytes), Closer: f, size: size}, nil
}

// fileObject is a local object whose size is known to be within the limit.
type fileObject struct {
	*os.File
	size int64
}

// SizeHint is the object's size (recording.SizeHinter).
func (f fileObject) SizeHint() int64 { return f.size }

// List returns every object under prefix, sorted by key; staging is never
// listed. It walks only the directory the prefix names.
func (s *Local) List(_ context.Context, prefix string) ([]ObjectInfo, error) {
	if strings.ContainsRune(prefix, 0) {
		return nil, fmt.Errorf("list %.200q: a NUL byte: %w", prefix, ErrPermanent)
	}
	start := s.root
	if i := strings.LastIndex(prefix, "/"); i > 0 {
		start = filepath.Join(s.root, filepath.FromSlash(prefix[:i]))
	}
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		rel := filepath.ToSlash(strings.TrimPrefix(path, s.root+string(filepath.Separator)))
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") && path != s.root {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == storeIDFile {
			return nil // the store's identity, not a recording
		}
		if strings.HasPrefix(rel, prefix) {
			info, err := d.Info()
			if err != nil {
				return nil // removed while listing
			}
			out = append(out, ObjectInfo{Key: rel, Size: info.Size(), Modified: info.ModTime()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %.200q: %w", prefix, osError(err))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

// Begin implements Writer.
func (s *Local) Begin(_ context.Context, dir string) (Upload, error) {
	if err := checkKey(strings.TrimSuffix(dir, "/")); err != nil {
		return nil, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	// Staged objects are flat files named <random>.<name> in .staging: no
	// directory to create and remove per upload (docs/performance.md).
	tmp := filepath.Join(s.root, ".staging", hex.EncodeToString(rnd[:])+".")
	return &localUpload{tmp: tmp, final: filepath.Join(s.root, filepath.FromSlash(dir)), group: s.group}, nil
}

// Sync modes of local uploads (http.upload_sync).
const (
	SyncGroup = "group" // one syncfs for the uploads that commit together (Linux)
	SyncEach  = "each"  // fsync of every file and of the session directory
)

// SetSync chooses how uploads are made durable before Commit returns:
// SyncGroup (the default where syncfs exists) or SyncEach.
func (s *Local) SetSync(mode string) error {
	switch {
	case mode == SyncEach:
		s.group = nil
	case mode == SyncGroup && haveSyncFS:
		s.group = newGroupSync(syncFS(s.root))
	case mode == SyncGroup:
		return fmt.Errorf("upload sync %q needs syncfs(2), which this system lacks: use %q", mode, SyncEach)
	default:
		return fmt.Errorf("upload sync %q is not %q or %q", mode, SyncGroup, SyncEach)
	}
	return nil
}

// checkKey refuses keys that could escape the store.
// Such a key can never become a path, so the error is ErrPermanent: the
// work that made it is dead-lettered, not retried.
func checkKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\\\x00") {
		return fmt.Errorf("invalid store key %.200q: %w", key, ErrPermanent)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." || strings.HasPrefix(seg, ".") || len(seg) > maxNameBytes {
			return fmt.Errorf("invalid store key %.200q: %w", key, ErrPermanent)
		}
	}
	return nil
}

// maxNameBytes is the longest file name Linux file systems take (NAME_MAX).
const maxNameBytes = 255

// osError marks the errors a path can never get past (a NUL byte, a name
// over NAME_MAX) as ErrPermanent; the rest stay as they are (transient).
func osError(err error) error {
	if errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENAMETOOLONG) {
		return fmt.Errorf("%w: %w", err, ErrPermanent)
	}
	return err
}

type localUpload struct {
	tmp, final string // tmp is the staged files' path prefix
	names      []string
	done       bool
	group      *groupSync // nil: fsync each file
}

func (u *localUpload) Write(_ context.Context, name string, r io.Reader, limit int64) (int64, error) {
	if strings.ContainsAny(name, "/\\") || strings.HasPrefix(name, ".") {
		return 0, fmt.Errorf("invalid object name %q", name)
	}
	f, err := os.OpenFile(u.tmp+name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return 0, fmt.Errorf("write %s: %w", name, err)
	}
	u.names = append(u.names, name) // Abort removes it, written or not
	n, err := io.Copy(f, recording.LimitReader(r, limit))
	if err == nil && u.group == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, fmt.Errorf("write %s: %w", name, err)
	}
	return n, nil
}

// Commit makes the upload durable and visible: the staged files durable
// first, then renamed into place with the header last, so that a reader
// that sees header.binpb sees the whole upload, then the renames durable.
// A re-upload replaces files one by one, each rename atomic. With group
// sync both steps share one syncfs with every upload committing at the
// same time; without, each file and the session directory is fsynced.
func (u *localUpload) Commit(_ context.Context) error {
	if u.group != nil {
		if err := u.group.wait(); err != nil { // the staged data
			return fmt.Errorf("commit upload: %w", err)
		}
	}
	if err := os.MkdirAll(u.final, 0o750); err != nil {
		return fmt.Errorf("commit upload: %w", err)
	}
	for _, n := range headerLast(u.names) {
		if err := os.Rename(u.tmp+n, filepath.Join(u.final, n)); err != nil {
			return fmt.Errorf("commit upload: %w", err)
		}
	}
	if u.group != nil {
		if err := u.group.wait(); err != nil { // the renames and new directories
			return fmt.Errorf("commit upload: %w", err)
		}
		u.done = true
		return nil
	}
	if d, err := os.Open(u.final); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	u.done = true
	return nil
}

func (u *localUpload) Abort(_ context.Context) error {
	if u.done {
		return nil
	}
	u.done = true
	var errs []error
	for _, n := range u.names {
		if err := os.Remove(u.tmp + n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
