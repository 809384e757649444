package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/livekit/protocol/livekit"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/urfave/cli/v3"

	"github.com/lkscore/lkscore/config"
	"github.com/lkscore/lkscore/internal/sdkclient"
	"github.com/lkscore/lkscore/store"
	"github.com/lkscore/lkscore/wire"
)

// tokenLeeway is the clock difference a token survives: the go-jose
// verification livekit/protocol's auth uses allows one minute.
const tokenLeeway = time.Minute

// check is one of doctor's findings.
type check struct {
	name, status, detail string // status: ok, warn, FAIL
}

func doctorCommand(getenv func(string) string, stdout io.Writer) *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check a running deployment: config, keys, NATS and streams, the store, the last webhook, clock skew, a signed test webhook",
		Description: "Prints one line per check and what to set when it fails. Exit codes: 0 nothing wrong, 1 something wrong,\n" +
			"2 bad usage or config.",
		Flags: append(toolFlags(),
			&cli.StringFlag{Name: "url", Usage: "the ingest's base URL, for the test webhook (default: http://127.0.0.1<listen>)"},
			&cli.StringFlag{Name: "ops-url", Usage: "the ops listener's base URL, for /readyz and the clock (default: http://127.0.0.1<ops_listen>)"},
			&cli.BoolFlag{Name: "no-test-webhook", Usage: "do not send the signed test webhook (it is stored and ignored by the pipeline)"},
		),
		Action: func(ctx context.Context, c *cli.Command) error {
			checks := doctor(ctx, c, getenv)
			failed := 0
			for _, ch := range checks {
				fmt.Fprintf(stdout, "%-5s %-16s %s\n", ch.status, ch.name, ch.detail)
				if ch.status == "FAIL" {
					failed++
				}
			}
			if failed > 0 {
				return exitError{code: 1, err: fmt.Errorf("doctor: %d of %d checks failed", failed, len(checks))}
			}
			return nil
		},
	}
}

// baseURL is a listen address (":8080", "0.0.0.0:8080", "[::]:8080",
// "host:8080") as a URL a client on this host can reach.
func baseURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}

func doctor(ctx context.Context, c *cli.Command, getenv func(string) string) []check {
	var out []check
	add := func(name, status, format string, args ...any) {
		out = append(out, check{name, status, fmt.Sprintf(format, args...)})
	}
	js, subj, cfg, closeFn, err := toolNATS(c, getenv)
	var ee exitError
	if errors.As(err, &ee) && ee.code == 2 {
		add("config", "FAIL", "%v", err)
		return out
	}
	add("config", "ok", "role %s, data_dir %s", cfg.Role, cfg.DataDir)

	if len(cfg.LiveKit.Keys) == 0 {
		add("keys", "FAIL", "no LiveKit keys: set LIVEKIT_API_KEY and LIVEKIT_API_SECRET, or livekit.keys_file (LKSCORE_KEYS_FILE), "+
			"to the key your LiveKit server "+
			"or project signs webhooks with")
	} else {
		add("keys", "ok", "%d LiveKit key(s)", len(cfg.LiveKit.Keys))
	}

	webhooks := time.Time{}
	if err != nil {
		add("nats", "FAIL", "%v: set nats.url (LKSCORE_NATS_URL, --nats-url) to the NATS lkscore serve uses", err)
	} else {
		defer closeFn()
		nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		missing := []string{}
		for _, name := range []string{subj.WebhookStream(), subj.UploadStream(), subj.SessionStream(), subj.ResultStream(), subj.DLQStream()} {
			if _, err := js.Stream(nctx, name); err != nil {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			add("nats", "FAIL", "connected, but streams %s are missing: start lkscore serve against this NATS once (it creates them)",
				strings.Join(missing, ", "))
		} else {
			add("nats", "ok", "connected; lkscore's streams exist")
			if s, err := js.Stream(nctx, subj.WebhookStream()); err == nil {
				if info, err := s.Info(nctx); err == nil && info.State.Msgs > 0 {
					webhooks = info.State.LastTime
				}
			}
			if webhooks.IsZero() {
				add("webhooks", "FAIL", "no LiveKit webhook was ever stored: point LiveKit's webhook URL at %s/webhook, signed with one "+
					"of the keys above (lkscore logs each refused one at warn)", ingestURL(c, cfg))
			} else {
				add("webhooks", "ok", "last webhook stored %s ago", time.Since(webhooks).Round(time.Second))
			}
		}
		cancel()
	}

	out = append(out, storeCheck(ctx, cfg, daemonStore(ctx, js, subj)))
	out = append(out, clockCheck(ctx, c, cfg))
	if !c.Bool("no-test-webhook") && len(cfg.LiveKit.Keys) > 0 {
		out = append(out, testWebhook(ctx, c, cfg))
	}
	return out
}

func ingestURL(c *cli.Command, cfg config.Config) string {
	if u := c.String("url"); u != "" {
		return strings.TrimRight(u, "/")
	}
	return baseURL(cfg.Listen)
}

// daemonStore is the identity of the store the daemon's newest upload
// went to ("" when unknown: no NATS, or no upload yet).
func daemonStore(ctx context.Context, js jetstream.JetStream, subj wire.Subjects) string {
	if js == nil {
		return ""
	}
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := js.Stream(nctx, subj.UploadStream())
	if err != nil {
		return ""
	}
	m, err := st.GetLastMsgForSubject(nctx, subj.UploadStored())
	if err != nil {
		return ""
	}
	var notice struct {
		Store string `json:"store"`
	}
	_ = json.Unmarshal(m.Data, &notice)
	return notice.Store
}

// storeCheck writes, reads back and deletes a probe object in the
// recording store the config names, and checks it is the daemon's (the
// store its newest upload went to, daemon; "" when unknown). It creates
// no local store: a data dir without one is not the daemon's.
func storeCheck(ctx context.Context, cfg config.Config, daemon string) check {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cfg.S3.Bucket == "" {
		root := filepath.Join(cfg.DataDir, "recordings")
		if _, err := os.Stat(root); err != nil {
			return check{"store", "FAIL", fmt.Sprintf("no local recording store at %s: run doctor with the daemon's --data-dir or --config "+
				"(doctor creates none)", root)}
		}
	}
	st, err := store.Open(sctx, cfg)
	if err != nil {
		return check{"store", "FAIL", fmt.Sprintf("%v: set s3.* (or data_dir for the local store)", err)}
	}
	dir := fmt.Sprintf("lkscore-doctor/%d/", time.Now().UnixNano())
	up, err := st.Begin(sctx, dir)
	if err == nil {
		_, err = up.Write(sctx, "probe", strings.NewReader("lkscore doctor"), 64)
		if err == nil {
			err = up.Commit(sctx)
		} else {
			_ = up.Abort(sctx)
		}
	}
	if err != nil {
		return check{"store", "FAIL", fmt.Sprintf("not writable at %s: %v", st.Location(""), err)}
	}
	defer func() { _ = st.Delete(context.WithoutCancel(sctx), dir+"probe") }()
	rc, err := st.Open(sctx, dir+"probe", 64)
	if err == nil {
		_ = rc.Close()
	}
	if err != nil {
		return check{"store", "FAIL", fmt.Sprintf("written but not readable at %s: %v", st.Location(""), err)}
	}
	switch {
	case daemon != "" && daemon != st.Identity():
		return check{"store", "FAIL", fmt.Sprintf("%s works, but it is not the daemon's store: its newest upload went to %s "+
			"(run doctor with the daemon's --data-dir or --config)", st.Location(""), daemon)}
	case daemon == "":
		return check{"store", "ok", "wrote, read and deleted a probe at " + st.Location(dir) +
			" (no upload yet to tell whether it is the daemon's store)"}
	}
	return check{"store", "ok", "wrote, read and deleted a probe at " + st.Location(dir) + ", the store the daemon's uploads go to"}
}

// clockCheck compares this host's clock with the daemon's (its HTTP Date)
// and asks /readyz.
func clockCheck(ctx context.Context, c *cli.Command, cfg config.Config) check {
	ops := c.String("ops-url")
	if ops == "" {
		ops = baseURL(cfg.OpsListen)
	}
	hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(hctx, http.MethodGet, strings.TrimRight(ops, "/")+"/readyz", nil)
	sent := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return check{"daemon", "FAIL", fmt.Sprintf("ops listener %s unreachable: %v (set --ops-url, or ops_listen)", ops, err)}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	at, derr := http.ParseTime(resp.Header.Get("Date"))
	skew := sent.Add(time.Since(sent) / 2).Sub(at)
	switch {
	case derr != nil:
		return check{"clock", "warn", "the daemon's answer has no Date header to compare clocks with"}
	case skew > tokenLeeway-time.Second || skew < -tokenLeeway+time.Second:
		return check{"clock", "FAIL", fmt.Sprintf("this host's clock and the daemon's differ by %s, more than the %s tokens allow: "+
			"run NTP on both (and on LiveKit's hosts)", skew.Round(time.Second), tokenLeeway)}
	case resp.StatusCode != http.StatusOK:
		return check{"daemon", "FAIL", fmt.Sprintf("/readyz answers %d: %s", resp.StatusCode, bytes.TrimSpace(body))}
	}
	return check{"daemon", "ok", fmt.Sprintf("ready; clocks within %s", skew.Abs().Round(time.Second))}
}

// testWebhook posts a signed room_started webhook as LiveKit would, for
// room wire.ProbeRoomSID: the ingest verifies it and answers 200, and
// neither stores nor counts it as LiveKit's traffic.
func testWebhook(ctx context.Context, c *cli.Command, cfg config.Config) check {
	key, secret, err := signingKey(cfg, "")
	if err != nil {
		return check{"test webhook", "FAIL", err.Error()}
	}
	url := ingestURL(c, cfg)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ev := &livekit.WebhookEvent{Event: "room_started", Id: fmt.Sprintf("EV_lkscore_doctor_%d", time.Now().UnixNano()),
		CreatedAt: time.Now().Unix(), Room: &livekit.Room{Sid: wire.ProbeRoomSID, Name: "lkscore-doctor"}}
	if err := sdkclient.New(url, key, secret).Webhook(wctx, ev); err != nil {
		return check{"test webhook", "FAIL", fmt.Sprintf("%s/webhook refused a webhook signed with key %s: %v", url, key, err)}
	}
	return check{"test webhook", "ok",
		fmt.Sprintf("%s/webhook accepted a room_started signed with key %s (a probe: never stored, not counted as LiveKit's traffic)", url, key)}
}
