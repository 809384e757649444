package wire

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// natsToken is what a NATS subject token or key-value key segment may be
// (no '.', no wildcard, no whitespace or control byte).
var natsToken = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// TestCheckID: LiveKit's ids pass; ids out of the rule fail with an
// IDError naming the field and why.
func TestCheckID(t *testing.T) {
	for _, id := range []string{"RM_a1B2c3D4e5F6", "AJ_xyz", "EV_" + strings.Repeat("x", MaxIDLen-3), "a-b_c"} {
		if err := CheckID("room.sid", id); err != nil {
			t.Errorf("CheckID(%q): %v", id, err)
		}
	}
	for id, why := range map[string]string{
		"":                                      "empty",
		"RM_" + strings.Repeat("x", MaxIDLen-2): "129 bytes, over 128",
		"RM_a.b":                                "byte 0x2e at 4",
		"RM_\x00":                               "byte 0x00 at 3",
		"RM_ü":                                  "byte 0xc3 at 3",
		"RM_>":                                  "byte 0x3e at 3",
		"_lkscore":                              "begins with _lkscore, kept for lkscore's own keys",
		"_lkscore_x":                            "begins with _lkscore, kept for lkscore's own keys",
	} {
		err := CheckID("job.room.sid", id)
		var ie *IDError
		if !errors.As(err, &ie) || ie.Field != "job.room.sid" || ie.Reason != why {
			t.Errorf("CheckID(%.20q) = %v, want an IDError for job.room.sid: %s", id, err, why)
		}
	}
}

// FuzzIDRule: whatever the id, an id the rule admits is its own subject
// token and key segment (wire.Token leaves it as it is, so two ids never
// share a key) and makes session keys that parse back to it; an id it
// refuses is refused by ParseSessionKey too, so no CLI path builds a key
// from it. Names the rule admits make one subject token, one-to-one, and
// subjects under the guard's bound.
func FuzzIDRule(f *testing.F) {
	for n := range 300 {
		f.Add(strings.Repeat("x", n), "AJ_a")
	}
	for b := range 256 {
		f.Add("RM_"+string([]byte{byte(b)}), "a"+string([]byte{byte(b)})+"b")
	}
	f.Add("RM_"+strings.Repeat("x", 4200), strings.Repeat("ü", 200))
	f.Fuzz(func(t *testing.T, id, other string) {
		if CheckID("id", id) == nil {
			if len(id) > MaxIDLen || !natsToken.MatchString(id) || Token(id) != id {
				t.Fatalf("%q passes the id rule but is not a bounded subject token (Token %q)", id, Token(id))
			}
			if CheckID("id", other) == nil {
				room, job, err := ParseSessionKey(id + "/" + other)
				if err != nil || room != id || job != other {
					t.Fatalf("ParseSessionKey(%q/%q) = %q, %q, %v", id, other, room, job, err)
				}
			}
		} else if _, _, err := ParseSessionKey(id + "/AJ_a"); err == nil {
			t.Fatalf("ParseSessionKey accepted room id %q, which the id rule refuses", id)
		}
		if CheckName("name", id) != nil || CheckName("name", other) != nil {
			return
		}
		tok := AgentToken(id)
		if !natsToken.MatchString(tok) || len(tok) > 3*MaxNameLen {
			t.Fatalf("AgentToken(%q) = %q: not one bounded subject token", id, tok)
		}
		if id != other && tok == AgentToken(other) {
			t.Fatalf("AgentToken(%q) = AgentToken(%q) = %q", id, other, tok)
		}
		s := NewSubjects("lkscore.", "LKSCORE")
		if subj := s.AgentResult(id, "CR_PARTICIPANT_DISCONNECTED"); len(subj) > 1024 {
			t.Fatalf("agent result subject of %d bytes for a name the rule admits", len(subj))
		}
	})
}
