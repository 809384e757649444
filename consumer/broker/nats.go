package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/lkscore/lkscore/config"
)

// StartEmbedded starts an in-process NATS server with JetStream on loopback,
// storing under dataDir/nats, and waits up to ready for it to accept
// connections. Clients must present token (EmbeddedToken). Shut it down
// with Shutdown + WaitForShutdown.
// syncInterval and syncAlways are nats.embedded_sync (config.NATS.EmbeddedSyncInterval).
func StartEmbedded(dataDir string, port int, ready time.Duration, token string, syncInterval time.Duration, syncAlways bool) (*server.Server, error) {
	if token == "" {
		return nil, errors.New("embedded nats: a token is required")
	}
	opts := &server.Options{
		Authorization: token,
		ServerName:    "lkscore-embedded",
		Host:          "127.0.0.1",
		Port:          port,
		JetStream:     true,
		StoreDir:      filepath.Join(dataDir, "nats"),
		NoLog:         true,
		NoSigs:        true,
		SyncInterval:  syncInterval,
		SyncAlways:    syncAlways,
	}
	if port > 0 {
		// A port in use would only show as "not ready" after the whole wait.
		ln, err := net.Listen("tcp", net.JoinHostPort(opts.Host, strconv.Itoa(port)))
		if err != nil {
			return nil, fmt.Errorf("embedded nats: cannot listen on 127.0.0.1:%d (nats.embedded_port): %w; stop what uses it, "+
				"set nats.embedded_port to a free port (-1 picks one), or set nats.url to run against an existing server", port, err)
		}
		_ = ln.Close()
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(ready) {
		s.Shutdown()
		return nil, fmt.Errorf("embedded nats: not ready after %s (is the port in use?)", ready)
	}
	return s, nil
}

// Link is what /healthz knows of a connection: since when it has been
// down. The zero Link is up.
type Link struct{ downSince atomic.Int64 }

// Unhealthy says why a connection that cannot recover by itself should
// restart the process, or "": nc closed (the client gave up: no reconnect
// follows), or down longer than after (0: no bound on time).
func (l *Link) Unhealthy(nc *nats.Conn, after time.Duration, now time.Time) string {
	if nc == nil {
		return ""
	}
	if nc.IsClosed() {
		return "nats connection closed: the client will not reconnect"
	}
	since := l.downSince.Load()
	if after <= 0 || since == 0 || nc.IsConnected() {
		return ""
	}
	if down := now.Sub(time.Unix(0, since)); down > after {
		return fmt.Sprintf("nats unreachable for %s (nats.unhealthy_after %s)", down.Round(time.Second), after)
	}
	return ""
}

// Connect dials NATS with reconnects forever, logging connection changes
// and recording them in link (nil: not recorded).
func Connect(url string, n config.NATS, log *slog.Logger, link *Link) (*nats.Conn, error) {
	if link == nil {
		link = &Link{}
	}
	opts := []nats.Option{
		nats.Name("lkscore"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // our own close or drain
			}
			link.downSince.CompareAndSwap(0, time.Now().UnixNano())
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			link.downSince.Store(0)
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
		}),
		// A server in lame duck mode has handed its leaderships over and
		// will close its clients after its grace period (the official
		// chart's: 10 s), meanwhile taking no work: leave it at once. The
		// connection's subscriptions, pull consumers and watchers move
		// with it; what was in flight on the old one is retried there.
		nats.LameDuckModeHandler(func(c *nats.Conn) {
			log.Info("nats server entering lame duck mode: moving to another", "url", c.ConnectedUrlRedacted())
			if err := c.ForceReconnect(); err != nil {
				log.Warn("nats: could not leave the server in lame duck mode", "err", err)
			}
		}),
	}
	if n.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(n.CredsFile))
	}
	if n.NKeyFile != "" {
		opt, err := nats.NkeyOptionFromSeed(n.NKeyFile)
		if err != nil {
			return nil, fmt.Errorf("nats nkey: %w", err)
		}
		opts = append(opts, opt)
	}
	if n.Token != "" {
		opts = append(opts, nats.Token(n.Token))
	}
	if n.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(n.TLSCAFile))
	}
	if n.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(n.TLSCertFile, n.TLSKeyFile))
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, &ConnectError{URL: redactURL(url), Err: err}
	}
	return nc, nil
}

// Timeouts bound NATS calls: an acknowledged publish, and a JetStream API
// request (config nats.publish_timeout and nats.request_timeout).
type Timeouts struct {
	Publish, Request time.Duration
}

func TimeoutsFrom(n config.NATS) Timeouts {
	return Timeouts{Publish: n.PublishTimeout, Request: n.RequestTimeout}
}

// ConnectError is a NATS connection that could not be made: where, and
// what NATS said, in words a user can act on.
type ConnectError struct {
	URL string // without credentials
	Err error
}

func (e *ConnectError) Error() string {
	switch {
	case errors.Is(e.Err, nats.ErrNoServers):
		return fmt.Sprintf("cannot reach NATS at %s: nothing answers there", e.URL)
	case errors.Is(e.Err, nats.ErrAuthorization), errors.Is(e.Err, nats.ErrAuthExpired), errors.Is(e.Err, nats.ErrAuthRevoked):
		return fmt.Sprintf("NATS at %s refused lkscore's credentials (nats.creds_file, nats.nkey_file, LKSCORE_NATS_TOKEN, "+
			"or the embedded server's token in <data_dir>/nats.token)", e.URL)
	}
	return fmt.Sprintf("connect to NATS at %s: %v", e.URL, e.Err)
}

func (e *ConnectError) Unwrap() error { return e.Err }

// redactURL drops any user:password from a comma-separated NATS URL list.
func redactURL(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		if at := strings.LastIndex(p, "@"); at >= 0 {
			if scheme := strings.Index(p, "://"); scheme >= 0 && scheme < at {
				parts[i] = p[:scheme+3] + "***@" + p[at+1:]
			}
		}
	}
	return strings.Join(parts, ",")
}

// Missing names a stream or bucket of lkscore that the NATS server does not
// have, saying why that usually is: err when it is anything else.
func Missing(name string, err error) error {
	if errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		return fmt.Errorf("%s does not exist on this NATS server: lkscore serve creates it when it starts (is this the NATS "+
			"lkscore serve uses, with the same nats.stream_prefix, and has it started once?): %w", name, err)
	}
	return fmt.Errorf("%s: %w", name, err)
}
