package web_test

import (
	"context"
	"encoding/base64"
	httptransport "github.com/courier-gw/courier/transport/http"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/sqlite"
	"github.com/courier-gw/courier/web"
)

var secrets = map[string]string{"ops": "secret-of-ops", "erp": "secret-of-erp", "root": "secret-of-root"}

func keys(t *testing.T) []api.Key {
	t.Helper()
	mk := func(name string, role courier.Role) api.Key {
		h, err := api.ParseKeyHash(api.HashSecret(secrets[name]))
		if err != nil {
			t.Fatal(err)
		}
		return api.Key{Name: name, Role: role, Hash: h}
	}
	return []api.Key{mk("ops", courier.RoleOperator), mk("erp", courier.RoleSender), mk("root", courier.RoleAdmin)}
}

// dashboard is the API and the dashboard on a real loopback server, mounted
// as courier serve mounts them, over a real store.
type dashboard struct {
	*httptest.Server
	store *sqlite.Store
}

func testTopology() *courier.Topology {
	acme := courier.NewEndpoint("acme", courier.TransportHTTP)
	httptransport.Of(acme).URL = "https://acme.example/in"
	globex := courier.NewEndpoint("globex", courier.TransportHTTP)
	httptransport.Of(globex).URL = "https://globex.example/in"
	return &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"acme": acme, "globex": globex},
		Routes: map[string]*courier.Route{
			"acme":   {Name: "acme", Endpoints: []string{"acme"}, Strategy: courier.StrategySingle},
			"globex": {Name: "globex", Endpoints: []string{"globex"}, Strategy: courier.StrategySingle},
		},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
}

func newDashboard(t *testing.T, withKeys bool, mutate ...func(*api.Options)) *dashboard {
	t.Helper()
	return newDashboardWith(t, withKeys, nil, mutate...)
}

// newDashboardWith is newDashboard with the dashboard's options changed by
// webOpts.
func newDashboardWith(t *testing.T, withKeys bool, webOpts func(*web.Options), mutate ...func(*api.Options)) *dashboard {
	t.Helper()
	store := sqlitetest.Open(t)
	o := api.Options{Store: store, Topology: testTopology(), Bulk: engine.NewBulk(store, nil, nil, nil, nil)}
	if withKeys {
		o.Keys = keys(t)
	}
	for _, f := range mutate {
		f(&o)
	}
	a := api.NewServer(o)
	wo := web.Options{API: a, Auth: a}
	if webOpts != nil {
		webOpts(&wo)
	}
	ui := web.New(wo)
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)
	mux.Handle("GET /{$}", ui)
	mux.Handle("/", a)
	d := &dashboard{Server: httptest.NewServer(mux), store: store}
	t.Cleanup(d.Close)
	return d
}

// browser is an HTTP client with cookies that does not follow redirects
// and sends the Origin a browser sends with its forms.
type browser struct {
	t      *testing.T
	d      *dashboard
	client *http.Client
	origin string
}

func (d *dashboard) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, d: d, origin: d.URL, client: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type answer struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (b *browser) get(path string) answer {
	b.t.Helper()
	return b.do(http.MethodGet, path, nil)
}

func (b *browser) post(path string, form url.Values) answer {
	b.t.Helper()
	return b.do(http.MethodPost, path, form)
}

func (b *browser) do(method, path string, form url.Values) answer {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.d.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if b.origin != "" {
			req.Header.Set("Origin", b.origin)
		}
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, body: string(data), location: resp.Header.Get("Location"), header: resp.Header}
}

// login logs in with the named key and fails the test if it cannot.
func (b *browser) login(key string) {
	b.t.Helper()
	a := b.post("/ui/login", url.Values{"key": {secrets[key]}, "next": {"/ui/"}})
	if a.status != http.StatusSeeOther || a.location != "/ui/" {
		b.t.Fatalf("login as %s: %d %q %s", key, a.status, a.location, a.body)
	}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the form token of a page.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	a := b.get(path)
	m := csrfRE.FindStringSubmatch(a.body)
	if m == nil {
		b.t.Fatalf("no form token on %s (%d): %s", path, a.status, a.body)
	}
	return m[1]
}

// suspendedWithHistory stores a message that was tried once, failed with
// the error and response given, and is suspended.
func (d *dashboard) suspendedWithHistory(t *testing.T, id string, payload []byte, contentType string, headers map[string]string, errText, response string) {
	t.Helper()
	d.suspend(t, &courier.Message{ID: id, Type: "invoice", Route: "acme", Payload: payload, ContentType: contentType, Headers: headers},
		errText, response)
}

// suspend stores a new message, which is tried once, fails with the error
// and response given, and is suspended.
func (d *dashboard) suspend(t *testing.T, m *courier.Message, errText, response string) {
	t.Helper()
	ctx := context.Background()
	now := time.Now()
	id := m.ID
	courier.Accept(m, courier.DefaultPolicy(), false, now.Add(-time.Minute))
	if _, err := d.store.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	claimed, err := d.store.ClaimDue(ctx, courier.Claim{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "test",
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 100}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claimed {
		if c.ID != id {
			continue
		}
		next := *c
		next.State, next.Reason, next.LastError, next.LastClass, next.Endpoint = courier.StateSuspended, courier.ReasonRejected, errText, courier.ClassHTTP4xx, "acme"
		next.Attempts++
		next.FinishedAt, next.LeaseUntil, next.LeaseOwner, next.NextAttemptAt = now, time.Time{}, "", time.Time{}
		applied, err := d.store.Apply(ctx, []courier.Change{{Message: &next, From: courier.StateInflight, Token: c.TotalAttempts,
			Attempt: &courier.Attempt{MessageID: id, N: c.TotalAttempts, Endpoint: "acme", Route: "acme", StartedAt: now,
				Duration: 42 * time.Millisecond, Outcome: courier.OutcomeFailed, Class: courier.ClassHTTP4xx, Status: 400,
				Error: errText, Response: response}}})
		if err != nil || !applied[0] {
			t.Fatalf("suspend %s: %v %v", id, applied, err)
		}
		return
	}
	t.Fatalf("%s was not claimed", id)
}

func (d *dashboard) state(t *testing.T, id string) courier.State {
	t.Helper()
	m, err := d.store.Message(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return m.State
}

func TestLoginRequired(t *testing.T) {
	d := newDashboard(t, true)
	b := d.browser(t)
	if a := b.get("/"); a.status != http.StatusSeeOther || a.location != "/ui/" {
		t.Errorf("GET /: %d %q, want a redirect to /ui/", a.status, a.location)
	}
	for _, path := range []string{"/ui/", "/ui/endpoints", "/ui/suspended", "/ui/messages/x"} {
		a := b.get(path)
		if a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, "/ui/login?next=") {
			t.Errorf("GET %s without a login: %d %q, want the login page", path, a.status, a.location)
		}
	}
	if a := b.get("/ui/login"); a.status != 200 || !strings.Contains(a.body, `type="password"`) {
		t.Errorf("login page: %d", a.status)
	}
	// The API still wants its bearer token: the dashboard's pages are no way around it.
	if a := b.get("/v1/messages"); a.status != http.StatusUnauthorized {
		t.Errorf("API without a key: %d", a.status)
	}
}

func TestLogin(t *testing.T) {
	d := newDashboard(t, true)
	b := d.browser(t)
	if a := b.post("/ui/login", url.Values{"key": {"not-a-key"}}); a.status != http.StatusUnauthorized || a.header.Get("Set-Cookie") != "" {
		t.Errorf("a wrong key: %d, cookie %q", a.status, a.header.Get("Set-Cookie"))
	}
	if a := b.post("/ui/login", url.Values{"key": {secrets["erp"]}}); a.status != http.StatusForbidden ||
		a.header.Get("Set-Cookie") != "" || !strings.Contains(a.body, "sender key") {
		t.Errorf("a sender key: %d, cookie %q", a.status, a.header.Get("Set-Cookie"))
	}
	a := b.post("/ui/login", url.Values{"key": {secrets["ops"]}, "next": {"/ui/endpoints"}})
	if a.status != http.StatusSeeOther || a.location != "/ui/endpoints" {
		t.Fatalf("operator login: %d %q", a.status, a.location)
	}
	cookie := a.header.Get("Set-Cookie")
	// Lax, so that a link in a notice mail opens the page logged in.
	for _, want := range []string{"courier_session=", "Path=/ui/", "HttpOnly", "SameSite=Lax", "Secure"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("session cookie %q lacks %s", cookie, want)
		}
	}
	if a := b.get("/ui/"); a.status != 200 || !strings.Contains(a.body, "ops") {
		t.Errorf("overview after login: %d", a.status)
	}
	// A redirect after login stays in the dashboard.
	for _, next := range []string{"https://evil.example/", "//evil.example/ui/", "/v1/messages", "/ui/\r\nX: y"} {
		if a := b.post("/ui/login", url.Values{"key": {secrets["ops"]}, "next": {next}}); a.location != "/ui/" {
			t.Errorf("login with next=%q went to %q", next, a.location)
		}
	}
	csrf := b.csrf("/ui/")
	if a := b.post("/ui/logout", url.Values{"csrf": {csrf}}); a.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", a.status)
	}
	if a := b.get("/ui/"); a.status != http.StatusSeeOther {
		t.Errorf("after logout: %d, want the login page", a.status)
	}
}

// TestCSRF: a POST acts only with the session's form token and from the
// dashboard's origin.
func TestCSRF(t *testing.T) {
	d := newDashboard(t, true)
	d.suspendedWithHistory(t, "s1", []byte(`{"a":1}`), "application/json", nil, "HTTP 400", "")
	b := d.browser(t)
	b.login("ops")
	token := b.csrf("/ui/messages/s1")

	other := d.browser(t)
	other.login("ops")
	otherToken := other.csrf("/ui/messages/s1")
	if otherToken == token {
		t.Fatal("two sessions of the same key have the same form token")
	}

	for _, tt := range []struct {
		name   string
		origin string
		form   url.Values
	}{
		{"no token", b.d.URL, url.Values{}},
		{"wrong token", b.d.URL, url.Values{"csrf": {"forged"}}},
		{"another session's token", b.d.URL, url.Values{"csrf": {otherToken}}},
		{"another origin", "https://evil.example", url.Values{"csrf": {token}}},
		{"no origin or referer", "", url.Values{"csrf": {token}}},
	} {
		b.origin = tt.origin
		a := b.post("/ui/messages/s1/resubmit", tt.form)
		if a.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, a.status)
		}
		if got := d.state(t, "s1"); got != courier.StateSuspended {
			t.Fatalf("%s: the message is %s, want it left suspended", tt.name, got)
		}
	}
	// A login form from another site is refused too.
	b.origin = "https://evil.example"
	if a := b.post("/ui/login", url.Values{"key": {secrets["ops"]}}); a.status != http.StatusForbidden {
		t.Errorf("login from another origin: %d", a.status)
	}

	b.origin = b.d.URL
	a := b.post("/ui/messages/s1/resubmit", url.Values{"csrf": {token}})
	if a.status != http.StatusSeeOther || a.location != "/ui/messages/s1?note=resubmitted" {
		t.Fatalf("resubmit with the token: %d %q %s", a.status, a.location, a.body)
	}
	if got := d.state(t, "s1"); got != courier.StateQueued {
		t.Errorf("after the resubmit: %s, want queued", got)
	}
	// A Referer of the dashboard will do where a browser sends no Origin.
	d.suspendedWithHistory(t, "s2", []byte(`{}`), "application/json", nil, "HTTP 400", "")
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/ui/messages/s2/discard", strings.NewReader(url.Values{"csrf": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Referer", d.URL+"/ui/messages/s2")
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || d.state(t, "s2") != courier.StateDiscarded {
		t.Errorf("discard with a same-origin Referer: %d, %s", resp.StatusCode, d.state(t, "s2"))
	}
	// The action was recorded with the operator's key.
	m, err := d.store.Actions(context.Background(), "s1")
	if err != nil || len(m) != 1 || m[0].Who != "ops" {
		t.Errorf("actions on s1: %+v %v", m, err)
	}
}

// TestSenderKeyCannotOperate: a sender key gets no session, and a cookie
// made with its secret (as the dashboard once made them) is no session
// either: it resubmits nothing.
func TestSenderKeyCannotOperate(t *testing.T) {
	d := newDashboard(t, true)
	d.suspendedWithHistory(t, "s1", []byte(`{}`), "application/json", nil, "HTTP 400", "")
	b := d.browser(t)
	if a := b.post("/ui/login", url.Values{"key": {secrets["erp"]}}); a.status != http.StatusForbidden {
		t.Fatalf("sender login: %d", a.status)
	}
	u, _ := url.Parse(d.URL + "/ui/")
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "courier_session", Value: "bm9uY2U." + b64(secrets["erp"]), Path: "/ui/"}})
	for _, path := range []string{"/ui/", "/ui/suspended", "/ui/messages/s1"} {
		if a := b.get(path); a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, "/ui/login") {
			t.Errorf("GET %s with a forged cookie: %d %q, want the login page", path, a.status, a.location)
		}
	}
	for _, path := range []string{"/ui/messages/s1/resubmit", "/ui/messages/s1/discard"} {
		if a := b.post(path, url.Values{"csrf": {"forged"}}); a.status != http.StatusForbidden {
			t.Errorf("POST %s with a forged cookie: %d", path, a.status)
		}
	}
	a := b.post("/ui/suspended", url.Values{"csrf": {"forged"}, "action": {"resubmit"}, "id": {"s1"}})
	if a.status != http.StatusForbidden {
		t.Errorf("bulk resubmit with a forged cookie: %d", a.status)
	}
	if got := d.state(t, "s1"); got != courier.StateSuspended {
		t.Errorf("the message is %s after a sender's attempts, want suspended", got)
	}
}

// TestNoKeys: without API keys (loopback only) there is no login, and the
// forms still need their token.
func TestNoKeys(t *testing.T) {
	d := newDashboard(t, false)
	d.suspendedWithHistory(t, "s1", []byte(`{}`), "application/json", nil, "HTTP 400", "")
	b := d.browser(t)
	if a := b.get("/ui/"); a.status != 200 {
		t.Fatalf("overview without keys: %d", a.status)
	}
	if a := b.get("/ui/login"); a.status != http.StatusSeeOther {
		t.Errorf("login page without keys: %d, want a redirect to the overview", a.status)
	}
	if a := b.post("/ui/messages/s1/resubmit", url.Values{}); a.status != http.StatusForbidden {
		t.Errorf("POST without the token: %d", a.status)
	}
	token := b.csrf("/ui/messages/s1")
	if a := b.post("/ui/messages/s1/resubmit", url.Values{"csrf": {token}}); a.status != http.StatusSeeOther {
		t.Errorf("POST with the token: %d %s", a.status, a.body)
	}
	acts, _ := d.store.Actions(context.Background(), "s1")
	if len(acts) != 1 || acts[0].Who != "local" {
		t.Errorf("actions: %+v", acts)
	}
	// A page asked for by another host name (a name rebound to loopback)
	// gets no keyless session.
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/ui/", nil)
	req.Host = "rebound.example:8425"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("another host name without keys: %d, cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}

// TestEscaping: hostile payloads, headers, errors, responses, ids and
// filters are shown as text, never as markup.
func TestEscaping(t *testing.T) {
	d := newDashboard(t, true)
	const evil = `<script>alert(1)</script><img src=x onerror=alert(2)>"'`
	d.suspendedWithHistory(t, "x1", []byte(`{"note":"`+strings.ReplaceAll(evil, `"`, `\"`)+`"}`), "application/json",
		map[string]string{"X-Evil": evil}, "HTTP 400: "+evil, evil)
	d.suspendedWithHistory(t, "x2", []byte(`<a x="1">`+"&lt;script&gt;alert(3)&lt;/script&gt;"+`</a>`), "application/xml", nil, evil, "")
	d.suspendedWithHistory(t, "x3", []byte(evil), "text/html", nil, evil, "")
	b := d.browser(t)
	b.login("ops")
	q := url.Values{"type": {evil}, "route": {evil}, "endpoint": {evil}, "reason": {evil}, "after": {evil}}
	pages := []string{"/ui/messages/x1", "/ui/messages/x2", "/ui/messages/x3", "/ui/suspended",
		"/ui/suspended?" + q.Encode(), "/ui/messages?id=" + url.QueryEscape(evil), "/ui/nowhere" + url.PathEscape(evil),
		"/ui/operations/" + url.PathEscape(evil)}
	for _, path := range pages {
		a := b.get(path)
		if a.status >= 500 {
			t.Errorf("%s: %d", path, a.status)
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "onerror=alert(2)>"} {
			if strings.Contains(a.body, bad) {
				t.Errorf("%s shows %q unescaped", path, bad)
			}
		}
	}
	if a := b.get("/ui/messages/x1"); !strings.Contains(a.body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Errorf("the hostile text is not shown escaped on the message page")
	}
	if a := b.get("/ui/messages?id=" + url.QueryEscape(evil)); a.status != http.StatusOK || strings.Contains(a.body, "<script>alert") {
		t.Errorf("search for a hostile id: %d, want the empty list with the id escaped:\n%s", a.status, a.body)
	}
	if a := b.get("/ui/"); !strings.Contains(a.header.Get("Content-Security-Policy"), "script-src 'self'") ||
		a.header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("security headers: %v", a.header)
	}
}

// b64 encodes as the session cookie once held a key.
func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
