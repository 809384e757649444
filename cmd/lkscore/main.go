// Command lkscore scores the reliability of LiveKit voice-agent sessions.
// `lkscore serve` runs the daemon; see README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer"
	"github.com/lkscore/lkscore/scoring"
)

// version is stamped at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	os.Exit(run(context.Background(), os.Args, os.Getenv, os.Stdout, os.Stderr))
}

// exitError carries an exit code through urfave/cli.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }

// ExitCode is the process exit code.
func (e exitError) ExitCode() int { return e.code }

// exitCoder is an error that names its exit code (exitError, offline.ExitError).
type exitCoder interface{ ExitCode() int }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newApp(getenv, stdout, stderr).Run(ctx, args)
	if err == nil {
		return 0
	}
	fmt.Fprintln(stderr, "lkscore:", err)
	var ee exitCoder
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return 2
}

// newApp is the command tree. Every command's usage errors (a bad or
// missing flag) are one line and exit 2: the help is for --help.
func newApp(getenv func(string) string, stdout, stderr io.Writer) *cli.Command {
	app := tree(getenv, stdout, stderr)
	var oneLine func(c *cli.Command)
	oneLine = func(c *cli.Command) {
		c.OnUsageError = func(_ context.Context, cmd *cli.Command, err error, _ bool) error {
			if cmd.FullName() == app.Name {
				return exitError{code: 2, err: fmt.Errorf("%w (lkscore --help shows the usage)", err)}
			}
			name := strings.TrimPrefix(cmd.FullName(), app.Name+" ")
			return exitError{code: 2, err: fmt.Errorf("%s: %w (%s --help shows the usage)", name, err, cmd.FullName())}
		}
		for _, sub := range c.Commands {
			oneLine(sub)
		}
	}
	oneLine(app)
	return app
}

func tree(getenv func(string) string, stdout, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:      "lkscore",
		Usage:     "score the reliability of LiveKit voice-agent sessions",
		Version:   version,
		Writer:    stdout,
		ErrWriter: stderr,
		Commands: []*cli.Command{serveCommand(getenv, stderr), demoCommand(stdout, stderr), tailCommand(getenv, stdout, stderr),
			forgetCommand(getenv, stdout), caseCommand(getenv, stdout), offline.Inspect(getenv, stdout),
			offline.Score(getenv, stdout), dlqCommand(getenv, stdout), benchCommand(getenv, stdout), doctorCommand(getenv, stdout),
			baselineCommand(getenv, stdout), rescoreCommand(getenv, stdout, stderr), offline.Check(getenv, stdout, checkCases), versionCommand(stdout)},
		// With no command, the help; an unknown one is a usage error (exit 2),
		// not the help lookup's "No help topic" (exit 3).
		Action: func(ctx context.Context, c *cli.Command) error {
			if c.Args().Len() > 0 {
				return exitError{code: 2, err: fmt.Errorf("unknown command %q (lkscore --help lists the commands)", c.Args().First())}
			}
			return cli.ShowRootCommandHelp(c)
		},
		// Errors are printed once, by run.
		ExitErrHandler: func(context.Context, *cli.Command, error) {},
	}
}

// versionCommand prints lkscore's version and the scoring model's.
func versionCommand(stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print lkscore's version, the scoring model version and the Go version",
		Action: func(context.Context, *cli.Command) error {
			_, err := fmt.Fprintf(stdout, "lkscore %s (scoring model %s, %s)\n", version, scoring.ModelVersion, runtime.Version())
			return err
		},
	}
}

func serveCommand(getenv func(string) string, stderr io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "serve",
		Usage: "run the daemon (embedded NATS unless a NATS URL is configured)",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "config", Usage: "YAML config file (env LKSCORE_CONFIG)"},
			&cli.StringFlag{Name: "listen", Usage: "webhook and collector address (env LKSCORE_LISTEN, default :8080)"},
			&cli.StringFlag{Name: "ops-listen", Usage: "/healthz, /readyz, /metrics address (env LKSCORE_OPS_LISTEN, default :9090)"},
			&cli.StringFlag{Name: "nats-url", Usage: "NATS URL; empty starts an embedded server (env LKSCORE_NATS_URL)"},
			&cli.StringFlag{Name: "data-dir", Usage: "embedded NATS store and local recordings (env LKSCORE_DATA_DIR, default ./lkscore-data)"},
			&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error (env LKSCORE_LOG_LEVEL)"},
			&cli.StringFlag{Name: "role",
				Usage: "all, ingest (webhook and collector) or worker (locator and scoring) (env LKSCORE_ROLE, default all)"},
			&cli.IntFlag{Name: "concurrency", HideDefault: true, Usage: "sessions a worker handles at once (env LKSCORE_CONCURRENCY, default 8 per core)"},
		},
		Action: func(ctx context.Context, c *cli.Command) error {
			cfg, err := loadConfig(c, getenv)
			if err != nil {
				return exitError{code: 2, err: err}
			}
			log := newLogger(stderr, cfg.LogLevel)
			reg := serveRegistry(cfg)
			d, err := consumer.New(cfg, log, reg, reg)
			if err != nil {
				return exitError{code: 1, err: err}
			}
			if err := d.Run(ctx); err != nil {
				return exitError{code: 1, err: err}
			}
			log.Info("stopped")
			return nil
		},
	}
}

// serveRegistry is the metrics registry of `lkscore serve`: Go's and the
// process's collectors, and lkscore_build_info, which says which lkscore
// this process is (`lkscore bench --ops-url` reads its role to report CPU
// a session per role).
func serveRegistry(cfg config.Config) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lkscore_build_info", Help: "1, labeled with this " +
		"process's lkscore version, role and scoring model.", ConstLabels: prometheus.Labels{"version": version,
		"role": cfg.Role, "scoring_model": scoring.ModelVersion}})
	info.Set(1)
	reg.MustRegister(info)
	return reg
}

// loadConfig layers flags over env over the config file over defaults.
func loadConfig(c *cli.Command, getenv func(string) string) (config.Config, error) {
	path := c.String("config")
	if path == "" {
		path = getenv("LKSCORE_CONFIG")
	}
	return config.Load(path, getenv, func(cfg *config.Config) {
		set := func(flag string, dst *string) {
			if c.IsSet(flag) {
				*dst = c.String(flag)
			}
		}
		set("listen", &cfg.Listen)
		set("ops-listen", &cfg.OpsListen)
		set("nats-url", &cfg.NATS.URL)
		set("data-dir", &cfg.DataDir)
		set("log-level", &cfg.LogLevel)
		set("role", &cfg.Role)
		if c.IsSet("concurrency") {
			cfg.Pipeline.Concurrency = int(c.Int("concurrency"))
		}
	})
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level)) // validated by config
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
