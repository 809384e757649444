package wire

import (
	"strings"
	"testing"
)

func TestAgentTokenOneToOne(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"":            "_",
		"support-bot": "support-bot",
		"a.b":         "a_2Eb",
		"a_b":         "a__b",
		"a_2E":        "a__2E",
		"Ünïcode bot": "_C3_9Cn_C3_AFcode_20bot",
		"x*y>z":       "x_2Ay_3Ez",
		"_":           "__",
	}
	seen := map[string]string{}
	for name, want := range cases {
		got := AgentToken(name)
		if got != want {
			t.Errorf("AgentToken(%q) = %q, want %q", name, got, want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share the token %q", name, other, got)
		}
		seen[got] = name
		if back, ok := AgentName(got); !ok || back != name {
			t.Errorf("AgentName(%q) = %q, %v; want %q", got, back, ok, name)
		}
	}
	// Token, the alert subjects' readable mapping, is not one-to-one.
	if Token("a.b") != Token("a_b") {
		t.Error("Token is documented to map a.b and a_b alike")
	}
}

func TestAgentNameRefusesForeignTokens(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"a_", "a_2", "a_zz", "a_2e", "a_41", "a_5F", "a.b", "a*", "a b"} {
		if name, ok := AgentName(tok); ok {
			t.Errorf("AgentName(%q) = %q, want refused", tok, name)
		}
	}
}

func TestSubjectsUnderTheirStreams(t *testing.T) {
	t.Parallel()
	s := Default()
	for subject, all := range map[string]string{
		s.Result("CR_USER_INITIATED"):                  s.ResultAll(),
		s.AgentResult("a.b", "CR_USER_INITIATED"):      s.AgentResultAll(),
		s.AgentResult("a.b", "CR_USER_INITIATED") + "": s.AgentResultsOf("a.b"),
		s.Alert("drift", "support-bot"):                s.AlertsOf("support-bot"),
		s.Webhook("room_finished"):                     s.WebhookAll(),
		s.Session("CR_ERROR"):                          s.SessionAll(),
	} {
		if !strings.HasPrefix(subject, strings.TrimSuffix(strings.TrimSuffix(all, ">"), "*."+Token("support-bot"))) {
			t.Errorf("%s is not matched by %s", subject, all)
		}
	}
	if got := strings.Count(s.AgentResult("a.b.c", "CR_ERROR"), "."); got != 3 {
		t.Errorf("%s: an agent name with dots must stay one token", s.AgentResult("a.b.c", "CR_ERROR"))
	}
}

func FuzzAgentToken(f *testing.F) {
	for _, s := range []string{"", "a.b", "a_b", "support-bot", "_2E", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		tok := AgentToken(name)
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; !tokenByte(rune(c)) && c != '_' {
				t.Fatalf("AgentToken(%q) = %q has %q", name, tok, c)
			}
		}
		if back, ok := AgentName(tok); !ok || back != name {
			t.Fatalf("AgentName(AgentToken(%q)) = %q, %v", name, back, ok)
		}
		if n, ok := AgentName(name); ok && AgentToken(n) != name {
			t.Fatalf("AgentName accepted %q, which AgentToken writes as %q", name, AgentToken(n))
		}
	})
}
