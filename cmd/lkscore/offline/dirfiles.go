package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/lkscore/lkscore/recording"
)

// sessionFiles reads the objects of one local session directory for a
// batch: open, fstat, read, close, and no more. os.Open adds four fcntl
// calls and an epoll registration to each file, and store.Local resolves
// the directory and looks for a store id first; on a virtual machine
// every system call is a hypervisor exit, which cost a 20-turn session
// more than its parse (docs/performance.md, "lkscore score").
type sessionFiles string

// Open implements recording.ObjectReader for the files of the directory.
func (d sessionFiles) Open(_ context.Context, key string, maxBytes int64) (io.ReadCloser, error) {
	path := filepath.Join(string(d), filepath.FromSlash(key))
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil, fmt.Errorf("open %s: %w", path, recording.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("stat %s: %w", path, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFDIR:
		_ = unix.Close(fd)
		return nil, fmt.Errorf("open %s: a directory: %w", path, recording.ErrNotFound)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		_ = unix.Close(fd)
		return nil, fmt.Errorf("open %s: not a regular file", path)
	case st.Size > maxBytes:
		_ = unix.Close(fd)
		return nil, fmt.Errorf("open %s: %d bytes: %w", path, st.Size, recording.ErrLimit)
	}
	return &fileReader{fd: fd, path: path, left: st.Size, size: st.Size}, nil
}

// fileReader reads a regular file's bytes up to the size fstat gave: the
// recordings are written once, so what fstat saw is the object, and the
// read that would only confirm the end is not made.
type fileReader struct {
	fd         int
	path       string
	left, size int64
}

func (f *fileReader) Read(b []byte) (int, error) {
	if f.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(b)) > f.left {
		b = b[:f.left]
	}
	for {
		n, err := unix.Read(f.fd, b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, fmt.Errorf("read %s: %w", f.path, err)
		case n == 0:
			return 0, fmt.Errorf("read %s: %w (the file shrank)", f.path, io.ErrUnexpectedEOF)
		}
		f.left -= int64(n)
		return n, nil
	}
}

// SizeHint implements recording.SizeHinter: the chat history is read into
// one buffer of its size.
func (f *fileReader) SizeHint() int64 { return f.size }

func (f *fileReader) Close() error { return unix.Close(f.fd) }
