package offline

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v3"
)

// FormatFlags are the output flags of every command that prints a report:
// --format json|table, as score has it, and --json, the same as --format
// json.
func FormatFlags(jsonUsage string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"},
		&cli.BoolFlag{Name: "json", Usage: jsonUsage + " (the same as --format json)"},
	}
}

// WantJSON reads FormatFlags; a bad or contradictory value is a usage error.
func WantJSON(c *cli.Command) (bool, error) {
	name := strings.TrimPrefix(c.FullName(), "lkscore ")
	switch f := c.String("format"); {
	case f != "json" && f != "table":
		return false, ExitError{Code: 2, Err: fmt.Errorf("%s: --format %q is not json or table", name, f)}
	case c.Bool("json") && c.IsSet("format") && f != "json":
		return false, ExitError{Code: 2, Err: fmt.Errorf("%s: --json and --format %s disagree", name, f)}
	default:
		return f == "json" || c.Bool("json"), nil
	}
}
