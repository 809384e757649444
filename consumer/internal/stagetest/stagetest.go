// Package stagetest starts what a stage's own tests run against: an
// embedded JetStream server with lkscore's streams, the Env every stage
// takes, and the session facts bucket. Tests import it; the daemon does not.
package stagetest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/factstore"
	"github.com/lkscore/lkscore/internal/testenv"
	"github.com/lkscore/lkscore/wire"
)

// Setup is one test's NATS and the plumbing around it.
type Setup struct {
	NATS *testenv.NATS
	JS   jetstream.JetStream
	Cfg  config.Config // config.Default()
	Env  broker.Env    // default subjects, the config's timeouts, the wall clock, a silent logger
}

// Start starts an embedded JetStream server (stopped at cleanup) and
// creates lkscore's streams on it.
func Start(t testing.TB) Setup {
	t.Helper()
	ns := testenv.StartNATS(t)
	js := testenv.JetStream(t, ns.URL())
	cfg := config.Default()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := broker.Env{JS: js, Subjects: wire.Default(), Timeouts: broker.TimeoutsFrom(cfg.NATS), Now: time.Now, Log: log}
	if err := broker.EnsureStreams(context.Background(), js, env.Subjects, cfg, log); err != nil {
		t.Fatal(err)
	}
	return Setup{NATS: ns, JS: js, Cfg: cfg, Env: env}
}

// Facts opens the session facts bucket.
func (s Setup) Facts(t testing.TB) *factstore.Store {
	t.Helper()
	fs, err := factstore.Open(context.Background(), s.JS, s.Env.Subjects, s.Cfg.NATS, s.Env.Log)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}
