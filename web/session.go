package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// cookieName is the dashboard's session cookie. It holds only the random
// id of a session kept by the server, never an API key.
const cookieName = "courier_session"

// maxForm bounds the body of a dashboard form.
const maxForm = 1 << 20

// sessionAge is how long a login lasts at most, however busy.
const sessionAge = 12 * time.Hour

// sessionIdle ends a login not used for this long: a browser left open
// somewhere does not stay logged in for the whole sessionAge.
const sessionIdle = time.Hour

// maxSessions bounds the sessions kept. Without keys every browser (or
// script) that asks for a page without a cookie gets one; past the bound
// the least recently used goes.
const maxSessions = 10000

// session is who makes a dashboard request, as its session says.
type session struct {
	id     string
	who    string // the key's name; empty without keys
	role   courier.Role
	secret string // the key's secret, sent to the API as the bearer token
	csrf   string // the token every form of this session carries
	// tenant is the tenant the session acts in (tenantOf); tenants are
	// those the key may see, with their use (GET /v1/tenants).
	tenant  string
	tenants []api.TenantView
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return b
}

func randomToken() string { return base64.RawURLEncoding.EncodeToString(randomBytes(32)) }

// sessionStore keeps the dashboard's logins in memory, by a random 256-bit
// id, which is all the cookie carries: the key never leaves the server, a
// copied cookie reveals nothing and ends with the logout, and a restart
// logs everyone out. Sessions belong to one node: with several nodes
// behind a load balancer, the balancer keeps an operator on one node
// (sticky sessions), or the operator logs in on each.
type sessionStore struct {
	mu   sync.Mutex
	byID map[string]*storedSession
}

type storedSession struct {
	secret string // empty for a session made without keys
	csrf   string
	start  time.Time
	used   time.Time
}

func (st *storedSession) expired(now time.Time) bool {
	return now.Sub(st.start) >= sessionAge || now.Sub(st.used) >= sessionIdle
}

// create starts a session for a key's secret and returns its id.
func (ss *sessionStore) create(secret string, now time.Time) (id string, st storedSession) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.byID == nil {
		ss.byID = map[string]*storedSession{}
	}
	if len(ss.byID) >= maxSessions {
		ss.sweep(now)
	}
	if len(ss.byID) >= maxSessions {
		var oldest string
		for id, s := range ss.byID {
			if oldest == "" || s.used.Before(ss.byID[oldest].used) {
				oldest = id
			}
		}
		delete(ss.byID, oldest)
	}
	id = randomToken()
	s := &storedSession{secret: secret, csrf: randomToken(), start: now, used: now}
	ss.byID[id] = s
	return id, *s
}

// sweep forgets the sessions that have ended.
func (ss *sessionStore) sweep(now time.Time) {
	for id, s := range ss.byID {
		if s.expired(now) {
			delete(ss.byID, id)
		}
	}
}

// get returns a session that has not ended, and marks it used.
func (ss *sessionStore) get(id string, now time.Time) (storedSession, bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[id]
	if !ok {
		return storedSession{}, false
	}
	if s.expired(now) {
		delete(ss.byID, id)
		return storedSession{}, false
	}
	s.used = now
	return *s, true
}

// end forgets a session: its cookie, wherever it is, is worth nothing.
func (ss *sessionStore) end(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, id)
}

// startSession makes a session for a key's secret and gives its cookie.
func (h *Handler) startSession(w http.ResponseWriter, r *http.Request, secret string) storedSession {
	id, st := h.sessions.create(secret, h.clock.Now())
	// SameSite=Lax, not Strict: a link from elsewhere (a notice mail) opens
	// the page logged in. Lax sends the cookie with no cross-site POST, and
	// every POST needs this origin and the session's form token besides.
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/ui/", MaxAge: int(sessionAge.Seconds()), HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: secureCookie(r),
	})
	return st
}

func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: secureCookie(r)})
}

// secureCookie reports whether the cookie may be marked Secure: the request
// came over HTTPS (here or at a proxy in front), or to a loopback address,
// which browsers treat as secure. Over plain HTTP elsewhere a Secure cookie
// would never come back.
func secureCookie(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" || api.LoopbackHost(r)
}

// withSession runs a page with the request's session. Without keys
// configured every request has one (made on the first visit); with keys, a
// request without a valid login goes to the login page. A POST must come
// from a page of the dashboard: same origin and the session's form token.
func (h *Handler) withSession(fn func(w http.ResponseWriter, r *http.Request, s *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.auth.KeysRequired() && !api.LoopbackHost(r) {
			// Without keys courier listens on loopback only: a request that
			// names another host came through a name that resolves to it
			// (DNS rebinding) or a proxy, and gets no keyless session.
			h.refuse(w, http.StatusForbidden, "Without API keys the dashboard answers only at a loopback address, such as 127.0.0.1 or localhost.")
			return
		}
		s, ok := h.session(r)
		if !ok && !h.auth.KeysRequired() && r.Method == http.MethodGet {
			st := h.startSession(w, r, "")
			s, ok = &session{role: courier.RoleAdmin, csrf: st.csrf}, true
		}
		if !ok {
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			h.refuse(w, http.StatusForbidden, "Your session has ended. Log in again and repeat what you did.")
			return
		}
		if s.role == courier.RoleSender {
			h.render(w, http.StatusForbidden, "error.html", page{Title: "Forbidden", Who: s.who, CSRF: s.csrf,
				Error: "The key " + s.who + " is a sender key; the dashboard is for operator and admin keys."})
			return
		}
		if r.Method == http.MethodPost {
			r.Body = http.MaxBytesReader(w, r.Body, maxForm)
			if why := h.checkOrigin(r); why != "" {
				h.refuse(w, http.StatusForbidden, why)
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(s.csrf)) != 1 {
				h.refuse(w, http.StatusForbidden, "This form has expired or was not sent from this dashboard. Reload the page and try again.")
				return
			}
		}
		if err := h.enterTenant(r, s); err != nil {
			h.fail(w, r, s, err)
			return
		}
		fn(w, r, s)
	})
}

// session finds the request's session and checks that its key is still
// valid: a key removed by a reload ends the logins made with it.
func (h *Handler) session(r *http.Request) (*session, bool) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil, false
	}
	st, ok := h.sessions.get(c.Value, h.clock.Now())
	if !ok {
		return nil, false
	}
	s := &session{id: c.Value, secret: st.secret, csrf: st.csrf}
	if !h.auth.KeysRequired() {
		// A login made while keys were configured means nothing now.
		s.secret, s.role = "", courier.RoleAdmin
		return s, true
	}
	if st.secret == "" {
		return nil, false // made without keys, before keys were configured
	}
	name, role, err := h.auth.Identify(st.secret)
	if err != nil {
		return nil, false
	}
	s.who, s.role = name, role
	return s, true
}

// refuse answers a request the dashboard will not act on, saying why.
func (h *Handler) refuse(w http.ResponseWriter, status int, why string) {
	h.render(w, status, "error.html", page{Title: http.StatusText(status), Error: why})
}

// checkOrigin returns "" when a POST comes from a page of this dashboard,
// else why not. The page is named by the Origin header, or without one by
// the Referer (a browser sends one of them with every form it posts; the
// dashboard's pages ask for same-origin referrers). It must name the host
// the request was sent to, or the origin of the configured public URL (a
// proxy in front may send another Host).
func (h *Handler) checkOrigin(r *http.Request) string {
	from := r.Header.Get("Origin")
	if from == "" || from == "null" {
		from = r.Header.Get("Referer")
	}
	expected := h.publicOrigin
	if expected == "" {
		scheme := "http"
		if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
			scheme = "https"
		}
		expected = scheme + "://" + r.Host
	}
	const notHere = "This form was not sent from a page of this dashboard"
	if from == "" {
		return notHere + ": it came with neither an Origin nor a Referer header. The dashboard expects pages of " + expected + "."
	}
	u, err := url.Parse(from)
	if err != nil || u.Host == "" {
		return notHere + ": it came from " + from + ", and the dashboard expects pages of " + expected + "."
	}
	if strings.EqualFold(u.Host, r.Host) || (h.publicOrigin != "" && originOf(u) == h.publicOrigin) {
		return ""
	}
	return notHere + ": it came from " + originOf(u) + ", and the dashboard expects pages of " + expected + "."
}

// originOf returns the origin of a URL as a browser writes it: scheme and
// host in lower case, without the scheme's default port.
func originOf(u *url.URL) string {
	scheme, host := strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	if p := u.Port(); (scheme == "https" && p == "443") || (scheme == "http" && p == "80") {
		host = strings.TrimSuffix(host, ":"+p)
	}
	return scheme + "://" + host
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if !h.auth.KeysRequired() {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		return
	}
	h.render(w, http.StatusOK, "login.html", page{Title: "Log in", Bare: true, Data: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

type loginData struct {
	Next string
}

// login checks the key given and starts a session for an operator or admin
// key. The login form needs no session token; it must come from this
// origin, and a wrong key is only a failed login. An address that keeps
// giving wrong keys is made to wait (loginThrottle).
func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if why := h.checkOrigin(r); why != "" {
		h.refuse(w, http.StatusForbidden, why)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	if !h.auth.KeysRequired() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	addr := remoteAddr(r)
	now := h.clock.Now()
	if wait := h.throttle.wait(addr, now); wait > 0 {
		secs := int((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		h.render(w, http.StatusTooManyRequests, "login.html", page{Title: "Log in", Bare: true,
			Error: "Too many logins with keys that are not valid came from your address. Try again in " +
				(time.Duration(secs) * time.Second).String() + ".", Data: loginData{Next: next}})
		return
	}
	secret := strings.TrimSpace(r.PostFormValue("key"))
	name, role, err := h.auth.Identify(secret)
	if err != nil {
		if rep, due := h.throttle.fail(addr, now); due {
			args := []any{"remote", addr, "failures", rep.failures}
			if rep.refused > 0 {
				args = append(args, "refused_while_waiting", rep.refused)
			}
			if !rep.blockedUntil.IsZero() {
				args = append(args, "refused_until", rep.blockedUntil)
			}
			h.logger.Warn("dashboard logins with keys that are not valid", args...)
		}
		h.render(w, http.StatusUnauthorized, "login.html", page{Title: "Log in", Bare: true, Error: "That API key is not valid.",
			Data: loginData{Next: next}})
		return
	}
	h.throttle.succeeded(addr)
	if role == courier.RoleSender {
		h.logger.Warn("dashboard login refused to a sender key", "key", name, "remote", r.RemoteAddr)
		h.render(w, http.StatusForbidden, "login.html", page{Title: "Log in", Bare: true,
			Error: "The key " + name + " is a sender key; the dashboard is for operator and admin keys.", Data: loginData{Next: next}})
		return
	}
	h.startSession(w, r, secret)
	h.logger.Info("dashboard login", "key", name, "role", role, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request, s *session) {
	h.sessions.end(s.id)
	clearCookie(w, r)
	if s.who != "" {
		h.logger.Info("dashboard logout", "key", s.who)
	}
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// safeNext keeps a redirect after login within the dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}
