package facts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// A participant identity (a SIP caller's is its phone number) is stored only
// as a keyed hash: HMAC-SHA256 under a key every ingest replica shares,
// truncated to 48 bits. Without the key, hashing every phone number finds
// nothing; with it, the same identity gives the same token, so a room's
// departures and its job's participant still tie together. docs/security.md
// says what this protects against and what it does not.
//
// Rotation: IdentityKeys hashes under every key it holds (the current one
// first), and a stored identity keeps one token per key, "<key id>.<hex>"
// joined by "+". Two stored identities are the same participant when they
// share a token, so a room whose webhooks were stored before a rotation
// (old key only), during it (both) and after (new key only) still tells one
// story as long as each neighbouring pair shares a key.
//
// Before the keyed hash, identities were stored as "lkscore-hash:<hex>", an
// unkeyed SHA-256: those are still read (their token is the bare hex), and
// match each other, until the streams drop them (nats.max_age).

// Stored identity prefixes: keyed (now), unkeyed (before; read only).
const (
	storedKeyedPrefix    = "lkscore-hmac:"
	storedIdentityPrefix = "lkscore-hash:"
)

// tokenSep joins one identity's tokens under several keys.
const tokenSep = "+"

// MinIdentityKeyLen is the shortest identity key accepted, in bytes.
const MinIdentityKeyLen = 16

// maxIdentityKeys bounds how many keys hash at once (a rotation needs two).
const maxIdentityKeys = 4

// IdentityKeys hashes participant identities under one or more keys.
type IdentityKeys struct {
	keys []identityKey
}

type identityKey struct {
	id     string // 6 hex digits naming the key, derived from it
	secret []byte
}

// NewIdentityKeys hashes under secrets, the current key first.
func NewIdentityKeys(secrets ...string) (*IdentityKeys, error) {
	if len(secrets) == 0 {
		return nil, errors.New("identity keys: none given")
	}
	if len(secrets) > maxIdentityKeys {
		return nil, fmt.Errorf("identity keys: %d given, at most %d (a rotation needs two)", len(secrets), maxIdentityKeys)
	}
	k := &IdentityKeys{}
	seen := map[string]bool{}
	for i, s := range secrets {
		if len(s) < MinIdentityKeyLen {
			return nil, fmt.Errorf("identity keys: key %d is %d bytes, at least %d needed", i+1, len(s), MinIdentityKeyLen)
		}
		m := hmac.New(sha256.New, []byte(s))
		m.Write([]byte("lkscore identity key id"))
		id := hex.EncodeToString(m.Sum(nil)[:3])
		if seen[id] {
			return nil, fmt.Errorf("identity keys: key %d repeats an earlier key", i+1)
		}
		seen[id] = true
		k.keys = append(k.keys, identityKey{id: id, secret: []byte(s)})
	}
	return k, nil
}

// DeriveIdentityKey is the identity key an install that configures none
// uses: HMAC-SHA256 of a fixed label under the LiveKit API secret, in hex
// (docs/security.md). Every replica configured with the same API secret
// derives the same key; the secret itself is never stored.
func DeriveIdentityKey(apiSecret string) string {
	m := hmac.New(sha256.New, []byte(apiSecret))
	m.Write([]byte("lkscore identity hash v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// Stored is how lkscore stores identity: its tokens under every key ("" stays
// ""). An identity already stored is returned as is.
func (k *IdentityKeys) Stored(identity string) string {
	if identity == "" || strings.HasPrefix(identity, storedKeyedPrefix) || strings.HasPrefix(identity, storedIdentityPrefix) {
		return identity
	}
	var b strings.Builder
	b.WriteString(storedKeyedPrefix)
	for i, key := range k.keys {
		if i > 0 {
			b.WriteString(tokenSep)
		}
		m := hmac.New(sha256.New, key.secret)
		m.Write([]byte(identity))
		b.WriteString(key.id)
		b.WriteByte('.')
		b.WriteString(hex.EncodeToString(m.Sum(nil)[:6]))
	}
	return b.String()
}

// StoredRoomName is how lkscore stores a redacted session's room name (the
// room's name is personal data to LiveKit: lk.pii.room_name; telephony
// deployments often name rooms after the caller's number): its keyed hash,
// in the form Stored gives an identity ("lkscore-hmac:<key id>.<hex>"), under
// a key separate from the identities' (the HMAC input is prefixed), so the
// same string as a room name and as an identity hash differently.
func (k *IdentityKeys) StoredRoomName(name string) string {
	if name == "" || IsKeyedHash(name) {
		return name
	}
	return k.Stored(roomNameDomain + name)
}

// roomNameDomain separates room names' hashes from identities'.
const roomNameDomain = "lkscore room name\x00"

// IsKeyedHash reports whether s is a keyed hash lkscore stored (an
// identity's or a room name's), not a name.
func IsKeyedHash(s string) bool { return strings.HasPrefix(s, storedKeyedPrefix) }

// IdentityHash is a stored identity's token(s), as facts keep them: "-" for
// none, the keyed tokens joined by "+", or an earlier unkeyed hash's hex.
// An identity that was never stored (it cannot be: ingest hashes every one)
// gives "-": the worker has no key, and an unkeyed hash would be reversible.
func IdentityHash(stored string) string {
	if h, ok := strings.CutPrefix(stored, storedKeyedPrefix); ok && h != "" && !strings.ContainsAny(h, " \t\n") {
		return h
	}
	if h, ok := strings.CutPrefix(stored, storedIdentityPrefix); ok && len(h) == 12 {
		return h
	}
	return "-"
}

// identityTokens splits an IdentityHash value into its tokens (none for "-").
func identityTokens(h string) []string {
	if h == "-" || h == "" {
		return nil
	}
	return strings.Split(h, tokenSep)
}

// IdentityKeysFor is the identity keys a process uses: the configured ones
// (privacy.identity_keys), else one derived from the secret of the LiveKit
// API key first in byte order (adding a key that sorts later keeps it).
func IdentityKeysFor(configured []string, apiKeys map[string]string) (*IdentityKeys, error) {
	if len(configured) > 0 {
		return NewIdentityKeys(configured...)
	}
	if len(apiKeys) == 0 {
		return nil, errors.New("identity keys: none configured and no LiveKit API secret to derive one from")
	}
	return NewIdentityKeys(DeriveIdentityKey(apiKeys[slices.Min(slices.Collect(maps.Keys(apiKeys)))]))
}
