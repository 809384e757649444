package dashboard

import (
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// loginLimiter slows down guessing the dashboard token: per client address
// (an IPv6 client's /64), a few wrong tokens are free, then each one makes
// the next wait twice as long as the one before, up to loginMaxDelay. While
// a client waits, a token it presents is not even compared (429 with
// Retry-After), so waiting is the only way to try again. A right token
// clears the client's record; a record with no failure for loginForget is
// forgotten. The table holds at most loginMaxClients addresses; beyond, new
// addresses share one record, so many addresses guess no faster together
// than one would. docs/security.md, "The dashboard".
type loginLimiter struct {
	now func() time.Time

	mu        sync.Mutex
	clients   map[string]*loginRecord
	lastSweep time.Time
}

type loginRecord struct {
	failures int
	last     time.Time // the last failure
	until    time.Time // no token is compared before
}

const (
	loginFree       = 3
	loginBaseDelay  = time.Second
	loginMaxDelay   = time.Minute
	loginForget     = time.Hour
	loginMaxClients = 10_000
	loginOverflow   = "overflow"
)

func newLoginLimiter(now func() time.Time) *loginLimiter {
	return &loginLimiter{now: now, clients: map[string]*loginRecord{}}
}

// clientKey is the address a request's limits count against: its IP, or
// its /64 for IPv6.
func clientKey(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return host
	}
	if ip.To4() == nil {
		return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
	}
	return ip.String()
}

// wait is how long the client must still wait before a token it presents
// is compared (0: now).
func (l *loginLimiter) wait(key string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	rec := l.record(key, false)
	if rec == nil {
		return 0
	}
	return max(rec.until.Sub(l.now()), 0)
}

// result records a compared token: right clears the client's record, wrong
// adds a failure and sets its wait.
func (l *loginLimiter) result(key string, right bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if right {
		delete(l.clients, key)
		return
	}
	rec := l.record(key, true)
	now := l.now()
	rec.failures++
	rec.last = now
	if n := rec.failures - loginFree; n > 0 {
		d := loginMaxDelay
		if n <= 7 { // 2^6 s > loginMaxDelay
			d = min(loginBaseDelay<<(n-1), loginMaxDelay)
		}
		rec.until = now.Add(d)
	}
}

// record is key's record (nil when it has none and create is false),
// forgetting stale ones; beyond loginMaxClients a new key gets the shared
// overflow record.
func (l *loginLimiter) record(key string, create bool) *loginRecord {
	now := l.now()
	if rec, ok := l.clients[key]; ok {
		if now.Sub(rec.last) > loginForget && !now.Before(rec.until) {
			delete(l.clients, key)
		} else {
			return rec
		}
	}
	if len(l.clients) >= loginMaxClients && now.Sub(l.lastSweep) > time.Minute {
		l.lastSweep = now
		for k, rec := range l.clients {
			if now.Sub(rec.last) > loginForget && !now.Before(rec.until) {
				delete(l.clients, k)
			}
		}
	}
	if len(l.clients) >= loginMaxClients {
		key = loginOverflow
		if rec, ok := l.clients[key]; ok || !create {
			return rec
		}
	}
	if !create {
		return nil
	}
	rec := &loginRecord{}
	l.clients[key] = rec
	return rec
}

// tooSoon answers a client that must wait.
func tooSoon(w http.ResponseWriter, d time.Duration) {
	secs := int((d + time.Second - 1) / time.Second)
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	http.Error(w, "too many wrong tokens from this address: try again in "+strconv.Itoa(secs)+" s", http.StatusTooManyRequests)
}
