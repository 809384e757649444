package scoring

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/lkscore/lkscore/session"
)

// Pricing is the team's price table (scoring.pricing): what each provider
// and model costs per unit, from a date on, in one currency.
type Pricing struct {
	Currency string  `yaml:"currency" json:"currency"`
	Prices   []Price `yaml:"prices" json:"prices"`
}

// Price is one row: a provider and model's unit prices from Effective on
// (a later row of the same model prices the calls after its date). Every
// price is per one unit: a token, a character, a second.
type Price struct {
	Provider string `yaml:"provider" json:"provider"`
	Model    string `yaml:"model" json:"model"`
	// Effective is the first day (UTC, YYYY-MM-DD) the row prices; empty:
	// from the beginning.
	Effective        string  `yaml:"effective" json:"effective,omitempty"`
	InputToken       float64 `yaml:"input_token" json:"input_token,omitempty"`
	CachedInputToken float64 `yaml:"cached_input_token" json:"cached_input_token,omitempty"`
	OutputToken      float64 `yaml:"output_token" json:"output_token,omitempty"`
	AudioInputToken  float64 `yaml:"audio_input_token" json:"audio_input_token,omitempty"`
	AudioOutputToken float64 `yaml:"audio_output_token" json:"audio_output_token,omitempty"`
	Character        float64 `yaml:"character" json:"character,omitempty"`
	AudioSecond      float64 `yaml:"audio_second" json:"audio_second,omitempty"`
	SessionSecond    float64 `yaml:"session_second" json:"session_second,omitempty"`
	RequestPrice     float64 `yaml:"request" json:"request,omitempty"`
}

// validate checks the table: a currency, each row's provider,
// model, date and prices, and no two rows of one model from one date.
func (p *Pricing) validate() error {
	if p == nil {
		return nil
	}
	var errs []error
	add := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	if p.Currency == "" {
		add("scoring.pricing.currency: name the table's currency (e.g. USD)")
	}
	seen := map[string]bool{}
	for i, r := range p.Prices {
		key := fmt.Sprintf("scoring.pricing.prices[%d]", i)
		if r.Provider == "" || r.Model == "" {
			add("%s: provider and model are required", key)
		}
		if r.Effective != "" {
			if !isDate(r.Effective) {
				add("%s.effective: %q is not a date (YYYY-MM-DD)", key, r.Effective)
			}
		}
		for name, v := range map[string]float64{"input_token": r.InputToken, "cached_input_token": r.CachedInputToken,
			"output_token": r.OutputToken, "audio_input_token": r.AudioInputToken, "audio_output_token": r.AudioOutputToken,
			"character": r.Character, "audio_second": r.AudioSecond, "session_second": r.SessionSecond, "request": r.RequestPrice} {
			if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
				add("%s.%s: must be a finite price >= 0, got %v", key, name, v)
			}
		}
		id := r.Provider + "/" + r.Model + "@" + r.Effective
		if seen[id] {
			add("%s: a second row for %s/%s from %q", key, r.Provider, r.Model, r.Effective)
		}
		seen[id] = true
	}
	return errors.Join(errs...)
}

// row is the row that prices provider/model for a call at t (Unix seconds;
// 0: unknown, the latest row then): the latest whose date is not after it.
func (p *Pricing) row(provider, model string, t float64) (Price, bool) {
	var best Price
	found := false
	day := ""
	if t > 0 {
		day = dateOf(int64(math.Floor(t)))
	}
	for _, r := range p.Prices {
		if r.Provider != provider || r.Model != model || (day != "" && r.Effective > day) {
			continue
		}
		if !found || r.Effective >= best.Effective {
			best, found = r, true
		}
	}
	return best, found
}

// costOf prices a session's usage at its time t (Unix seconds, 0 unknown)
// over durationS seconds of call; nil without a table or a report.
func (p *Pricing) costOf(u *session.Usage, t, durationS float64) *session.Cost {
	if p == nil || u == nil || !u.Reported {
		return nil
	}
	c := &session.Cost{Currency: p.Currency, Rows: []session.CostRow{}}
	for _, m := range u.Models {
		r, ok := p.row(m.Provider, m.Model, t)
		if !ok {
			name := m.Provider + "/" + m.Model
			if !slices.Contains(c.Unpriced, name) {
				c.Unpriced = append(c.Unpriced, name)
			}
			continue
		}
		uncachedIn := m.InputTokens.V - m.InputCachedTokens.V - m.InputAudioTokens.V + m.InputCachedAudioTokens.V
		amount := float64(max(uncachedIn, 0))*r.InputToken + float64(m.InputCachedTokens.V)*r.CachedInputToken +
			float64(m.InputAudioTokens.V-m.InputCachedAudioTokens.V)*r.AudioInputToken +
			float64(m.OutputTokens.V-m.OutputAudioTokens.V)*r.OutputToken + float64(m.OutputAudioTokens.V)*r.AudioOutputToken +
			float64(m.CharactersCount.V)*r.Character + m.AudioDurationS.V*r.AudioSecond + m.SessionDurationS.V*r.SessionSecond +
			float64(m.TotalRequests.V)*r.RequestPrice
		c.Rows = append(c.Rows, session.CostRow{Provider: r.Provider, Model: r.Model, Effective: r.Effective, Amount: money(amount)})
		c.Total += amount
	}
	c.Total = money(c.Total)
	if durationS > 0 {
		c.PerMinute = some(money(c.Total / (durationS / 60)))
	}
	return c
}

// money rounds an amount to a millionth of the currency's unit: the card's
// bytes do not depend on the order the amounts were added in.
func money(v float64) float64 { return math.Round(v*1e6) / 1e6 }

// callTime is when a session took place, in Unix seconds: its first chat
// item's, else its first span's; 0 when neither says.
func callTime(s Session) float64 {
	for _, it := range s.Items {
		if it.CreatedAt > 0 {
			return it.CreatedAt
		}
	}
	for _, sp := range s.Spans {
		if sp.Start > 0 {
			return sp.Start
		}
	}
	return 0
}

// dateOf is the UTC date (YYYY-MM-DD) of a Unix time, by the proleptic
// Gregorian calendar (Howard Hinnant's days_from_civil, inverted): scoring
// reads no clock and needs no time zone data.
func dateOf(unix int64) string {
	z := unix/86400 + 719468
	if unix < 0 && unix%86400 != 0 {
		z--
	}
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y := yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d := doy - (153*mp+2)/5 + 1
	m := mp + 3
	if m > 12 {
		m -= 12
		y++
	}
	return fmt.Sprintf("%04d-%02d-%02d", y, m, d)
}

// isDate reports whether s is a real calendar date written YYYY-MM-DD.
func isDate(s string) bool {
	if len(s) != 10 || s[4] != '-' || s[7] != '-' {
		return false
	}
	y, e1 := strconv.Atoi(s[:4])
	m, e2 := strconv.Atoi(s[5:7])
	d, e3 := strconv.Atoi(s[8:])
	if e1 != nil || e2 != nil || e3 != nil || m < 1 || m > 12 || d < 1 || d > 31 {
		return false
	}
	// The date round-trips through its day number only when it exists.
	return dateOf(daysFromCivil(y, m, d)*86400) == s
}

// daysFromCivil is the day number (days since 1970-01-01) of a date.
func daysFromCivil(y, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := int64(y - era*400)
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return int64(era)*146097 + doe - 719468
}
