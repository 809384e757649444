package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/lkscore/lkscore/wire"
)

// Webhook formats.
const (
	FormatSlack = "slack"
	FormatJSON  = "json"
)

// HeaderIdempotencyKey names the alert state a webhook POST carries (the
// alert id and its status), so a receiver can drop the rare repeat: a
// delivery that succeeded but whose acknowledgement was lost is sent again.
const HeaderIdempotencyKey = "Idempotency-Key"

// Webhook posts alerts to a generic webhook.
type Webhook struct {
	name, url, format string
	client            *http.Client
	externalURL       string
}

// NewWebhook builds a webhook target; format is FormatSlack or FormatJSON.
func NewWebhook(name, u, format string, client *http.Client, externalURL string) *Webhook {
	return &Webhook{name: name, url: u, format: format, client: client, externalURL: strings.TrimSuffix(externalURL, "/")}
}

// Name is the target as logs and metrics name it (its configured name).
func (w *Webhook) Name() string { return w.name }

// Send posts one alert. raw is the alert message as published on NATS,
// sent as is in the json format.
func (w *Webhook) Send(ctx context.Context, al wire.Alert, raw []byte) error {
	body := raw
	if w.format != FormatJSON {
		var err error
		if body, err = json.Marshal(SlackMessage(al, w.externalURL)); err != nil {
			return &Error{Target: w.name, Err: err}
		}
	}
	h := http.Header{}
	h.Set(HeaderIdempotencyKey, al.ID+"#"+al.Status)
	return post(ctx, w.client, w.name, w.url, "application/json", body, h)
}

// Slack is a Slack incoming-webhook body: text for notifications and
// clients without blocks, blocks for the message itself.
type Slack struct {
	Text   string       `json:"text"`
	Blocks []slackBlock `json:"blocks,omitempty"`
}

type slackBlock struct {
	Type string     `json:"type"`
	Text *slackText `json:"text,omitempty"`
}

type slackText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// SlackMessage renders an alert for a chat channel.
func SlackMessage(al wire.Alert, ext string) Slack {
	head := "FIRING"
	icon := ":rotating_light:"
	if al.Status == wire.AlertResolved {
		head, icon = "RESOLVED", ":white_check_mark:"
	}
	text := fmt.Sprintf("%s [%s] %s", icon, head, Summary(al))
	detail := Description(al)
	if ws := worst(al, 3); len(ws) > 0 {
		var links []string
		for _, s := range ws {
			if ext != "" {
				links = append(links, "<"+sessionPage(ext, s)+"|"+s+">")
			} else {
				links = append(links, "`"+s+"`")
			}
		}
		label := "Worst sessions"
		if al.Kind == "threshold" {
			label = "Sessions that hit it"
		}
		detail += "\n" + label + ": " + strings.Join(links, ", ")
	}
	if ext != "" {
		detail += "\n<" + alertsPage(ext, al) + "|Open in the lkscore dashboard>"
	}
	return Slack{Text: text, Blocks: []slackBlock{
		{Type: "section", Text: &slackText{Type: "mrkdwn", Text: "*" + text + "*"}},
		{Type: "section", Text: &slackText{Type: "mrkdwn", Text: detail}},
	}}
}
