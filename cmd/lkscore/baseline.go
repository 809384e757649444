package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/cmd/lkscore/offline"
	"github.com/lkscore/lkscore/consumer/rescore"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/session"
)

func baselineCommand(getenv func(string) string, stdout io.Writer) *cli.Command {
	agentFlags := func() []cli.Flag {
		return append(toolFlags(),
			&cli.StringFlag{Name: "agent", Usage: "agent name", Required: true},
			&cli.StringFlag{Name: "scoring-version", Usage: "scoring version (default: this config's)"},
		)
	}
	return &cli.Command{
		Name:  "baseline",
		Usage: "seal, show, export or build the baseline an agent's versions are compared with",
		Commands: []*cli.Command{
			{
				Name:   "seal",
				Usage:  "snapshot an agent version's recent sessions as the agent's baseline (immutable, hash-identified)",
				Flags:  append(agentFlags(), &cli.StringFlag{Name: "version", Usage: "the agent version to seal", Required: true}),
				Action: func(ctx context.Context, c *cli.Command) error { return sealBaseline(ctx, c, getenv, stdout) },
			},
			{
				Name:  "show",
				Usage: "summarize an agent's sealed baseline",
				Flags: agentFlags(),
				Action: func(ctx context.Context, c *cli.Command) error {
					b, err := sealedBaseline(ctx, c, getenv)
					if err != nil {
						return err
					}
					return showBaseline(stdout, b)
				},
			},
			{
				Name:  "export",
				Usage: "write an agent's sealed baseline to a file (for lkscore check)",
				Flags: append(agentFlags(), &cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write (default: stdout)"}),
				Action: func(ctx context.Context, c *cli.Command) error {
					b, err := sealedBaseline(ctx, c, getenv)
					if err != nil {
						return err
					}
					return writeBaseline(stdout, c.String("output"), b)
				},
			},
			{
				Name: "build",
				Usage: "score recordings on disk or in S3 into a baseline file (no daemon needed); or, with --scoring-version " +
					"and no PATH, build it from the stored scorecards of that version (after lkscore rescore)",
				ArgsUsage: "[PATH…]",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "file to write (default: stdout)"},
					&cli.StringFlag{Name: "agent", Value: regress.Unknown, Usage: "agent name the baseline is for"},
					&cli.StringFlag{Name: "version", Value: regress.Unknown, Usage: "agent version the recordings are of"},
					&cli.StringFlag{Name: "config", Usage: "config file whose scoring section is used (env LKSCORE_CONFIG)"},
					&cli.StringFlag{Name: "scoring-version", Usage: "build from the results stream's scorecards of this scoring version"},
					&cli.StringFlag{Name: "nats-url", Usage: "NATS URL, with --scoring-version (env LKSCORE_NATS_URL)"},
					&cli.StringFlag{Name: "data-dir", Usage: "the daemon's data directory, with --scoring-version (env LKSCORE_DATA_DIR)"},
				},
				Action: func(ctx context.Context, c *cli.Command) error { return buildBaseline(ctx, c, getenv, stdout) },
			},
		},
	}
}

// buildBaseline is `lkscore baseline build`: from recordings given as
// paths, or from the stored scorecards of --scoring-version.
func buildBaseline(ctx context.Context, c *cli.Command, getenv func(string) string, stdout io.Writer) error {
	if sv := c.String("scoring-version"); sv != "" {
		if c.Args().Len() > 0 {
			return exitError{code: 2, err: errors.New("baseline build: --scoring-version builds from stored scorecards: give no PATH")}
		}
		b, err := storedBaseline(ctx, c, getenv, sv)
		if err != nil {
			return err
		}
		return writeBaseline(stdout, c.String("output"), b)
	}
	if c.Args().Len() == 0 {
		return exitError{code: 2, err: errors.New("baseline build: want at least one PATH, or --scoring-version")}
	}
	path := c.String("config")
	if path == "" {
		path = getenv("LKSCORE_CONFIG")
	}
	samples, sv, err := offline.ScoreSamples(ctx, c.Args().Slice(), path, c.String("agent"), getenv)
	if err != nil {
		return err
	}
	return writeBaseline(stdout, c.String("output"), regress.NewBaseline(c.String("agent"), c.String("version"), sv, samples))
}

// storedBaseline builds an agent version's baseline from the scorecards of
// a scoring version the results stream holds (retention.results): the
// samples the regression detector takes, in stream order.
func storedBaseline(ctx context.Context, c *cli.Command, getenv func(string) string, sv string) (regress.Baseline, error) {
	js, subj, cfg, closeFn, err := toolNATS(c, getenv)
	if err != nil {
		return regress.Baseline{}, err
	}
	defer closeFn()
	agent, ver := c.String("agent"), c.String("version")
	var samples []regress.Sample
	seen := 0
	err = rescore.ReadScorecards(ctx, js, subj, time.Time{}, cfg.NATS.RequestTimeout, func(card *session.Scorecard, seq uint64) {
		k := regress.KeyOf(card, cfg.Regression.VersionTag)
		if card.ScoringVersion != sv || k.Agent != agent {
			return
		}
		seen++
		if k.Version != ver || (!card.Comparable() && card.Overall.Verdict != session.Fail) {
			return
		}
		samples = append(samples, regress.SampleOf(card, seq))
	})
	if err != nil {
		return regress.Baseline{}, exitError{code: 1, err: fmt.Errorf("baseline build: %w", err)}
	}
	if len(samples) == 0 {
		return regress.Baseline{}, exitError{code: 1, err: fmt.Errorf("baseline build: no scorecard of agent %s version %s under scoring %s "+
			"in %s (%d of the agent under that scoring version): lkscore rescore publishes them", agent, ver, sv, subj.ResultStream(), seen)}
	}
	return regress.NewBaseline(agent, ver, sv, samples), nil
}

// baselineKV opens the regression bucket and resolves the scoring version.
func baselineKV(ctx context.Context, c *cli.Command, getenv func(string) string) (jetstream.KeyValue, string, func(), error) {
	js, subj, cfg, closeFn, err := toolNATS(c, getenv)
	if err != nil {
		return nil, "", nil, err
	}
	sv := c.String("scoring-version")
	if sv == "" {
		scorer, err := cfg.Scorer()
		if err != nil {
			closeFn()
			return nil, "", nil, exitError{code: 2, err: err}
		}
		sv = scorer.VersionFor(c.String("agent")) // the agent's version: its policy's
	}
	kv, err := js.KeyValue(ctx, subj.RegressionBucket())
	if err != nil {
		closeFn()
		return nil, "", nil, exitError{code: 1, err: fmt.Errorf("regression bucket %s: %w (has a worker with regression.enabled run yet?)",
			subj.RegressionBucket(), err)}
	}
	return kv, sv, closeFn, nil
}

func sealedBaseline(ctx context.Context, c *cli.Command, getenv func(string) string) (regress.Baseline, error) {
	kv, sv, closeFn, err := baselineKV(ctx, c, getenv)
	if err != nil {
		return regress.Baseline{}, err
	}
	defer closeFn()
	agent := c.String("agent")
	e, err := kv.Get(ctx, regress.BaselineKey(agent, sv))
	if errors.Is(err, jetstream.ErrKeyNotFound) && !c.IsSet("scoring-version") && !configGiven(c, getenv) {
		// No config named: this command's defaults are not the daemon's.
		// The agent's one sealed baseline is the daemon's; several are
		// listed.
		e, err = onlyBaseline(ctx, kv, agent, sv)
	}
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return regress.Baseline{}, exitError{code: 1, err: fmt.Errorf("no sealed baseline for agent %s (scoring %s): lkscore baseline seal first",
			agent, sv)}
	}
	if err != nil {
		return regress.Baseline{}, exitError{code: 1, err: err}
	}
	b, err := regress.ParseBaseline(e.Value())
	if err != nil {
		return regress.Baseline{}, exitError{code: 1, err: err}
	}
	return b, nil
}

func writeBaseline(stdout io.Writer, path string, b regress.Baseline) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return exitError{code: 1, err: err}
	}
	data = append(data, '\n')
	if path == "" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return exitError{code: 1, err: err}
	}
	_, err = fmt.Fprintf(stdout, "wrote %s: %s, agent %s, version %s, %d sessions\n", path, b.ID, b.Agent, b.Version, len(b.Samples))
	return err
}

func showBaseline(w io.Writer, b regress.Baseline) error {
	fmt.Fprintf(w, "%s\nagent %s, version %s, scoring %s, %d sessions\n\n", b.ID, b.Agent, b.Version, b.ScoringVersion, len(b.Samples))
	self := regress.Compare(b.Samples, b.Samples, regress.Config{MinSessions: 1})
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRIC\tMEDIAN OR RATE\tN")
	for _, m := range self.Metrics {
		fmt.Fprintf(tw, "%s\t%g\t%d\n", m.Metric, m.Baseline, m.NBaseline)
	}
	return tw.Flush()
}

// sealBaseline snapshots an agent version's recent sessions as the agent's
// sealed baseline (`lkscore baseline seal`).
func sealBaseline(ctx context.Context, c *cli.Command, getenv func(string) string, stdout io.Writer) error {
	kv, sv, closeFn, err := baselineKV(ctx, c, getenv)
	if err != nil {
		return err
	}
	defer closeFn()
	key := regress.Key{Agent: c.String("agent"), Version: c.String("version"), ScoringVersion: sv}
	e, err := kv.Get(ctx, regress.HistoryKey(key))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return exitError{code: 1, err: fmt.Errorf(
			"no history for %s: no scorecard of this agent, version and scoring version yet", key)}
	}
	if err != nil {
		return exitError{code: 1, err: err}
	}
	var h regress.History
	if err := json.Unmarshal(e.Value(), &h); err != nil {
		return exitError{code: 1, err: fmt.Errorf("history of %s: %w", key, err)}
	}
	b := regress.NewBaseline(key.Agent, key.Version, sv, h.Recent())
	data, _ := json.Marshal(b)
	if _, err := kv.Put(ctx, regress.BaselineKey(key.Agent, sv), data); err != nil {
		return exitError{code: 1, err: fmt.Errorf("seal: %w", err)}
	}
	_, err = fmt.Fprintf(stdout, "sealed %s: agent %s, version %s, %d sessions, scoring %s\n",
		b.ID, b.Agent, b.Version, len(b.Samples), sv)
	return err
}

// configGiven reports whether the command was given a config file (flag or
// LKSCORE_CONFIG).
func configGiven(c *cli.Command, getenv func(string) string) bool {
	return c.String("config") != "" || getenv("LKSCORE_CONFIG") != ""
}

// onlyBaseline is the agent's sealed baseline when it has one, under any
// scoring version; with several it lists them (the caller names one with
// --scoring-version or --config); with none it is ErrKeyNotFound.
func onlyBaseline(ctx context.Context, kv jetstream.KeyValue, agent, tried string) (jetstream.KeyValueEntry, error) {
	lister, err := kv.ListKeysFiltered(ctx, regress.AgentBaselinesFilter(agent))
	if err != nil {
		return nil, err
	}
	var versions []string
	for k := range lister.Keys() {
		if v, ok := regress.BaselineScoringVersion(k); ok {
			versions = append(versions, v)
		}
	}
	switch len(versions) {
	case 0:
		return nil, jetstream.ErrKeyNotFound
	case 1:
		return kv.Get(ctx, regress.BaselineKey(agent, versions[0]))
	}
	slices.Sort(versions)
	return nil, exitError{code: 1, err: fmt.Errorf("agent %s has sealed baselines under %d scoring versions (%s), none of them %s, "+
		"the default config's: name one with --scoring-version, or give the daemon's config with --config",
		agent, len(versions), strings.Join(versions, ", "), tried)}
}
