package broker

import "testing"

func TestRequireNamesEveryMissingPart(t *testing.T) {
	t.Parallel()
	if err := Require("locator", map[string]bool{"js": false, "store": false}); err != nil {
		t.Fatalf("nothing missing: %v", err)
	}
	err := Require("locator", map[string]bool{"store": true, "js": false, "facts": true})
	if err == nil || err.Error() != "locator: facts, store required" {
		t.Fatalf("got %v, want the sorted list of what is missing", err)
	}
}
