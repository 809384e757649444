package broker

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// TokenFile is where the embedded NATS server's token lives, in the data
// dir (mode 0600): serve writes it on its first start, every operator
// command (tail, dlq, forget, baseline, bench) reads it, and so can the
// nats CLI (docs/security.md).
const TokenFile = "nats.token"

// EmbeddedToken reads the data dir's token, creating a random one (256
// bits, hex) when there is none. A token file anyone but its owner can read
// is refused, as ssh refuses such a key.
func EmbeddedToken(dataDir string) (string, error) {
	tok, err := ReadEmbeddedToken(dataDir)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("embedded nats token: %w", err)
	}
	tok = hex.EncodeToString(b)
	path := filepath.Join(dataDir, TokenFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) { // written meanwhile by another process
			return ReadEmbeddedToken(dataDir)
		}
		return "", fmt.Errorf("embedded nats token: %w", err)
	}
	_, werr := f.WriteString(tok + "\n")
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		_ = os.Remove(path)
		return "", fmt.Errorf("embedded nats token %s: %w", path, err)
	}
	return tok, nil
}

// ReadEmbeddedToken reads the data dir's token (fs.ErrNotExist when serve
// has not run there yet).
func ReadEmbeddedToken(dataDir string) (string, error) {
	path := filepath.Join(dataDir, TokenFile)
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("embedded nats token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("embedded nats token %s: mode %o lets others read it; chmod 600 it", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("embedded nats token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 {
		return "", fmt.Errorf("embedded nats token %s: too short (%d characters); delete it and restart serve to make a new one", path, len(tok))
	}
	return tok, nil
}
