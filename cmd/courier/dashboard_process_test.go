package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/testenv"
)

// TestDashboardInBrowser drives the dashboard of a running courier serve in
// a real browser: an operator logs in with a key, finds a message the
// receiver rejected in the suspended queue, reads its error history,
// resubmits it once the receiver takes it, and sees it delivered. A
// screenshot of each page is kept in a temporary directory.
func TestDashboardInBrowser(t *testing.T) {
	skipIfShort(t)
	chromium := testenv.Chromium(t)
	sk := sink.MustStart(t, sink.Options{})
	sk.Script("/in", sink.Respond(http.StatusBadRequest).WithBody(`{"error":"customer 42 unknown"}`), sink.Repeat)

	const opsSecret, erpSecret = "courier_test_ops_secret", "courier_test_erp_secret"
	p := startNode(t, t.TempDir(), fmt.Sprintf(`public_url: https://courier.example.org
keys:
  ops: {role: operator, hash: "%s"}
  erp: {role: sender, hash: "%s"}
endpoints:
  acme: {transport: http, url: "%s/in"}
routes:
  acme: {endpoints: [acme]}
`, api.HashSecret(opsSecret), api.HashSecret(erpSecret), sk.URL()))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	erp, ops := api.NewClient(p.url, erpSecret), api.NewClient(p.url, opsSecret)
	if _, _, err := erp.Ingest(ctx, api.IngestRequest{ID: "inv-7", Type: "invoice", Route: "acme",
		Payload: []byte(`{"invoice":"2026-7","customer":42,"total":99.5}`)}); err != nil {
		t.Fatal(err)
	}
	deadline, _ := ctx.Deadline()
	waitForState(t, p, ops, "inv-7", "suspended", deadline)

	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()

	shots, err := os.MkdirTemp("", "courier-dashboard-")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	shot := func(name string) {
		t.Helper()
		png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		n++
		path := filepath.Join(shots, fmt.Sprintf("%02d-%s.png", n, name))
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(browser, steps...); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, p.log())
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}

	// headings are the column headings of the first table sel selects,
	// as shown.
	headings := func(sel string) string {
		t.Helper()
		got, err := chromedp.Run(browser, chromedp.Evaluate[[]string](fmt.Sprintf(
			`Array.from(document.querySelector(%q).querySelectorAll("thead th")).map(th => th.innerText.trim())`, sel)))
		if err != nil {
			t.Fatalf("headings of %s: %v", sel, err)
		}
		return strings.Join(got, " | ")
	}
	wantHeadings := func(page, sel, want string) {
		t.Helper()
		if got := headings(sel); got != want {
			t.Errorf("%s: the headings of %s read %q, want %q", page, sel, got, want)
		}
	}

	// Log in: / leads to the login page, an operator key leads in.
	do("open the dashboard", chromedp.Navigate(p.url+"/"), chromedp.WaitVisible(chromedp.ID("key")))
	shot("login")
	do("log in", chromedp.SendKeys(chromedp.ID("key"), opsSecret), chromedp.Submit(chromedp.ID("key")),
		chromedp.WaitVisible(chromedp.ID("count-suspended")))
	if who := text("header .who span"); who != "ops" {
		t.Errorf("logged in as %q, want ops", who)
	}
	if h := text("main h1"); h != "Overview" {
		t.Errorf("the overview's heading: %q", h)
	}
	if cards := strings.Join(strings.Fields(text("section.cards")), " "); !strings.Contains(cards, "suspended") || !strings.Contains(cards, "queued") {
		t.Errorf("the overview's counts read %q", cards)
	}
	shot("overview")

	// The suspended queue lists the message; its page has the history.
	do("open the suspended queue", chromedp.Click(chromedp.CSS(`nav a[href="/ui/suspended"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/messages/inv-7"]`)))
	wantHeadings("suspended queue", "main table", " | Message | Type | Route | Endpoint | Reason | Attempts | Suspended | Last error")
	if row := strings.Join(strings.Fields(text("tbody tr")), " "); !strings.HasPrefix(row, "inv-7 invoice acme acme rejected 1 ") ||
		!strings.Contains(row, "HTTP 400") {
		t.Errorf("suspended queue row %q: want the message, its type, route, endpoint, reason, attempts and error", row)
	}
	shot("suspended")
	do("open the message", chromedp.Click(chromedp.CSS(`a[href="/ui/messages/inv-7"]`)),
		chromedp.WaitVisible(chromedp.ID("resubmit")), chromedp.Click(chromedp.CSS("table.attempts details summary")),
		chromedp.WaitVisible(chromedp.CSS("table.attempts details pre")))
	if s := text("#message-state"); s != "suspended" {
		t.Errorf("message state %q, want suspended", s)
	}
	wantHeadings("message", "table.attempts", "# | Started | Endpoint | Duration | Outcome | Class | Status | Error and response")
	if h := text("table.attempts tbody"); !strings.Contains(h, "http_4xx") || !strings.Contains(h, "400") || !strings.Contains(h, "failed") {
		t.Errorf("attempt history %q: want the failed attempt with class http_4xx and status 400", h)
	}
	if r := text("table.attempts details pre"); !strings.Contains(r, "customer 42 unknown") {
		t.Errorf("response excerpt %q", r)
	}
	if pl := text("pre.payload"); !strings.Contains(pl, `"total": 99.5`) {
		t.Errorf("payload preview %q: want it indented", pl)
	}
	shot("message-suspended")

	// The receiver is fixed: resubmit, and the message is delivered.
	sk.Script("/in", sink.Respond(http.StatusNoContent), sink.Repeat)
	do("resubmit", chromedp.Click(chromedp.ID("resubmit")), chromedp.WaitVisible(chromedp.CSS("p.note")))
	shot("resubmitted")
	for {
		if s := text("#message-state"); s == "delivered" {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the resubmitted message was not delivered\n%s", p.log())
		}
		time.Sleep(100 * time.Millisecond)
		do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("message-state")))
	}
	if h := text("table.attempts tbody"); !strings.Contains(h, "delivered") || !strings.Contains(h, "http_4xx") {
		t.Errorf("history after the resubmit %q: want both attempts", h)
	}
	// The counts agree with the history, and a delivered message shows
	// no last error.
	if a := text("#attempts"); a != "2 in all, 1 since it was resubmitted or resent" {
		t.Errorf("attempts of the delivered message: %q", a)
	}
	if facts := text("dl.facts"); strings.Contains(facts, "Last error") || strings.Contains(facts, "customer 42 unknown") {
		t.Errorf("the delivered message shows a last error: %q", facts)
	}
	if actions := text("main ul"); !strings.Contains(actions, "resubmit by ops") {
		t.Errorf("operator actions %q: want the resubmit by ops", actions)
	}
	shot("message-delivered")
	if got := sk.Count("/in"); got != 2 || sk.StatusCount(http.StatusNoContent) != 1 {
		t.Errorf("the receiver got %d requests (%d answered 204), want 2 and 1", got, sk.StatusCount(http.StatusNoContent))
	}

	do("open the endpoints", chromedp.Click(chromedp.CSS(`nav a[href="/ui/endpoints"]`)), chromedp.WaitVisible(chromedp.CSS("#ep-acme")))
	wantHeadings("endpoints", "main table", "Endpoint | Transport | State | Suspended until | In flight | Limit | Queued | Last hour | ")
	if row := text("#ep-acme"); !strings.Contains(row, "active") || !strings.Contains(row, "delivered 1") {
		t.Errorf("endpoint row %q: want active with one delivery in the last hour", row)
	}
	shot("endpoints")

	// Behind a proxy that sends its own Host, a login from a page of
	// public_url is taken; another origin is refused and told the one
	// expected. The cookie holds a session id, not the key, and the logout
	// ends the session wherever the cookie was copied.
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(c *http.Client, path, origin string, form url.Values) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, p.url+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", origin)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	if resp, body := post(hc, "/ui/login", "https://evil.example", url.Values{"key": {opsSecret}}); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "expects pages of https://courier.example.org") {
		t.Errorf("login from another origin: %d %s", resp.StatusCode, body)
	}
	resp, body := post(hc, "/ui/login", "https://courier.example.org", url.Values{"key": {opsSecret}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login from a page of public_url: %d %s", resp.StatusCode, body)
	}
	cookie := resp.Header.Get("Set-Cookie")
	if strings.Contains(cookie, opsSecret) || strings.Contains(cookie, base64.RawURLEncoding.EncodeToString([]byte(opsSecret))) ||
		!strings.Contains(cookie, "SameSite=Lax") {
		t.Errorf("session cookie %q: want a session id, not the key, and SameSite=Lax", cookie)
	}
	page := func(c *http.Client) *http.Response {
		t.Helper()
		resp, err := c.Get(p.url + "/ui/endpoints")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	copied, _ := cookiejar.New(nil)
	base, _ := url.Parse(p.url + "/ui/")
	copied.SetCookies(base, jar.Cookies(base))
	thief := &http.Client{Jar: copied, CheckRedirect: hc.CheckRedirect}
	if resp := page(thief); resp.StatusCode != http.StatusOK {
		t.Fatalf("a copy of the cookie before the logout: %d", resp.StatusCode)
	}
	resp, err = hc.Get(p.url + "/ui/endpoints")
	if err != nil {
		t.Fatal(err)
	}
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(html)
	if m == nil {
		t.Fatalf("no form token on the endpoints page: %s", html)
	}
	if resp, body := post(hc, "/ui/logout", "https://courier.example.org", url.Values{"csrf": {string(m[1])}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d %s", resp.StatusCode, body)
	}
	if resp := page(thief); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/ui/login") {
		t.Errorf("a copy of the cookie after the logout: %d %q, want the login page", resp.StatusCode, resp.Header.Get("Location"))
	}
}
