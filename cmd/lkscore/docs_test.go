package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer"
	"github.com/lkscore/lkscore/wire"
)

// TestDocsMatchCode checks the README against the code, both ways: every
// command, flag, environment variable, config key and metric that exists is
// named, and every one the README names exists.
func TestDocsMatchCode(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)

	t.Run("commands and flags", func(t *testing.T) {
		app := newApp(func(string) string { return "" }, io.Discard, io.Discard)
		flags := map[string]bool{}
		var walk func(path string, c *cli.Command)
		walk = func(path string, c *cli.Command) {
			for _, f := range c.Flags {
				for _, n := range f.Names() {
					flags[n] = true
				}
			}
			for _, sub := range c.Commands {
				p := path + " " + sub.Name
				if !strings.Contains(readme, p) {
					t.Errorf("README never shows the command %q", p)
				}
				walk(p, sub)
			}
		}
		walk("lkscore", app)
		for f := range flags {
			if f == "help" || f == "version" || f == "h" || f == "v" {
				continue
			}
			if !strings.Contains(readme, "--"+f) {
				t.Errorf("README never names the flag --%s", f)
			}
		}
		// Flags of other tools the README quotes (helm, kubectl, docker, nats, go).
		foreign := map[string]bool{"set": true, "from-literal": true, "from-file": true, "build-arg": true, "filter": true,
			"tags": true, "always": true, "namespace": true, "bucket": true, "lifecycle-configuration": true,
			"secrets": true, "secrets-file": true} // lk agent (the LiveKit CLI)
		for _, m := range regexp.MustCompile(`(?:^|[\s(\x60])--([a-z][a-z0-9-]+)`).FindAllStringSubmatch(readme, -1) {
			if !flags[m[1]] && !foreign[m[1]] {
				t.Errorf("README names --%s, which no lkscore command has", m[1])
			}
		}
	})

	t.Run("environment", func(t *testing.T) {
		read := map[string]bool{"LKSCORE_CONFIG": true} // read by cmd before config.Load
		getenv := func(k string) string { read[k] = true; return "" }
		_, _ = config.Load("", getenv, nil)
		_, _ = config.S3FromEnv(getenv)
		for k := range read {
			if !strings.Contains(readme, "`"+k+"`") && !strings.Contains(readme, k+"`") {
				t.Errorf("README never names the environment variable %s", k)
			}
		}
		// Variables for tests and for the agents (not lkscore's own).
		other := map[string]bool{"LKSCORE_REQUIRE_S3": true, "LKSCORE_REQUIRE_HELM": true, "LKSCORE_REQUIRE_AGENTS_JS": true, "LKSCORE_REQUIRE_BROWSER": true, "LKSCORE_REQUIRE_AUDIO_TOOLS": true, "LKSCORE_REQUIRE_ALERTMANAGER": true, "LKSCORE_CRASH_LOGS": true, "LKSCORE_SCREENSHOT_DIR": true,
			"LKSCORE_ROLLING_ROUNDS": true, "LKSCORE_BACKLOG_ROUNDS": true, "LIVEKIT_OBSERVABILITY_URL": true, "LIVEKIT_URL": true}
		// Stream and bucket names share the prefix.
		subj := wire.NewSubjects("lkscore.", "LKSCORE")
		for _, n := range []string{subj.WebhookStream(), subj.UploadStream(), subj.SessionStream(), subj.ResultStream(),
			subj.DLQStream(), subj.EgressLinks(), subj.SessionFacts(), subj.AlertStream(), subj.RegressionBucket(), subj.AgentResultStream(), subj.ForwardStream(), subj.ScoringBucket(), subj.RedactedRooms()} {
			other[n] = true
		}
		for _, m := range regexp.MustCompile(`\b(?:LKSCORE|LIVEKIT)_[A-Z0-9_]+`).FindAllString(readme, -1) {
			if !read[m] && !other[m] {
				t.Errorf("README names %s, which lkscore does not read", m)
			}
		}
	})

	t.Run("config keys", func(t *testing.T) {
		keys := yamlKeys(reflect.TypeOf(config.Config{}), "")
		section := readme[strings.Index(readme, "\n## Configuration"):]
		section = section[:strings.Index(section[1:], "\n## ")+1]
		documented := map[string]bool{}
		for _, m := range regexp.MustCompile("(?m)^\\| `([a-z0-9_.*]+)`").FindAllStringSubmatch(section, -1) {
			documented[m[1]] = true
		}
		for _, k := range keys {
			if !documented[k] {
				t.Errorf("the configuration table lacks %s", k)
			}
		}
		for k := range documented {
			if !slices.Contains(keys, k) {
				t.Errorf("the configuration table names %s, which is not a config key", k)
			}
		}
	})

	t.Run("metrics", func(t *testing.T) {
		rec := registeredMetrics(t)
		if len(rec.names) == 0 {
			t.Fatal("no metrics registered")
		}
		for n := range rec.names {
			if !strings.Contains(readme, "`"+n+"`") {
				t.Errorf("README never names the metric %s", n)
			}
		}
		for _, m := range regexp.MustCompile(`\blkscore_[a-z0-9_]+`).FindAllString(readme, -1) {
			if !rec.names[m] {
				t.Errorf("README names the metric %s, which is not registered", m)
			}
		}
	})
}

// TestDocsNameOnlyWhatExists: the pages in docs/ name only flags,
// environment variables and metrics that exist.
func TestDocsNameOnlyWhatExists(t *testing.T) {
	pages, _ := filepath.Glob("../../docs/*.md")
	if len(pages) < 5 {
		t.Fatalf("%d pages in docs/", len(pages))
	}
	flags := map[string]bool{}
	var walk func(c *cli.Command)
	walk = func(c *cli.Command) {
		for _, f := range c.Flags {
			for _, n := range f.Names() {
				flags[n] = true
			}
		}
		for _, sub := range c.Commands {
			walk(sub)
		}
	}
	walk(newApp(func(string) string { return "" }, io.Discard, io.Discard))
	env := map[string]bool{"LKSCORE_CONFIG": true, "LKSCORE_REQUIRE_S3": true, "LKSCORE_REQUIRE_HELM": true,
		"LKSCORE_REQUIRE_AGENTS_JS": true, "LKSCORE_REQUIRE_BROWSER": true, "LKSCORE_REQUIRE_AUDIO_TOOLS": true, "LKSCORE_SCREENSHOT_DIR": true,
		"LKSCORE_REQUIRE_ALERTMANAGER": true, "LKSCORE_CRASH_LOGS": true, "LKSCORE_ROLLING_ROUNDS": true, "LKSCORE_BACKLOG_ROUNDS": true}
	getenv := func(k string) string { env[k] = true; return "" }
	_, _ = config.Load("", getenv, nil)
	subj := wire.NewSubjects("lkscore.", "LKSCORE")
	for _, n := range []string{subj.WebhookStream(), subj.UploadStream(), subj.SessionStream(), subj.ResultStream(),
		subj.DLQStream(), subj.EgressLinks(), subj.SessionFacts(), subj.AlertStream(), subj.RegressionBucket(), subj.AgentResultStream(), subj.ForwardStream(), subj.ScoringBucket(), subj.RedactedRooms()} {
		env[n] = true
	}
	rec := registeredMetrics(t)
	for _, page := range pages {
		b, _ := os.ReadFile(page)
		doc := string(b)
		for _, m := range regexp.MustCompile(`(?:^|[\s(\x60])--([a-z][a-z0-9-]+)`).FindAllStringSubmatch(doc, -1) {
			if !flags[m[1]] {
				t.Errorf("%s names --%s, which no lkscore command has", filepath.Base(page), m[1])
			}
		}
		for _, m := range regexp.MustCompile(`\bLKSCORE_[A-Z0-9_]+`).FindAllString(doc, -1) {
			if !env[m] {
				t.Errorf("%s names %s, which lkscore does not read", filepath.Base(page), m)
			}
		}
		for _, m := range regexp.MustCompile(`\blkscore_[a-z0-9_]+`).FindAllString(doc, -1) {
			if !rec.names[m] {
				t.Errorf("%s names the metric %s, which is not registered", filepath.Base(page), m)
			}
		}
	}
}

// registeredMetrics records the metrics `lkscore serve` registers: the
// daemon's and lkscore_build_info (serveRegistry's own lkscore_ ones).
func registeredMetrics(t *testing.T) *descRecorder {
	t.Helper()
	rec := &descRecorder{names: map[string]bool{}}
	cfg := config.Default()
	cfg.LiveKit.Keys = map[string]string{"k": "secret-0123456789"}
	if _, err := consumer.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), rec, prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	families, err := serveRegistry(cfg).Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "lkscore_") {
			rec.names[f.GetName()] = true
		}
	}
	return rec
}

// yamlKeys lists the dotted YAML keys of a config struct; scoring.* is
// documented in docs/scoring.md and listed as one row.
func yamlKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		parts := strings.Split(f.Tag.Get("yaml"), ",")
		tag := parts[0]
		if tag == "" && slices.Contains(parts[1:], "inline") {
			out = append(out, yamlKeys(f.Type, prefix)...)
			continue
		}
		if tag == "" || tag == "-" {
			continue
		}
		key := prefix + tag
		if f.Type.Kind() == reflect.Struct && key != "scoring" {
			out = append(out, yamlKeys(f.Type, key+".")...)
			continue
		}
		if key == "scoring" {
			key = "scoring.*"
		}
		out = append(out, key)
	}
	sort.Strings(out)
	return out
}

// descRecorder is a Registerer that records metric names.
type descRecorder struct{ names map[string]bool }

var fqNameRE = regexp.MustCompile(`fqName: "([^"]+)"`)

func (r *descRecorder) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := fqNameRE.FindStringSubmatch(d.String()); m != nil {
			r.names[m[1]] = true
		}
	}
	return nil
}

func (r *descRecorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = r.Register(c)
	}
}

func (r *descRecorder) Unregister(prometheus.Collector) bool { return true }
