package config

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// applyEnv overlays the LKSCORE_* variables.
func (c *Config) applyEnv(getenv func(string) string) error {
	var errs []error
	str := func(name string, dst *string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	str("LKSCORE_LISTEN", &c.Listen)
	str("LKSCORE_OPS_LISTEN", &c.OpsListen)
	str("LKSCORE_DATA_DIR", &c.DataDir)
	str("LKSCORE_LOG_LEVEL", &c.LogLevel)
	str("LKSCORE_NATS_URL", &c.NATS.URL)
	str("LKSCORE_NATS_CREDS_FILE", &c.NATS.CredsFile)
	str("LKSCORE_NATS_NKEY_FILE", &c.NATS.NKeyFile)
	str("LKSCORE_NATS_TOKEN", &c.NATS.Token)
	str("LKSCORE_DASHBOARD_TOKEN", &c.Dashboard.Token)
	if v := getenv("LKSCORE_IDENTITY_KEYS"); v != "" {
		c.Privacy.IdentityKeys = splitList(v)
	}
	str("LKSCORE_KEYS_FILE", &c.LiveKit.KeysFile)
	str("LKSCORE_ROLE", &c.Role)
	str("LKSCORE_LIVEKIT_URL", &c.Pipeline.LiveKitURL)
	str("LKSCORE_POOL", &c.Pipeline.Pool)
	str("LKSCORE_UPLOAD_SYNC", &c.HTTP.UploadSync)
	if v := getenv("LKSCORE_CLOSE_REASONS"); v != "" {
		c.Pipeline.CloseReasons = splitList(v)
	}
	if v := getenv("LKSCORE_CONCURRENCY"); v != "" {
		if n, err := strconv.Atoi(v); err != nil {
			errs = append(errs, fmt.Errorf("LKSCORE_CONCURRENCY: %q is not an integer", v))
		} else {
			c.Pipeline.Concurrency = n
		}
	}
	errs = append(errs, c.S3.applyEnv(getenv))
	if v := getenv("LKSCORE_NATS_REPLICAS"); v != "" {
		if n, err := strconv.Atoi(v); err != nil {
			errs = append(errs, fmt.Errorf("LKSCORE_NATS_REPLICAS: %q is not an integer", v))
		} else {
			c.NATS.Replicas = n
		}
	}
	if v := getenv("LKSCORE_NATS_EMBEDDED_SYNC"); v != "" {
		c.NATS.EmbeddedSync = v
	}
	if v := getenv("LKSCORE_WEBHOOK_EVENTS"); v != "" {
		c.Webhook.Events = splitList(v)
	}
	if v := getenv("LKSCORE_OPS_PPROF"); v != "" {
		if b, err := strconv.ParseBool(v); err != nil {
			errs = append(errs, fmt.Errorf("LKSCORE_OPS_PPROF: %q is not a boolean", v))
		} else {
			c.OpsPprof = b
		}
	}
	return errors.Join(errs...)
}

// applyEnv overlays the LKSCORE_S3_* variables.
func (s *S3) applyEnv(getenv func(string) string) error {
	for name, dst := range map[string]*string{
		"LKSCORE_S3_BUCKET": &s.Bucket, "LKSCORE_S3_PREFIX": &s.Prefix,
		"LKSCORE_S3_ENDPOINT": &s.Endpoint, "LKSCORE_S3_REGION": &s.Region,
	} {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	if v := getenv("LKSCORE_S3_FORCE_PATH_STYLE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("LKSCORE_S3_FORCE_PATH_STYLE: %q is not a boolean", v)
		}
		s.ForcePathStyle = b
	}
	return nil
}

// S3FromEnv returns the default S3 settings overlaid with LKSCORE_S3_*, for
// tools that need S3 access but not the daemon's whole config.
func S3FromEnv(getenv func(string) string) (S3, error) {
	s := Default().S3
	err := s.applyEnv(getenv)
	return s, err
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// loadKeys fills Keys from LIVEKIT_API_KEY/LIVEKIT_API_SECRET and KeysFile.
func (l *LiveKit) loadKeys(getenv func(string) string) error {
	l.Keys = map[string]string{}
	var errs []error
	key, secret := getenv("LIVEKIT_API_KEY"), getenv("LIVEKIT_API_SECRET")
	switch {
	case key != "" && secret != "":
		l.Keys[key] = secret
	case key != "" || secret != "":
		errs = append(errs, errors.New("LIVEKIT_API_KEY and LIVEKIT_API_SECRET: set both or neither"))
	}
	if l.KeysFile != "" {
		keys, err := ReadKeysFile(l.KeysFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("livekit.keys_file: %w", err))
		}
		for k, v := range keys {
			l.Keys[k] = v
		}
	}
	if len(l.Keys) == 0 && len(errs) == 0 {
		errs = append(errs, errors.New("livekit keys: none configured; set LIVEKIT_API_KEY and LIVEKIT_API_SECRET, or LKSCORE_KEYS_FILE"))
	}
	return errors.Join(errs...)
}

// ReadKeysFile reads livekit-server's key file format: a YAML map of API key to secret.
func ReadKeysFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys map[string]string
	if err := yaml.Unmarshal(b, &keys); err != nil {
		// The YAML error may quote the file's content: do not echo secrets.
		return nil, fmt.Errorf("%s: not a `key: secret` YAML map", path)
	}
	for k, v := range keys {
		if k == "" || v == "" {
			return nil, fmt.Errorf("%s: empty key or secret", path)
		}
	}
	return keys, nil
}
