package wire_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/lkscore/lkscore/wire"
)

// TestAlertExampleMatchesSchema: the alert example in docs/regression.md is
// valid against docs/alert.schema.json.
func TestAlertExampleMatchesSchema(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../docs/regression.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/regression.md has no ```json example")
	}
	schema, err := jsonschema.NewCompiler().Compile("../docs/alert.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(example))
	if err != nil {
		t.Fatal(err)
	}
	if err := schema.Validate(v); err != nil {
		t.Errorf("the example does not match the schema: %v", err)
	}
	var a wire.Alert
	if err := json.Unmarshal([]byte(example), &a); err != nil || a.Status != wire.AlertFiring || a.Kind != "regression" {
		t.Errorf("the example is not a firing regression alert: %v %+v", err, a)
	}
}
