package config

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

var devKeys = map[string]string{"LIVEKIT_API_KEY": "devkey", "LIVEKIT_API_SECRET": "devsecret"}

func TestLoadDefaults(t *testing.T) {
	cfg, err := Load("", env(devKeys), nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != ":8080" || cfg.OpsListen != "127.0.0.1:9090" || cfg.DataDir != "./lkscore-data" || cfg.NATS.URL != "" {
		t.Fatalf("defaults: %+v", cfg)
	}
	if cfg.LiveKit.Keys["devkey"] != "devsecret" {
		t.Fatal("env key not loaded")
	}
}

func TestLoadPrecedence(t *testing.T) {
	e := map[string]string{"LKSCORE_LISTEN": "127.0.0.1:7000", "LKSCORE_NATS_URL": "nats://env:4222",
		"LKSCORE_KEYS_FILE": "testdata/keys.yml", "LKSCORE_WEBHOOK_EVENTS": "room_finished, egress_ended"}
	cfg, err := Load("testdata/full.yml", env(e), func(c *Config) { c.NATS.URL = "nats://flag:4222" })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:7000" { // env over file
		t.Errorf("listen = %q", cfg.Listen)
	}
	if cfg.NATS.URL != "nats://flag:4222" { // flag over env
		t.Errorf("nats.url = %q", cfg.NATS.URL)
	}
	if cfg.NATS.Replicas != 3 || cfg.NATS.DuplicateWindow != 15*time.Minute || cfg.NATS.SubjectPrefix != "acme.lkscore." { // file over default
		t.Errorf("file values not applied: %+v", cfg.NATS)
	}
	if strings.Join(cfg.Webhook.Events, ",") != "room_finished,egress_ended" {
		t.Errorf("events = %v", cfg.Webhook.Events)
	}
	if cfg.S3.Bucket != "recordings" || !cfg.S3.ForcePathStyle || cfg.Recordings.KeyTemplate != "{date}/{room_id}/{job_id}/" {
		t.Errorf("s3/recordings not applied: %+v %+v", cfg.S3, cfg.Recordings)
	}
	if cfg.Scoring.Weights.TurnHandling != 0.3 || cfg.Scoring.Verdict.Pass != 85 || cfg.Scoring.Latency.E2EBadMs != 2000 || cfg.Scoring.Turns.LongSilenceMs != 3000 {
		t.Errorf("scoring section not applied over defaults: %+v", cfg.Scoring)
	}
	if len(cfg.LiveKit.Keys) != 2 || cfg.LiveKit.Keys["APIkeyTwo"] != "secret-two-0123456789" {
		t.Errorf("keys file not loaded: %d keys", len(cfg.LiveKit.Keys))
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		file string
		env  map[string]string
		want []string
	}{
		{"unknown key", "testdata/unknown_key.yml", devKeys, []string{"lisen (line 2): no such setting; did you mean listen?"}},
		{"every bad value reported at once", "testdata/bad_values.yml", devKeys, []string{
			"listen:", "log_level:", "nats.replicas:", "nats.storage:", "nats.subject_prefix:",
			"nats.duplicate_window:", `webhook.events[1]: "room_exploded"`, "limits.audio_bytes:",
			"recordings.key_template:", "s3.bucket: required", "s3.endpoint:", "s3.max_attempts:", "scoring.verdict:",
		}},
		{"a policy's unknown key", "testdata/bad_policies.yml", devKeys, []string{"scoring.agents.booking.latency.e2e_god_ms (line 6): no such setting; did you mean scoring.agents.booking.latency.e2e_good_ms?"}},
		{"policies, rules and thresholds", "testdata/bad_rules.yml", devKeys, []string{
			"scoring.agents.booking.verdict: want 0 <= warn (70) <= pass (50)",
			`scoring.rules[0] (booking_latency): line 1, column 8: metrics has no key "e2e_latency_p95" (did you mean "e2e_latency_p95_ms"?)`,
			"regression.thresholds: set regression.enabled: true",
			`regression.thresholds[1] (page2): rule "nope" is not in scoring.rules`,
		}},
		{"no keys", "", nil, []string{"livekit keys: none configured"}},
		{"half a key", "", map[string]string{"LIVEKIT_API_KEY": "k"}, []string{"set both or neither"}},
		{"missing keys file", "", map[string]string{"LKSCORE_KEYS_FILE": "testdata/nope.yml"}, []string{"livekit.keys_file:"}},
		{"missing config file", "testdata/nope.yml", devKeys, []string{"read config:"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.file, env(tc.env), nil)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestWorkerNeedsNoKeys(t *testing.T) {
	if _, err := Load("", env(map[string]string{"LKSCORE_ROLE": "worker"}), nil); err != nil {
		t.Fatalf("a worker without the reconciler needs no LiveKit key: %v", err)
	}
	if _, err := Load("", env(map[string]string{"LKSCORE_ROLE": "worker", "LKSCORE_LIVEKIT_URL": "https://x.livekit.cloud"}), nil); err == nil {
		t.Fatal("the reconciler needs a key to sign ListEgress")
	}
}

func TestSecretsNotLogged(t *testing.T) {
	e := map[string]string{"LIVEKIT_API_KEY": "devkey", "LIVEKIT_API_SECRET": "s3cr3t-value", "LKSCORE_NATS_URL": "nats://user:pa55@nats:4222",
		"LKSCORE_NATS_TOKEN": "natst0ken", "LKSCORE_DASHBOARD_TOKEN": "dashb0ard-token-Q7x"}
	cfg, err := Load("", env(e), nil)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "config", cfg)
	if cfg.Dashboard.Token != "dashb0ard-token-Q7x" || cfg.NATS.Token != "natst0ken" {
		t.Fatal("tokens not loaded from the environment")
	}
	for _, secret := range []string{"s3cr3t", "pa55", "natst0ken", "dashb0ard"} {
		if strings.Contains(buf.String(), secret) {
			t.Fatalf("secret %s in log: %s", secret, buf.String())
		}
	}
	if false {
		t.Fatalf("secret in log: %s", buf.String())
	}
}

func TestKeysFileErrorHidesContent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "keys.yml")
	_ = os.WriteFile(p, []byte("- not: a map\n- topsecret\n"), 0o600)
	_, err := ReadKeysFile(p)
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzLoad(f *testing.F) {
	for _, p := range []string{"testdata/full.yml", "testdata/bad_values.yml", "testdata/unknown_key.yml"} {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "c.yml")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(p, env(devKeys), nil)
		if err == nil {
			if verr := cfg.Validate(); verr != nil {
				t.Fatalf("Load accepted a config Validate rejects: %v", verr)
			}
		}
	})
}

// TestRegressionSettingsFromFile: the detector's settings sit directly under
// regression: (inline), strictly decoded and validated.
func TestRegressionSettingsFromFile(t *testing.T) {
	write := configWriter(t)
	cfg, err := LoadForTools(write("regression:\n  min_sessions: 40\n  min_effect:\n    e2e_latency_p50_ms: 100\n  version_metadata_key: agent_version\n"), func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Regression.Detect.MinSessions != 40 || cfg.Regression.Detect.MinEffect["e2e_latency_p50_ms"] != 100 ||
		cfg.Regression.VersionMetadataKey != "agent_version" || cfg.Regression.Detect.Keep != 100 || cfg.Regression.EvaluateEvery != 10 {
		t.Fatalf("%+v", cfg.Regression)
	}
	for _, bad := range []string{"regression:\n  min_effect:\n    nonsense: 1\n", "regression:\n  fdr: 1.5\n", "regression:\n  keep: 10\n", "regression:\n  no_such_key: 1\n"} {
		if _, err := LoadForTools(write(bad), func(string) string { return "" }, nil); err == nil {
			t.Errorf("%q loaded", bad)
		}
	}
}

// TestAlertTargets: webhooks get a name and the slack format by default,
// a secret URL comes from url_env, and a bad target is refused at start-up
// without the URL in the message.
func TestAlertTargets(t *testing.T) {
	write := configWriter(t)
	env := func(k string) string {
		if k == "SLACK_URL" {
			return "https://hooks.slack.com/services/T0/B0/SECRET"
		}
		return ""
	}
	cfg, err := LoadForTools(write(`alerts:
  alertmanager:
    urls: [http://alertmanager:9093]
  webhooks:
    - url_env: SLACK_URL
    - name: ops
      url: http://hooks.internal/lkscore
      format: json
`), env, nil)
	if err != nil {
		t.Fatal(err)
	}
	w := cfg.Alerts.Webhooks
	if len(w) != 2 || w[0].Name != "webhook-1" || w[0].Format != "slack" || !strings.HasSuffix(w[0].URL, "SECRET") ||
		w[1].Name != "ops" || w[1].Format != "json" || cfg.Alerts.Alertmanager.ResendInterval != time.Minute || cfg.Regression.MinFiring != 5*time.Minute {
		t.Fatalf("%+v", cfg.Alerts)
	}
	for bad, want := range map[string]string{
		"alerts:\n  webhooks:\n    - url: ftp://x/SECRET\n":                                      `alerts.webhooks[0].url: scheme "ftp" is not http or https`,
		"alerts:\n  webhooks:\n    - url_env: UNSET\n":                                           "alerts.webhooks[0].url: required",
		"alerts:\n  webhooks:\n    - url: http://x\n      format: teams\n":                       `alerts.webhooks[0].format: "teams" is not slack or json`,
		"alerts:\n  alertmanager:\n    urls: [alertmanager:9093]\n":                              "alerts.alertmanager.urls[0]",
		"alerts:\n  webhooks:\n    - {name: a, url: http://x}\n    - {name: a, url: http://y}\n": `alerts.webhooks[1].name: "a" names another webhook too`,
		"regression:\n  min_firing: -1s\n":                                                       "regression.min_firing: must not be negative",
	} {
		_, err := LoadForTools(write(bad), env, nil)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: %v, want %q (and no secret)", bad, err, want)
		}
	}
}

// configWriter returns a function that writes a config file (the same path
// each time) and returns its path.
func configWriter(t *testing.T) func(body string) string {
	p := filepath.Join(t.TempDir(), "c.yaml")
	return func(body string) string {
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// TestDashboardTokenStrength: a guessable dashboard token is refused at
// start-up, with what is wrong; generated ones pass.
func TestDashboardTokenStrength(t *testing.T) {
	for tok, ok := range map[string]bool{
		"Ab3$xy":                               false, // 6 characters
		"aaaaaaaaaaaaaaaaaaaa":                 false, // one character, one class
		"passwordpassword1":                    false, // 8 distinct
		"qwertyuiopasdfgh":                     false, // one class
		"dash-token-0123456789":                true,
		"3f9a1c0e7b2d4a6f8e1c3b5d7f9a0c2e":     true, // openssl rand -hex 16
		"q1Jx0e7bKd4a/6f8+E1c3b5d7f9a0c2eZzY=": true,
	} {
		err := TokenStrength(tok)
		if (err == nil) != ok {
			t.Errorf("%q: %v, want accepted %v", tok, err, ok)
		}
	}
	_, err := Load("", env(map[string]string{"LIVEKIT_API_KEY": "devkey", "LIVEKIT_API_SECRET": "devsecret", "LKSCORE_DASHBOARD_TOKEN": "Ab3$xy"}), nil)
	if err == nil || !strings.Contains(err.Error(), "LKSCORE_DASHBOARD_TOKEN: too weak") || !strings.Contains(err.Error(), "6 characters, at least 16") {
		t.Fatalf("a 6-character token: %v", err)
	}
}
