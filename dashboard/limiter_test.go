package dashboard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

const strongToken = "dash-token-0123456789"

func guarded(clock *fakeClock) http.Handler {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return Access{Token: strongToken, Now: clock.now}.NewGuard().Wrap(ok)
}

func postLogin(h http.Handler, remote, token string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/ui/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.RemoteAddr, req.Host = remote, "localhost:9090"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// TestLoginGuessingTakesMinutes: 1,000 wrong tokens from one address, sent
// by a client that waits exactly as long as each 429's Retry-After says,
// take hours of the clock; while it waits, the right token from the same
// address is not even compared, and from another address it logs in at
// once.
func TestLoginGuessingTakesMinutes(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	h := guarded(clock)
	start, compared := clock.now(), 0
	for compared < 1000 {
		switch rec := postLogin(h, "198.51.100.7:40000", fmt.Sprintf("guess-%06d-Xy", compared)); rec.Code {
		case http.StatusForbidden:
			compared++
		case http.StatusTooManyRequests:
			secs, err := strconv.Atoi(rec.Header().Get("Retry-After"))
			if err != nil || secs < 1 {
				t.Fatalf("429 with Retry-After %q", rec.Header().Get("Retry-After"))
			}
			if compared >= 999 { // waiting now: the right token from here is refused unread
				if r := postLogin(h, "198.51.100.7:40001", strongToken); r.Code != http.StatusTooManyRequests {
					t.Fatalf("the right token while waiting: %d, want 429", r.Code)
				}
			}
			clock.add(time.Duration(secs) * time.Second)
		default:
			t.Fatalf("wrong token: %d", rec.Code)
		}
	}
	if took := clock.now().Sub(start); took < 10*time.Minute {
		t.Fatalf("1,000 wrong tokens took %s of the clock, want at least minutes", took)
	} else {
		t.Logf("1,000 wrong tokens took %s", took)
	}
	// Another address, the right token: logged in at once.
	rec := postLogin(h, "203.0.113.9:5000", strongToken)
	if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Set-Cookie"), cookieName+"=") {
		t.Fatalf("the right token from another address: %d %v", rec.Code, rec.Header())
	}
	// A wrong Bearer header counts too, and a right one clears the record.
	bearer := func(remote, tok string) int {
		return get(h, remote, "/ui", map[string]string{"Authorization": "Bearer " + tok}).Code
	}
	for range loginFree {
		if c := bearer("192.0.2.1:1", "nope-nope-nope-nope"); c != http.StatusForbidden {
			t.Fatalf("a wrong bearer token: %d", c)
		}
	}
	if c := bearer("192.0.2.1:1", "nope-nope-nope-nope"); c != http.StatusForbidden {
		t.Fatalf("the fourth wrong bearer token: %d", c)
	}
	if c := bearer("192.0.2.1:1", strongToken); c != http.StatusTooManyRequests {
		t.Fatalf("the right bearer token while waiting: %d, want 429", c)
	}
	clock.add(loginBaseDelay)
	if c := bearer("192.0.2.1:1", strongToken); c != http.StatusOK {
		t.Fatalf("the right bearer token after the wait: %d", c)
	}
	// One IPv6 /64 is one client.
	for i := range loginFree + 1 {
		postLogin(h, fmt.Sprintf("[2001:db8:1:2::%x]:1", i+1), "nope-nope-nope-nope")
	}
	if c := postLogin(h, "[2001:db8:1:2::ffff]:1", strongToken).Code; c != http.StatusTooManyRequests {
		t.Fatalf("another address of the same /64: %d, want 429", c)
	}
}

// TestLoginLimiterBounded: the table never holds more than loginMaxClients
// addresses (and the shared overflow record); beyond, new addresses share
// that record's wait, and records with no failure for an hour go.
func TestLoginLimiterBounded(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	l := newLoginLimiter(clock.now)
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }
	for i := range loginMaxClients + 500 {
		l.result(addr(i), false)
	}
	if n := len(l.clients); n > loginMaxClients+1 {
		t.Fatalf("%d records", n)
	}
	for range loginFree {
		l.result(addr(loginMaxClients+900), false)
	}
	if l.wait(addr(loginMaxClients+901)) == 0 {
		t.Fatal("a new address beyond the table does not share the overflow record's wait")
	}
	clock.add(loginForget + 2*time.Minute)
	l.result("192.0.2.200", false)
	if n := len(l.clients); n > 2 {
		t.Fatalf("%d records after an hour without failures", n)
	}
}
