package facts

import (
	"strings"
	"testing"

	"github.com/livekit/protocol/livekit"

	"github.com/lkscore/lkscore/internal/testenv"
)

// TestIdentityRotationStory: the job's identity stored under the old key,
// one departure under both keys (a rotating replica), a retried copy of it
// under the new key only: one agent departure, the agent's, first.
func TestIdentityRotationStory(t *testing.T) {
	t.Parallel()
	old := mustIdentityKeys("old identity key 0123456789")
	both := mustIdentityKeys("new identity key 9876543210", "old identity key 0123456789")
	newOnly := mustIdentityKeys("new identity key 9876543210")
	left := func(keys *IdentityKeys, id, identity string, at, stored int64) Observation {
		return storedDeparture(t, keys, testenv.ParticipantLeft(id, "RM", identity, livekit.ParticipantInfo_STANDARD,
			livekit.DisconnectReason_CLIENT_INITIATED, at), stored)
	}
	obs := []Observation{
		{Field: FieldAgentIdentity, Value: IdentityHash(old.Stored("bot")), Source: SourceWebhook},
		left(both, "EV_1", "bot", 100, 1),
		left(newOnly, "EV_1", "bot", 100, 5), // LiveKit's retry after the dedup window, stored again
		left(newOnly, "EV_2", "caller", 101, 2),
	}
	s := storyOf(obs)
	if len(s.departures) != 2 || s.departures[0].role != RoleAgent || s.departures[1].role != RoleCaller {
		t.Fatalf("departures %+v, want the agent's then the caller's", s.departures)
	}
	// Without the overlap the tokens share nothing: the kind decides.
	s = storyOf([]Observation{obs[0], left(newOnly, "EV_1", "bot", 100, 1)})
	if s.departures[0].role != RoleCaller {
		t.Fatalf("a token under another key matched: %+v", s.departures)
	}
}

// TestIdentityStoredForms: keyed tokens per key, the unkeyed form stored
// before still read, an identity never stored gives no token.
func TestIdentityStoredForms(t *testing.T) {
	t.Parallel()
	k := mustIdentityKeys("new identity key 9876543210", "old identity key 0123456789")
	s := k.Stored("sip_+14155550100")
	tokens := identityTokens(IdentityHash(s))
	if !strings.HasPrefix(s, "lkscore-hmac:") || len(tokens) != 2 || len(tokens[0]) != 19 || tokens[0][6] != '.' {
		t.Fatalf("stored %q, tokens %q", s, tokens)
	}
	if k.Stored(s) != s || k.Stored("") != "" {
		t.Fatalf("stored twice or empty: %q %q", k.Stored(s), k.Stored(""))
	}
	if got := IdentityHash("lkscore-hash:0123456789ab"); got != "0123456789ab" {
		t.Errorf("the unkeyed form reads %q", got)
	}
	for _, raw := range []string{"", "caller", "lkscore-hash:short", "lkscore-hmac:", "lkscore-hmac:a b"} {
		if got := IdentityHash(raw); got != "-" {
			t.Errorf("IdentityHash(%q) = %q, want -", raw, got)
		}
	}
	if a, b := DeriveIdentityKey("secret-a"), DeriveIdentityKey("secret-b"); a == b || len(a) != 64 {
		t.Errorf("derived keys %q %q", a, b)
	}
	for _, bad := range [][]string{nil, {"short"}, {"same identity key 0123", "same identity key 0123"}, {"a1234567890123456", "b1234567890123456",
		"c1234567890123456", "d1234567890123456", "e1234567890123456"}} {
		if _, err := NewIdentityKeys(bad...); err == nil {
			t.Errorf("NewIdentityKeys(%q) accepted", bad)
		}
	}
	d1, _ := IdentityKeysFor(nil, map[string]string{"b": "secret-b", "a": "secret-a"})
	d2 := mustIdentityKeys(DeriveIdentityKey("secret-a"))
	if d1.Stored("x") != d2.Stored("x") {
		t.Error("the derived key is not the first API key's")
	}
}
