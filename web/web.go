// Package web is courier's dashboard: server-rendered pages under /ui/ for
// operators (the overview, endpoints, the suspended queue, one message with
// its history, bulk operations and their progress, the topology, the audit
// log and the tenants' use), with its templates and assets embedded. A
// session acts in one tenant: a tenant's key in its own, the system's in
// the one it switches to (docs/design.md §20). It needs no
// JavaScript; a few lines of it only add "select all" and confirmations.
//
// The dashboard does nothing of its own to messages, endpoints and the
// topology: every page reads, and every form acts, through the HTTP API
// handler in the same process, with the operator's API key. So the API's
// rules hold here exactly: roles, validation, conditional changes, and the
// record of who did what.
//
// An operator logs in with an API key, which the server keeps in a session
// in memory; the browser gets only the session's random id, in an HttpOnly,
// SameSite=Lax cookie (Secure over HTTPS and on loopback). A session ends
// at logout, after an hour unused and after 12 hours in any case. Every
// form carries the session's own token, and every POST must come from a
// page of the dashboard's origin (or of its public URL). Wrong keys at the
// login make their address wait. Without API keys configured (courier then
// listens on loopback only) there is no login, as for the API.
package web

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

//go:embed templates static
var files embed.FS

// Authenticator tells who holds an API key: api.Server is one.
type Authenticator interface {
	// KeysRequired reports whether callers need a key at all.
	KeysRequired() bool
	// Identify returns the name and role of the key with this secret, or an
	// error with courier.CodeUnauthenticated.
	Identify(secret string) (name string, role courier.Role, err error)
}

// Options configure a Handler. API and Auth are required.
type Options struct {
	// API is the HTTP API's handler; the dashboard calls it in process.
	API http.Handler
	// Auth checks the keys operators log in with.
	Auth Authenticator
	// PublicURL, if set, is where people reach courier (public_url): forms
	// posted from pages of its origin are accepted even when a proxy in
	// front sends another Host.
	PublicURL string
	Clock     courier.Clock
	Logger    *slog.Logger
}

// Handler serves the dashboard under /ui/, and redirects / there.
type Handler struct {
	api    http.Handler
	auth   Authenticator
	clock  courier.Clock
	logger *slog.Logger
	mux    *http.ServeMux
	pages  map[string]*template.Template
	// publicOrigin is the origin of Options.PublicURL; empty without one.
	publicOrigin string
	sessions     sessionStore
	throttle     loginThrottle
	// bulkErrs holds, by operation id, why a bulk operation started here
	// was refused ("" while it runs), until the operation is recorded.
	bulkErrs sync.Map
}

// New returns the dashboard for the options.
func New(o Options) *Handler {
	h := &Handler{api: o.API, auth: o.Auth, clock: o.Clock, logger: o.Logger, mux: http.NewServeMux()}
	if u, err := url.Parse(o.PublicURL); err == nil && u.Scheme != "" && u.Host != "" {
		h.publicOrigin = originOf(u)
	}
	h.clock = courier.ClockOrSystem(h.clock)
	h.logger = courier.LoggerOrDiscard(h.logger)
	h.pages = parsePages()
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err)
	}
	staticFiles := http.StripPrefix("/ui/static/", http.FileServerFS(static))

	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	h.mux.Handle("GET /ui/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		staticFiles.ServeHTTP(w, r)
	}))
	h.mux.HandleFunc("GET /ui/login", h.loginPage)
	h.mux.HandleFunc("POST /ui/login", h.login)
	for _, rt := range []struct {
		pattern string
		handler func(w http.ResponseWriter, r *http.Request, s *session)
	}{
		{"POST /ui/logout", h.logout},
		{"POST /ui/tenant", h.switchTenant},
		{"GET /ui/tenants", h.tenantsPage},
		{"GET /ui/{$}", h.overview},
		{"GET /ui/endpoints", h.endpoints},
		{"GET /ui/types", h.types},
		{"POST /ui/endpoints/{name}/{verb}", h.switchEndpoint},
		{"POST /ui/receivers/{name}/{verb}", h.switchReceiver},
		{"GET /ui/suspended", h.suspended},
		{"POST /ui/suspended", h.suspendedAction},
		{"POST /ui/replay", h.replay},
		{"GET /ui/messages", h.messages},
		{"GET /ui/messages/{id}", h.message},
		{"GET /ui/messages/{id}/payload", h.payload},
		{"POST /ui/messages/{id}/{verb}", h.messageAction},
		{"GET /ui/operations/{id}", h.operation},
		{"GET /ui/topology", h.topologyPage},
		{"GET /ui/topology/new/{kind}", h.newObjectPage},
		{"POST /ui/topology/new/{kind}", h.createObject},
		{"GET /ui/topology/{kind}/{name}", h.objectPage},
		{"POST /ui/topology/{kind}/{name}", h.saveObject},
		{"POST /ui/topology/{kind}/{name}/delete", h.deleteObject},
		{"GET /ui/audit", h.audit},
		{"GET /ui/events", h.events},
		{"/ui/", h.notFound},
	} {
		h.mux.Handle(rt.pattern, h.withSession(rt.handler))
	}
	return h
}

// ServeHTTP serves a dashboard request, with the headers that keep its pages
// from being framed, sniffed or scripted from elsewhere.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// page is what every template gets: the layout's parts and the page's data.
type page struct {
	Title string
	Bare  bool   // without the navigation (the login page)
	Nav   string // the tab to mark
	Who   string // the key's name; empty without keys
	// Tenant is the tenant the session acts in, shown where there are
	// tenants; Tenants, those it may switch to (none for a tenant's key).
	Tenant  string
	Tenants []string
	CSRF    string
	Note    string // a message about what was just done
	Error   string
	Now     time.Time
	// Refresh, if not 0, reloads the page after that many seconds (the
	// progress of a bulk operation, without JavaScript).
	Refresh int
	Data    any
}

// render writes a page with a status.
func (h *Handler) render(w http.ResponseWriter, status int, name string, p page) {
	t := h.pages[name]
	if t == nil {
		panic("web: no template " + name)
	}
	if p.Now.IsZero() {
		p.Now = h.clock.Now()
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		h.logger.Error("dashboard page failed", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write([]byte(b.String()))
}

// fail shows an error from the API as a page with the status the API
// answers its code with; a key that is no longer valid sends the operator
// to the login.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, s *session, err error) {
	msg := "internal error"
	var ce *courier.Error
	if errors.As(err, &ce) {
		msg = ce.Message
		switch ce.Code {
		case courier.CodeUnauthenticated:
			h.sessions.end(s.id)
			clearCookie(w, r)
			http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
			return
		case courier.CodeUnavailable:
			if ce.Err != nil {
				msg = fmt.Sprintf("%s: %v", ce.Message, ce.Err)
			}
		}
	}
	status := api.StatusOf(err)
	if status == http.StatusInternalServerError {
		h.logger.Error("dashboard request failed", "path", r.URL.Path, "err", err)
	}
	p := s.page(http.StatusText(status), "")
	p.Error = msg
	h.render(w, status, "error.html", p)
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request, s *session) {
	h.fail(w, r, s, courier.Errorf(courier.CodeNotFound, "there is no page at %s", r.URL.Path))
}
