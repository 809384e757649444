package store

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// syncFS flushes the whole file system that holds dir (syncfs(2)): one call
// makes every file and directory entry written before it durable.
func syncFS(dir string) func() error {
	return func() error {
		f, err := os.Open(dir)
		if err != nil {
			return fmt.Errorf("syncfs: %w", err)
		}
		defer f.Close()
		if err := unix.Syncfs(int(f.Fd())); err != nil {
			return fmt.Errorf("syncfs %s: %w", dir, err)
		}
		return nil
	}
}

const haveSyncFS = true
