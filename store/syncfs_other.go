//go:build !linux

package store

// syncFS is Linux's syncfs(2); elsewhere uploads fsync each file.
func syncFS(string) func() error { return nil }

const haveSyncFS = false
