package session

import "testing"

func TestVersion(t *testing.T) {
	for _, c := range []struct {
		tags               []string
		deployment, prefix string
		want               string
	}{
		{[]string{"version:1.2"}, "dep", "", "1.2"},
		{[]string{"release:v2", "version:1.2"}, "dep", "release:", "v2"},
		{[]string{"version:1.2"}, "dep", "release:", "dep"},
		{[]string{"version:", MetadataVersionTag + "m3"}, "", "", "m3"},
		{[]string{MetadataVersionTag + "m3"}, "dep", "", "dep"},
		{nil, "", "", ""},
	} {
		if got := Version(c.tags, c.deployment, c.prefix); got != c.want {
			t.Errorf("Version(%q, %q, %q) = %q, want %q", c.tags, c.deployment, c.prefix, got, c.want)
		}
	}
}
