package consumer

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// dataDirLock holds an exclusive lock on a data dir for the life of the
// process: two serve processes on one dir would run two NATS servers on one
// store directory, or race on one recording store.
type dataDirLock struct{ f *os.File }

const lockFile = "lkscore.lock"

// lockDataDir takes the data dir's lock, or says who holds it.
func lockDataDir(dir string) (*dataDirLock, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		_ = f.Close()
		holder := "another process"
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
			holder = fmt.Sprintf("process %d", pid)
		}
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("data dir %s is in use by %s (lock %s): give each lkscore process its own data_dir (LKSCORE_DATA_DIR)",
				dir, holder, path)
		}
		return nil, fmt.Errorf("lock data dir %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release drops the lock (the kernel also drops it when the process dies).
func (l *dataDirLock) release() {
	if l != nil && l.f != nil {
		_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
		_ = l.f.Close()
	}
}
