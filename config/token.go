package config

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
)

// Dashboard token strength (LKSCORE_DASHBOARD_TOKEN), checked at start-up:
// the token is the only thing between the internet and every transcript
// the dashboard holds, and /ui/login slows guessing down, it cannot make a
// guessable token safe.
const (
	MinTokenLen      = 16 // characters
	minTokenDistinct = 10 // distinct characters
	minTokenClasses  = 2  // of lower case, upper case, digits, others
	minTokenBits     = 80 // length × log2(the classes' alphabet)
)

// TokenStrength says why token is too weak to guard the dashboard, or nil.
// The estimate counts the token as if drawn at random from the classes it
// uses: a lower bound for a random token, an upper one for a chosen word.
func TokenStrength(token string) error {
	var lower, upper, digit, other bool
	distinct := map[rune]bool{}
	n := 0
	for _, r := range token {
		n++
		distinct[r] = true
		switch {
		case unicode.IsLower(r):
			lower = true
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsDigit(r):
			digit = true
		default:
			other = true
		}
	}
	alphabet, classes := 0, 0
	for _, c := range []struct {
		has  bool
		size int
	}{{lower, 26}, {upper, 26}, {digit, 10}, {other, 33}} {
		if c.has {
			alphabet += c.size
			classes++
		}
	}
	bits := float64(n) * math.Log2(float64(max(alphabet, 1)))
	var why []string
	if n < MinTokenLen {
		why = append(why, fmt.Sprintf("%d characters, at least %d needed", n, MinTokenLen))
	}
	if len(distinct) < minTokenDistinct {
		why = append(why, fmt.Sprintf("%d distinct characters, at least %d needed", len(distinct), minTokenDistinct))
	}
	if classes < minTokenClasses {
		why = append(why, fmt.Sprintf("%d character class, at least %d of lower case, upper case, digits, others needed", classes, minTokenClasses))
	}
	if bits < minTokenBits && n >= MinTokenLen {
		why = append(why, fmt.Sprintf("about %.0f bits, at least %d needed (longer, or more classes)", bits, minTokenBits))
	}
	if len(why) == 0 {
		return nil
	}
	return errors.New(strings.Join(why, "; ") + ": generate one with `openssl rand -base64 32`")
}
