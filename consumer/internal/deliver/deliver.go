// Package deliver is the notify stage: each configured Alertmanager and
// webhook is a Target with its own durable consumer of the alerts stream,
// and the Resender posts the alerts still firing to every Alertmanager again,
// as Prometheus does.
package deliver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/consumer/broker"
	"github.com/lkscore/lkscore/consumer/internal/failure"
	"github.com/lkscore/lkscore/consumer/internal/metrics"
	"github.com/lkscore/lkscore/internal/retrylog"
	"github.com/lkscore/lkscore/notify"
	"github.com/lkscore/lkscore/regress"
	"github.com/lkscore/lkscore/wire"
)

// Target is one delivery target: an Alertmanager or a webhook. Each
// has its own durable consumer of the alerts stream (NotifyConsumer),
// shared by every worker replica and holding one message at a time, so each
// target gets each alert state once and in order (firing before resolved),
// whatever the other targets do.
type Target struct {
	id      string // the consumer's name
	name    string // for metrics and logs
	send    func(ctx context.Context, a wire.Alert, raw []byte) error
	timeout time.Duration
	metrics metrics.AlertDelivery
	log     *slog.Logger
}

// Options are what the alert targets and the resender need.
type Options struct {
	// Client is one client for every target: its transport keeps
	// connections to each; every POST is bounded by alerts.timeout.
	Client  *http.Client
	Metrics metrics.AlertDelivery
	Alerts  config.Alerts
	// Bucket is the regression bucket, whose alert states the resender
	// reads (not needed by Targets).
	Bucket jetstream.KeyValue
}

func (o Options) check(part string, env broker.Env) error {
	if err := broker.Require(part, map[string]bool{"client": o.Client == nil, "metrics": o.Metrics.Deliveries == nil,
		"log": env.Log == nil}); err != nil {
		return err
	}
	if o.Alerts.Timeout <= 0 {
		return fmt.Errorf("%s: alerts.timeout must be positive", part)
	}
	return nil
}

// Targets builds a target per configured Alertmanager and webhook.
func Targets(env broker.Env, o Options) ([]*Target, error) {
	if err := o.check("alert targets", env); err != nil {
		return nil, err
	}
	c, client, m, log := o.Alerts, o.Client, o.Metrics, env.Log
	var out []*Target
	for _, u := range c.Alertmanager.URLs {
		am := notify.NewAlertmanager(u, client, c.ExternalURL, 4*c.Alertmanager.ResendInterval)
		out = append(out, &Target{id: wire.NotifyConsumer("am", u), name: am.Name(), timeout: c.Timeout, metrics: m, log: log,
			send: func(ctx context.Context, a wire.Alert, _ []byte) error { return am.Send(ctx, time.Now(), a) }})
	}
	for i, w := range c.Webhooks {
		if w.Name == "" {
			w.Name = fmt.Sprintf("webhook-%d", i+1)
		}
		wh := notify.NewWebhook(w.Name, w.URL, w.Format, client, c.ExternalURL)
		out = append(out, &Target{id: wire.NotifyConsumer("webhook", w.URL), name: wh.Name(), timeout: c.Timeout, metrics: m, log: log,
			send: wh.Send})
	}
	for _, t := range out {
		for _, o := range []string{"delivered", "retry", "refused"} {
			m.Deliveries.WithLabelValues(t.name, o).Add(0)
		}
	}
	return out, nil
}

// ID is the target's durable consumer (wire.NotifyConsumer).
func (t *Target) ID() string { return t.id }

// Name names the target in metrics and logs.
func (t *Target) Name() string { return t.name }

// Handle delivers one alert. A refusal that will not change by itself (a
// 4xx other than 408 and 429) dead-letters the alert with the target's
// answer; anything else is retried with backoff, up to pipeline.max_deliver.
func (t *Target) Handle(ctx context.Context, m jetstream.Msg) error {
	var a wire.Alert
	if err := json.Unmarshal(m.Data(), &a); err != nil {
		return failure.Permanent(fmt.Errorf("alert is not valid JSON: %w", err))
	}
	sctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	start := time.Now()
	err := t.send(sctx, a, m.Data())
	t.metrics.Duration.WithLabelValues(t.name).Observe(time.Since(start).Seconds())
	switch {
	case err == nil:
		t.metrics.Deliveries.WithLabelValues(t.name, "delivered").Inc()
		t.log.Info("alert delivered", "target", t.name, "alert", a.ID, "status", a.Status)
		return nil
	case notify.Retryable(err):
		t.metrics.Deliveries.WithLabelValues(t.name, "retry").Inc()
		return err
	default:
		t.metrics.Deliveries.WithLabelValues(t.name, "refused").Inc()
		return failure.Permanent(err)
	}
}

// Resender sends the firing alerts to every Alertmanager again every
// interval, as Prometheus does: Alertmanager keeps alerts in memory and
// resolves one that nobody re-sent within its endsAt, so a restarted
// Alertmanager learns them again and the alerts of an lkscore that stopped
// resolve by themselves. Every replica resends; Alertmanager merges
// identical label sets, so that costs requests, not duplicates.
type Resender struct {
	kv       jetstream.KeyValue
	ams      []*notify.Alertmanager
	interval time.Duration
	timeout  time.Duration
	metrics  metrics.AlertDelivery
	log      *slog.Logger
	now      func() time.Time
	retries  *retrylog.Log // per Alertmanager, and the alert state read
}

// NewResender resends the alerts firing in o.Bucket to every Alertmanager
// of o.Alerts every alertmanager.resend_interval.
func NewResender(env broker.Env, o Options) (*Resender, error) {
	if err := o.check("resender", env); err != nil {
		return nil, err
	}
	if err := broker.Require("resender", map[string]bool{"bucket": o.Bucket == nil, "now": env.Now == nil}); err != nil {
		return nil, err
	}
	cfg := o.Alerts
	am := cfg.Alertmanager
	if am.ResendInterval <= 0 {
		return nil, errors.New("resender: alerts.alertmanager.resend_interval must be positive")
	}
	r := &Resender{kv: o.Bucket, interval: am.ResendInterval, timeout: cfg.Timeout, metrics: o.Metrics, log: env.Log, now: env.Now,
		retries: retrylog.New(env.Log, env.Now, 0)}
	for _, u := range am.URLs {
		r.ams = append(r.ams, notify.NewAlertmanager(u, o.Client, cfg.ExternalURL, 4*am.ResendInterval))
	}
	return r, nil
}

// Run resends until ctx ends.
func (r *Resender) Run(ctx context.Context) {
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := r.resend(ctx); err != nil && ctx.Err() == nil {
			r.retries.Failed("alert state", "resending firing alerts: reading the alert state failed", err)
		} else if err == nil {
			r.retries.OK("alert state", "resending firing alerts: the alert state reads again")
		}
	}
}

// resend reads every alert state entry, posts the firing alerts, then
// checks that none of them resolved meanwhile: one that did is posted
// resolved, so a resend racing the resolution cannot revive it.
func (r *Resender) resend(ctx context.Context) error {
	firing, err := r.firing(ctx)
	if err != nil || len(firing) == 0 {
		return err
	}
	alerts := make([]wire.Alert, 0, len(firing))
	for _, a := range firing {
		alerts = append(alerts, a)
	}
	for _, am := range r.ams {
		sctx, cancel := context.WithTimeout(ctx, r.timeout)
		err := am.Send(sctx, r.now(), alerts...)
		cancel()
		if err != nil {
			r.metrics.Deliveries.WithLabelValues(am.Name(), "retry").Inc()
			r.retries.Failed(am.Name(), "resend to alertmanager failed", err, "alerts", len(alerts))
			continue
		}
		r.retries.OK(am.Name(), "resend to alertmanager works again")
		r.metrics.Deliveries.WithLabelValues(am.Name(), "resent").Add(float64(len(alerts)))
	}
	still, err := r.firing(ctx)
	if err != nil {
		return err
	}
	var gone []wire.Alert
	for id, a := range firing {
		if _, ok := still[id]; !ok {
			a.Status, a.At = wire.AlertResolved, r.now().UTC()
			gone = append(gone, a)
		}
	}
	for _, am := range r.ams {
		sctx, cancel := context.WithTimeout(ctx, r.timeout)
		_ = am.Send(sctx, r.now(), gone...) // best effort: the notify stage delivers the resolution anyway
		cancel()
	}
	return nil
}

// firing lists the alerts firing now, by id, from the detector's state
// entries (one per agent, version and scoring version).
func (r *Resender) firing(ctx context.Context) (map[string]wire.Alert, error) {
	lctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	keys, err := r.kv.ListKeysFiltered(lctx, regress.AlertStatesFilter)
	if err != nil {
		return nil, fmt.Errorf("list alert states: %w", err)
	}
	out := map[string]wire.Alert{}
	for k := range keys.Keys() {
		e, err := r.kv.Get(lctx, k)
		if err != nil {
			continue // deleted meanwhile, or expired
		}
		var st regress.AlertState
		if err := json.Unmarshal(e.Value(), &st); err != nil {
			r.log.Warn("alert state is not valid JSON", "key", k, "err", err)
			continue
		}
		for _, a := range st.Firing {
			out[a.ID] = a
		}
	}
	return out, nil
}
