package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/lkscore/lkscore/config"
)

// StartEmbedded starts an in-process NATS server with JetStream on loopback,
// storing under dataDir/nats, and waits up to ready for it to accept
// connections. Clients must present token (EmbeddedToken). Shut it down
// with Shutdown + WaitForShutdown.
func StartEmbedded(dataDir string, port int, ready time.Duration, token string) (*server.Server, error) {
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

// Connect dials NATS with reconnects forever, logging connection changes.
func Connect(url string, n config.NATS, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("lkscore"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(500 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err == nil {
				return // our own close or drain
			}
			log.Warn("nats disconnected", "err", err)
		}),
		nats.ReconnectHandler(func(c *nats.Conn) {
			log.Info("nats reconnected", "url", c.ConnectedUrlRedacted())
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
		return nil, fmt.Errorf("connect nats: %w", err)
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
