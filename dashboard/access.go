package dashboard

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Access says who may use the dashboard (and pprof, on the same listener):
// docs/security.md, "The dashboard".
//
//   - The Host header must name the dashboard: a loopback name or address,
//     the external URL's host, or one of the allowed hosts. A page on
//     another site that rebinds its DNS name to 127.0.0.1 sends its own name
//     and is refused.
//   - A loopback client needs no token while no proxy is configured (no
//     external URL): behind a proxy or a sidecar every client connects from
//     loopback.
//   - Anyone else presents the token in an Authorization: Bearer header or
//     in the cookie /ui/login sets; never in the URL, where it would land in
//     logs and browser history.
//
// Every response carries frame protection, a content security policy and
// no referrer.
type Access struct {
	Token string
	// Hosts are the host names served besides loopback ones.
	Hosts []string
	// TrustLoopback lets loopback clients in without the token.
	TrustLoopback bool
	// SecureCookie marks the login cookie Secure (an https external URL).
	SecureCookie bool
	// Now is the clock the login limiter reads (nil: time.Now).
	Now func() time.Time
}

// NewAccess is the access of a dashboard reached at externalURL (empty: on
// loopback only) and the extra allowed hosts.
func NewAccess(token, externalURL string, allowedHosts []string) (Access, error) {
	a := Access{Token: token, TrustLoopback: externalURL == ""}
	for _, h := range allowedHosts {
		a.Hosts = append(a.Hosts, strings.ToLower(strings.TrimSpace(h)))
	}
	if externalURL != "" {
		u, err := url.Parse(externalURL)
		if err != nil || u.Hostname() == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return Access{}, fmt.Errorf("dashboard.external_url: %q is not an http(s) URL", externalURL)
		}
		a.Hosts = append(a.Hosts, strings.ToLower(u.Hostname()))
		a.SecureCookie = u.Scheme == "https"
	}
	return a, nil
}

// cookieName is the login cookie.
const cookieName = "lkscore-ui"

// headers are set on every response the guard lets through or refuses.
func securityHeaders(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; media-src 'self'; "+
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

// NewGuard is a's guard: build one per process and wrap every guarded
// path with it (the dashboard, pprof, case export), so that they share one
// login limiter: a client that presented wrong tokens waits before its
// next one is compared, wherever it presents it (issue 66: each path had
// a budget of its own).
func (a Access) NewGuard() *Guard {
	now := a.Now
	if now == nil {
		now = time.Now
	}
	return &Guard{Access: a, limiter: newLoginLimiter(now), tokenSum: sha256.Sum256([]byte(a.Token))}
}

// Wrap serves next only to who may see it; /ui/login is served to any
// client with an allowed Host.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	a := g.Access
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		securityHeaders(w.Header())
		if !a.hostAllowed(r.Host) {
			http.Error(w, fmt.Sprintf("Host %q is not this dashboard's: set dashboard.external_url or dashboard.allowed_hosts", r.Host),
				http.StatusMisdirectedRequest)
			return
		}
		if r.URL.Query().Has("token") {
			http.Error(w, "the token is not taken from the URL: send Authorization: Bearer <token>, or log in at /ui/login",
				http.StatusBadRequest)
			return
		}
		if strings.TrimSuffix(r.URL.Path, "/") == "/ui/login" {
			g.login(w, r)
			return
		}
		switch ok, wait := g.allowed(r); {
		case wait > 0:
			tooSoon(w, wait)
		case !ok:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.WriteHeader(http.StatusForbidden)
			_, _ = fmt.Fprint(w, `<!doctype html><title>lkscore</title><p>The dashboard needs its token (dashboard.token): `+
				`<a href="/ui/login">log in</a>, or send <code>Authorization: Bearer &lt;token&gt;</code>.`)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// Guard is an Access at work: its one login limiter and its token's
// digest.
type Guard struct {
	Access
	limiter  *loginLimiter
	tokenSum [sha256.Size]byte
}

// check compares a presented token with the dashboard's, unless the client
// must wait first (wait > 0). Both sides are hashed first, so the compare
// takes the same time whatever the token's length or content.
func (g *Guard) check(r *http.Request, tok string) (ok bool, wait time.Duration) {
	key := clientKey(r)
	if d := g.limiter.wait(key); d > 0 {
		return false, d
	}
	got := sha256.Sum256([]byte(tok))
	ok = g.Token != "" && subtle.ConstantTimeCompare(got[:], g.tokenSum[:]) == 1
	g.limiter.result(key, ok)
	return ok, 0
}

// hostAllowed: a loopback name or address, or one configured.
func (a Access) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, h := range a.Hosts {
		if h == host {
			return true
		}
	}
	return false
}

func (g *Guard) allowed(r *http.Request) (bool, time.Duration) {
	if g.TrustLoopback {
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
			if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
				return true, 0
			}
		}
	}
	if g.Token == "" {
		return false, 0
	}
	got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if got == "" {
		if c, err := r.Cookie(cookieName); err == nil {
			got = c.Value
		}
	}
	if got == "" {
		return false, 0
	}
	return g.check(r, got)
}

var loginPage = template.Must(template.New("login").Parse(`<!doctype html><meta charset="utf-8"><title>lkscore: log in</title>
<form method="post" action="/ui/login"><p>{{.}}</p><label>Dashboard token <input type="password" name="token" autofocus></label>
<button>Log in</button></form>`))

// maxLoginBody bounds a login form.
const maxLoginBody = 4 << 10

// login shows the token form (GET) and, given the right token (POST), sets
// the cookie that lets the browser in (HttpOnly, SameSite=Strict, for 12 h).
func (g *Guard) login(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		_ = loginPage.Execute(w, "")
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
		tok := r.PostFormValue("token")
		ok, wait := false, time.Duration(0)
		if tok != "" {
			ok, wait = g.check(r, tok)
		}
		if wait > 0 {
			tooSoon(w, wait)
			return
		}
		if !ok {
			w.WriteHeader(http.StatusForbidden)
			_ = loginPage.Execute(w, "That is not the dashboard's token.")
			return
		}
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: g.Token, Path: "/", HttpOnly: true, Secure: g.SecureCookie,
			SameSite: http.SameSiteStrictMode, MaxAge: int((12 * time.Hour).Seconds())})
		http.Redirect(w, r, "/ui", http.StatusSeeOther)
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "use GET or POST", http.StatusMethodNotAllowed)
	}
}
