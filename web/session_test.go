package web_test

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/syncbuf"
	"github.com/courier-gw/courier/web"
)

// linesWith returns the lines of text that hold sub.
func linesWith(text, sub string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return out
}

// sessionCookie returns the browser's session cookie.
func (b *browser) sessionCookie() *http.Cookie {
	b.t.Helper()
	u, _ := url.Parse(b.d.URL + "/ui/")
	for _, c := range b.client.Jar.Cookies(u) {
		if c.Name == "courier_session" {
			return c
		}
	}
	b.t.Fatal("no session cookie")
	return nil
}

// withCookie returns another browser holding a copy of the cookie.
func (d *dashboard) withCookie(t *testing.T, c *http.Cookie) *browser {
	other := d.browser(t)
	u, _ := url.Parse(d.URL + "/ui/")
	other.client.Jar.SetCookies(u, []*http.Cookie{{Name: c.Name, Value: c.Value, Path: "/ui/"}})
	return other
}

// TestSessionKeepsTheKeyOnTheServer: the cookie is a random id, not the
// key in any encoding, and a cookie that holds a valid key is no session.
func TestSessionKeepsTheKeyOnTheServer(t *testing.T) {
	d := newDashboard(t, true)
	b := d.browser(t)
	b.login("ops")
	c := b.sessionCookie()
	secret := secrets["ops"]
	for _, enc := range []string{secret, base64.RawURLEncoding.EncodeToString([]byte(secret)),
		base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret)} {
		if strings.Contains(c.Value, enc) {
			t.Errorf("the session cookie %q holds the key (%q)", c.Value, enc)
		}
	}
	if raw, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil || len(raw) < 32 {
		t.Errorf("the session cookie %q is not a random id of 256 bits or more", c.Value)
	}
	// A cookie made as the dashboard once made them, with a valid key in
	// it, opens nothing.
	forged := d.withCookie(t, &http.Cookie{Name: "courier_session", Value: "bm9uY2U." + b64(secret)})
	if a := forged.get("/ui/"); a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, "/ui/login") {
		t.Errorf("a cookie holding the key: %d %q, want the login page", a.status, a.location)
	}
}

// TestLogoutRevokes: a copy of the cookie works while the session lasts and
// not after the logout; another session of the same key goes on.
func TestLogoutRevokes(t *testing.T) {
	d := newDashboard(t, true)
	d.suspendedWithHistory(t, "s1", []byte(`{}`), "application/json", nil, "HTTP 400", "")
	b := d.browser(t)
	b.login("ops")
	other := d.browser(t)
	other.login("ops")
	stolen := d.withCookie(t, b.sessionCookie())
	if a := stolen.get("/ui/"); a.status != http.StatusOK {
		t.Fatalf("a copy of the cookie before the logout: %d", a.status)
	}
	token := stolen.csrf("/ui/messages/s1")

	if a := b.post("/ui/logout", url.Values{"csrf": {b.csrf("/ui/")}}); a.status != http.StatusSeeOther {
		t.Fatalf("logout: %d", a.status)
	}
	if a := stolen.get("/ui/"); a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, "/ui/login") {
		t.Errorf("a copy of the cookie after the logout: %d %q, want the login page", a.status, a.location)
	}
	if a := stolen.post("/ui/messages/s1/resubmit", url.Values{"csrf": {token}}); a.status != http.StatusForbidden {
		t.Errorf("a form with a copy of the cookie after the logout: %d", a.status)
	}
	if got := d.state(t, "s1"); got != courier.StateSuspended {
		t.Errorf("s1 is %s, want suspended", got)
	}
	if a := other.get("/ui/"); a.status != http.StatusOK {
		t.Errorf("another session of the key after the logout: %d", a.status)
	}
}

// TestSessionExpires: a session ends after an hour unused, and after 12
// hours however busy; the browser's cookie lifetime decides neither.
func TestSessionExpires(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
	d := newDashboardWith(t, true, func(o *web.Options) { o.Clock = clock })
	for _, tt := range []struct {
		name  string
		steps []time.Duration // the pauses between pages
		ended bool            // the last page is the login page
	}{
		{"used within the hour", []time.Duration{59 * time.Minute, 59 * time.Minute}, false},
		{"unused for an hour", []time.Duration{30 * time.Minute, time.Hour}, true},
		{"busy for 11h50m", repeat(50*time.Minute, 14), false},
		{"busy for 12 hours", repeat(50*time.Minute, 15), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := d.browser(t)
			b.login("ops")
			var a answer
			for _, pause := range tt.steps {
				clock.Advance(pause)
				a = b.get("/ui/endpoints")
			}
			ended := a.status == http.StatusSeeOther && strings.HasPrefix(a.location, "/ui/login")
			if ended != tt.ended || (!ended && a.status != http.StatusOK) {
				t.Errorf("last page: %d %q; ended %v, want %v", a.status, a.location, ended, tt.ended)
			}
		})
	}
}

func repeat(d time.Duration, n int) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestLoginThrottle: after five wrong keys an address waits, longer after
// each further one, even with the right key; the log has a line per
// address per minute, not per wrong key.
func TestLoginThrottle(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC))
	logs := &syncbuf.Buffer{}
	d := newDashboardWith(t, true, func(o *web.Options) {
		o.Clock, o.Logger = clock, slog.New(slog.NewTextHandler(logs, nil))
	})
	b := d.browser(t)
	try := func(key string) answer {
		t.Helper()
		return b.post("/ui/login", url.Values{"key": {key}, "next": {"/ui/"}})
	}
	const failLine = "dashboard logins with keys that are not valid"
	for i := range 5 {
		if a := try("guess"); a.status != http.StatusUnauthorized {
			t.Fatalf("wrong key %d: %d", i+1, a.status)
		}
	}
	if n := len(linesWith(logs.String(), failLine)); n != 1 {
		t.Errorf("%d log lines for five wrong keys in a minute, want 1:\n%s", n, strings.Join(linesWith(logs.String(), failLine), "\n"))
	}
	a := try(secrets["ops"])
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "60" || a.header.Get("Set-Cookie") != "" ||
		!strings.Contains(a.body, "Try again in 1m0s") {
		t.Fatalf("the right key after five wrong ones: %d, Retry-After %q, cookie %q", a.status, a.header.Get("Retry-After"), a.header.Get("Set-Cookie"))
	}

	clock.Advance(61 * time.Second)
	if a := try("guess"); a.status != http.StatusUnauthorized {
		t.Fatalf("a wrong key after the wait: %d", a.status)
	}
	lines := linesWith(logs.String(), failLine)
	if len(lines) != 2 || !strings.Contains(lines[1], "failures=5") || !strings.Contains(lines[1], "refused_while_waiting=1") {
		t.Errorf("log lines after a minute, want a second one counting 5 wrong keys and 1 refused:\n%s", strings.Join(lines, "\n"))
	}
	// The sixth wrong key doubles the wait.
	if a := try(secrets["ops"]); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "120" {
		t.Fatalf("the right key after six wrong ones: %d, Retry-After %q", a.status, a.header.Get("Retry-After"))
	}
	clock.Advance(2 * time.Minute)
	b.login("ops")
	// A valid key starts the count anew.
	if a := try("guess"); a.status != http.StatusUnauthorized {
		t.Fatalf("a wrong key after a login: %d", a.status)
	}
	b.login("ops")
}

// TestPublicURLOrigin: behind a proxy that sends its own Host, forms from
// pages of the public URL are accepted; others are refused with the origin
// expected.
func TestPublicURLOrigin(t *testing.T) {
	const public = "https://courier.example.org"
	d := newDashboardWith(t, true, func(o *web.Options) { o.PublicURL = public + "/" })
	d.suspendedWithHistory(t, "s1", []byte(`{}`), "application/json", nil, "HTTP 400", "")
	b := d.browser(t)
	b.origin = public
	b.login("ops")
	token := b.csrf("/ui/messages/s1")
	for i, tt := range []struct {
		origin string
		status int
	}{
		{"https://evil.example", http.StatusForbidden},
		{"http://courier.example.org", http.StatusForbidden},
		{"https://courier.example.org:443", http.StatusSeeOther},
		{public, http.StatusSeeOther},
	} {
		b.origin = tt.origin
		id := fmt.Sprintf("p-%d", i)
		d.suspendedWithHistory(t, id, []byte(`{}`), "application/json", nil, "HTTP 400", "")
		a := b.post("/ui/messages/"+id+"/discard", url.Values{"csrf": {token}})
		if a.status != tt.status {
			t.Errorf("a form from %s: %d, want %d\n%s", tt.origin, a.status, tt.status, a.body)
		}
		if tt.status == http.StatusForbidden && (!strings.Contains(a.body, "expects pages of "+public) || !strings.Contains(a.body, tt.origin)) {
			t.Errorf("the refusal of %s does not name the origin expected: %s", tt.origin, a.body)
		}
	}
	// The request's own host is still accepted.
	b.origin = d.URL
	if a := b.post("/ui/messages/s1/discard", url.Values{"csrf": {token}}); a.status != http.StatusSeeOther {
		t.Errorf("a form from the request's host: %d", a.status)
	}
}

// TestNoPublicURLNamesTheHost: without a public URL, a refusal names the
// request's own origin as the one expected.
func TestNoPublicURLNamesTheHost(t *testing.T) {
	d := newDashboard(t, true)
	b := d.browser(t)
	b.origin = "https://evil.example"
	a := b.post("/ui/login", url.Values{"key": {secrets["ops"]}})
	if a.status != http.StatusForbidden || !strings.Contains(a.body, "expects pages of "+d.URL) {
		t.Errorf("login from another origin: %d %s", a.status, a.body)
	}
}
