package web_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/testenv"
	"github.com/courier-gw/courier/topology"
)

// pageBrowser is a real browser on the dashboard, with the reads the tests
// of its pages make: what a person reads, not the HTML.
type pageBrowser struct {
	t   *testing.T
	ctx context.Context
	url string
	// shots, when set (COURIER_TEST_SCREENSHOTS), is where a screenshot
	// of each page read is kept.
	shots string
	n     int
}

func newPageBrowser(t *testing.T, url string) *pageBrowser {
	t.Helper()
	chromium := testenv.Chromium(t)
	// Generous: screenshots of full pages take seconds each on a busy
	// machine.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	return &pageBrowser{t: t, ctx: browser, url: url, shots: os.Getenv("COURIER_TEST_SCREENSHOTS")}
}

func (b *pageBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// follow does steps that lead to another page (a click, a form) and waits
// for sel on that page: the page left is marked, so that its own sel does
// not count.
func (b *pageBrowser) follow(what, sel string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`document.documentElement.dataset.left = "1"; true`)); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
	b.do(what, append(steps, chromedp.WaitVisible(chromedp.CSS("html:not([data-left]) "+sel)))...)
	b.shot(what)
}

// open goes to a page and waits for sel on it.
func (b *pageBrowser) open(path, sel string) {
	b.t.Helper()
	b.do("open "+path, chromedp.Navigate(b.url+path), chromedp.WaitVisible(chromedp.CSS(sel)))
	b.shot(path)
}

// shot keeps a screenshot of the page, when asked to.
func (b *pageBrowser) shot(name string) {
	b.t.Helper()
	if b.shots == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot of %s: %v", name, err)
	}
	b.n++
	name = strings.Trim(strings.NewReplacer("/", "-", "?", "-", "=", "-", "&", "-").Replace(name), "-")
	if err := os.WriteFile(filepath.Join(b.shots, fmt.Sprintf("%02d-%s.png", b.n, name)), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// text is the text of the first element sel selects, as shown.
func (b *pageBrowser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.Join(strings.Fields(s), " ")
}

// value is the value of the form field sel selects, as typed.
func (b *pageBrowser) value(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Value(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("value of %s: %v", sel, err)
	}
	return s
}

// headings are the column headings of the table sel selects, as shown.
func (b *pageBrowser) headings(table string) string {
	b.t.Helper()
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](fmt.Sprintf(
		`Array.from(document.querySelectorAll(%q)).map(th => th.innerText.trim())`, table+" thead th")))
	if err != nil {
		b.t.Fatalf("headings of %s: %v", table, err)
	}
	return strings.Join(got, " | ")
}

// row is the text of the row of table sel that holds text, cell by cell;
// the test fails when no row does.
func (b *pageBrowser) row(table, text string) []string {
	b.t.Helper()
	rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[[][]string](fmt.Sprintf(
		`Array.from(document.querySelectorAll(%q)).map(tr => Array.from(tr.cells).map(td => td.innerText.trim().split(/\s+/).join(" ")))`,
		table+" tbody tr")))
	if err != nil {
		b.t.Fatalf("rows of %s: %v", table, err)
	}
	for _, r := range rows {
		if strings.Contains(strings.Join(r, " | "), text) {
			return r
		}
	}
	b.t.Fatalf("no row of %s shows %q: %q", table, text, rows)
	return nil
}

// wantHeadings fails unless the table's headings are want.
func (b *pageBrowser) wantHeadings(page, table, want string) {
	b.t.Helper()
	if got := b.headings(table); got != want {
		b.t.Errorf("%s: the headings of %s read %q, want %q", page, table, got, want)
	}
}

// wantCells fails unless the row's cells are want, "*" taking any text.
func (b *pageBrowser) wantCells(page string, row []string, want ...string) {
	b.t.Helper()
	ok := len(row) == len(want)
	for i := 0; ok && i < len(want); i++ {
		ok = want[i] == "*" || row[i] == want[i]
	}
	if !ok {
		b.t.Errorf("%s: a row reads %q, want %q", page, row, want)
	}
}

// wantText fails unless the text of sel holds every one of want.
func (b *pageBrowser) wantText(page, sel string, want ...string) string {
	b.t.Helper()
	got := b.text(sel)
	for _, w := range want {
		if !strings.Contains(got, w) {
			b.t.Errorf("%s: %s reads %q, without %q", page, sel, got, w)
		}
	}
	return got
}

// allPagesDashboard is a dashboard over a store that holds the topology,
// with bulk operations: endpoints acme and globex, routes of the same
// names, and a subscription crm-orders to order.* on globex.
func allPagesDashboard(t *testing.T) (*dashboard, *topology.Keeper) {
	t.Helper()
	store := sqlitetest.Open(t)
	d, cat := keeperDashboard(t, store, topology.Options{Keyring: testKeyring(t)},
		api.Options{Keys: keys(t), Bulk: engine.NewBulk(store, nil, nil, nil, nil)})
	mustPut(t, cat, courier.KindEndpoint, "acme", `{"transport":"http","url":"https://acme.example/in"}`)
	mustPut(t, cat, courier.KindEndpoint, "globex", `{"transport":"http","url":"https://globex.example/in"}`)
	mustPut(t, cat, courier.KindRoute, "acme", `{"endpoints":["acme"]}`)
	mustPut(t, cat, courier.KindRoute, "globex", `{"endpoints":["globex"]}`)
	mustPut(t, cat, courier.KindSubscription, "crm-orders", `{"types":["order.*"],"route":"globex"}`)
	return d, cat
}

// deliverAfterResubmit stores a message on route acme that failed once,
// was resubmitted by ops and was then delivered.
func (d *dashboard) deliverAfterResubmit(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	d.suspend(t, &courier.Message{ID: id, Type: "invoice", Route: "acme", Payload: []byte(`{}`), ContentType: "application/json"},
		"HTTP 400: unknown customer", "")
	if _, err := d.store.Resubmit(ctx, id, "", courier.Action{At: time.Now(), Who: "ops", Kind: courier.ActionResubmit, Subject: id}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claimed, err := d.store.ClaimDue(ctx, courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Minute), Owner: "test",
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 100}}})
	if err != nil || len(claimed) != 1 || claimed[0].ID != id {
		t.Fatalf("claim %s: %d, %v", id, len(claimed), err)
	}
	m := claimed[0]
	next, _ := (&courier.Topology{}).AfterAttempt(m, &courier.Endpoint{Name: "acme"}, courier.Result{Status: 204}, now, 0.5)
	if applied, err := d.store.Apply(ctx, []courier.Change{{Message: next, From: courier.StateInflight, Token: m.TotalAttempts, Prior: m,
		Attempt: &courier.Attempt{MessageID: id, N: m.TotalAttempts, Endpoint: "acme", Route: "acme", StartedAt: now,
			Duration: 12 * time.Millisecond, Outcome: courier.OutcomeDelivered, Status: 204}}}); err != nil || !applied[0] {
		t.Fatalf("deliver %s: %v %v", id, applied, err)
	}
}

// TestEveryPageReads opens every page of the dashboard in a real browser
// and reads what a person reads there: the headings of its tables and a
// row it is known to show, cell by cell, so that a page that shows a Go
// value, a column too many or the wrong text fails here, not only one
// that does not load. On the way it finds a message by the start of its
// id, follows a queued count to the messages it counts, reads that a
// message is held and by whom, and resends a delivered one.
func TestEveryPageReads(t *testing.T) {
	d, _ := allPagesDashboard(t)
	ctx := context.Background()
	root := api.NewClient(d.URL, secrets["root"])
	d.suspend(t, &courier.Message{ID: "inv-1", Type: "invoice", Route: "acme", Payload: []byte(`{"total":42}`), ContentType: "application/json"},
		"HTTP 400: the receiver refused it", `{"error":"unknown customer"}`)
	d.deliverAfterResubmit(t, "inv-2")
	for _, req := range []api.IngestRequest{
		{ID: "held-1", Type: "invoice", Route: "globex", Payload: []byte(`{"n":1}`)},
		{ID: "o-1", Type: "order.created", Payload: []byte(`{"n":2}`)},
	} {
		if _, _, err := root.Ingest(ctx, req); err != nil {
			t.Fatalf("ingest %s: %v", req.ID, err)
		}
	}
	if _, err := root.SwitchEndpoint(ctx, "globex", false); err != nil {
		t.Fatal(err)
	}
	off, _ := courier.HealthEvent("globex", courier.EndpointHealth{}, courier.EndpointHealth{State: courier.HealthOff, UpdatedAt: time.Now()}, "switched off by root")
	if _, err := d.store.RecordEvents(ctx, []courier.Event{off}, time.Hour, func(ev courier.Event, _ []courier.Event) (courier.Event, []*courier.Message) { return ev, nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Bulk(ctx, courier.ActionDiscard, api.BulkRequest{OperationID: "op-1", Filter: api.Filter{Type: "nothing"}}); err != nil {
		t.Fatal(err)
	}

	b := newPageBrowser(t, d.URL)

	// The login page, and its hint, which names commands that exist.
	b.open("/ui/login", "#key")
	b.wantText("login", "h1", "Log in")
	b.wantText("login", "p.hint", "courier keys create NAME --role operator", "courier keys new NAME --role operator")
	b.follow("log in", "#count-queued", chromedp.SendKeys(chromedp.ID("key"), secrets["root"]), chromedp.Submit(chromedp.ID("key")))

	// The overview: counts that lead to what they count.
	b.wantText("overview", "h1", "Overview")
	b.wantText("overview", "#count-queued", "2")
	b.wantHeadings("overview", "main table", "Endpoint | State | Suspended until | Queued | Failures")
	b.wantCells("overview", b.row("main table", "globex"), "globex", "off", "-", "2", "0")

	// The queued count of globex lists its two held messages.
	b.follow("follow the queued count of globex", "#messages", chromedp.Click(chromedp.CSS(`main table a.queued`)))
	b.wantText("messages of globex", "#routes-filter", "On the routes globex")
	heads := "Message | Type | Route | State | Attempts | Next attempt | Ingested | Last error"
	b.wantHeadings("messages of globex", "#messages", heads)
	b.wantCells("messages of globex", b.row("#messages", "held-1"), "held-1", "invoice", "globex", "queued held", "0", "held by globex", "*", "")
	b.wantCells("messages of globex", b.row("#messages", "crm-orders"), "o-1 to crm-orders", "order.created", "globex", "queued held", "0", "held by globex", "*", "")

	// The messages page found by the start of an id, from the search box.
	b.follow("search by the start of an id", "#messages", chromedp.SendKeys(chromedp.CSS(`header form.search input[name=id]`), "inv"),
		chromedp.Submit(chromedp.CSS(`header form.search input[name=id]`)))
	b.wantHeadings("messages by id", "#messages", heads)
	b.wantCells("messages by id", b.row("#messages", "inv-1"), "inv-1", "invoice", "acme", "suspended rejected", "1", "", "*", "HTTP 400: the receiver refused it")
	b.wantCells("messages by id", b.row("#messages", "inv-2"), "inv-2", "invoice", "acme", "delivered", "1 since a resubmit or resend", "", "*", "")
	if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#messages tbody tr.message").length`)); err != nil || n != 2 {
		t.Errorf("messages whose id begins with inv: %d rows, want 2 (%v)", n, err)
	}
	// And by state, from its form.
	b.open("/ui/messages?state=suspended", "#messages")
	b.wantCells("suspended messages", b.row("#messages", "inv-1"), "inv-1", "invoice", "acme", "suspended rejected", "1", "", "*", "HTTP 400: the receiver refused it")

	// A held message says by which endpoint, why, and links to it.
	b.open("/ui/messages/held-1", "#held")
	b.wantText("held message", "h1", "Message held-1 queued held")
	b.wantText("held message", "#held", "by endpoint globex, switched off by root at", "It is not failed")
	if href, err := chromedp.Run(b.ctx, chromedp.AttributeValue(chromedp.CSS("#held a"), "href")); err != nil || href.Value != "/ui/endpoints#ep-globex" {
		t.Errorf("the held message's link to its endpoint: %+v, %v", href, err)
	}
	b.wantHeadings("held message", "table.attempts", "# | Started | Endpoint | Duration | Outcome | Class | Status | Error and response")
	b.wantCells("held message", b.row("table.attempts", "No attempts yet"), "No attempts yet.")
	if dl := b.text("dl.facts"); strings.Contains(dl, "ago") {
		t.Errorf("a held message shows a next attempt in the past: %q", dl)
	}

	// A message delivered after a resubmit: its counts agree with its
	// history, it shows no last error, and it can be resent.
	b.open("/ui/messages/inv-2", "#resend")
	b.wantText("delivered message", "#attempts", "2 in all, 1 since it was resubmitted or resent")
	if dl := b.text("dl.facts"); strings.Contains(dl, "Last error") || strings.Contains(dl, "unknown customer") {
		t.Errorf("a delivered message shows a last error: %q", dl)
	}
	b.wantCells("delivered message", b.row("table.attempts", "delivered"), "2", "*", "acme", "12 ms", "delivered", "", "204", "")
	b.wantCells("delivered message", b.row("table.attempts", "failed"), "1", "*", "acme", "42 ms", "failed", "http_4xx", "400", "HTTP 400: unknown customer")
	b.follow("resend", "p.note", chromedp.Click(chromedp.ID("resend")))
	b.wantText("resent message", "p.note", "The message was resent")
	b.wantText("resent message", "#message-state", "queued")

	// A published message: its deliveries, the one held saying so.
	b.open("/ui/messages/o-1", "table.deliveries")
	b.wantHeadings("published message", "table.deliveries", "Subscription | Route | State | Reason | Attempts | Next attempt | Last error")
	b.wantCells("published message", b.row("table.deliveries", "crm-orders"), "crm-orders", "globex", "queued held", "", "0", "held by globex", "")
	b.wantText("published message", "dl.facts", "to every subscription that wants its type: 1 delivery")
	b.open("/ui/messages/o-1%2Fcrm-orders", "#held")
	b.wantText("a delivery", "h1", "Delivery of o-1 to crm-orders")

	// The suspended queue, with its subscription filter.
	b.open("/ui/suspended", `input[name=subscription]`)
	b.wantHeadings("suspended queue", "main table", " | Message | Type | Route | Endpoint | Reason | Attempts | Suspended | Last error")
	b.wantCells("suspended queue", b.row("main table", "inv-1"), "", "inv-1", "invoice", "acme", "acme", "rejected", "1", "*", "HTTP 400: the receiver refused it")
	b.open("/ui/suspended?subscription=crm-orders", "main table")
	b.wantCells("suspended queue of crm-orders", b.row("main table", "No suspended"), "No suspended messages match the filter.")
	// Resubmitted from it: the page of what was done.
	b.open("/ui/suspended", `input[value="inv-1"]`)
	b.follow("resubmit inv-1", "main h1", chromedp.Click(chromedp.CSS(`input[value="inv-1"]`)), chromedp.Click(chromedp.CSS(`button[value=resubmit]`)))
	b.wantText("resubmitted", "main h1", "Resubmitted 1 of 1")
	b.wantHeadings("resubmitted", "main table", "Message | Result")
	b.wantCells("resubmitted", b.row("main table", "inv-1"), "inv-1", "done")

	// Endpoints.
	b.open("/ui/endpoints", "#ep-globex")
	b.wantHeadings("endpoints", "main table", "Endpoint | Transport | State | Suspended until | In flight | Limit | Queued | Last hour | ")
	b.wantCells("endpoints", b.row("main table", "globex.example"), "globex https://globex.example/in Edit", "http", "off", "-", "0", "16", "2", "-", "Test Switch on")

	// Types.
	b.open("/ui/types", "#types")
	b.wantHeadings("types", "#types", "Type | Messages | Last | Policy | Subscriptions")
	b.wantCells("types", b.row("#types", "order.created"), "order.created", "1", "*", "default", "crm-orders to globex")

	// Events: the event's kind, not a Go value.
	b.open("/ui/events", "#events")
	b.wantHeadings("events", "#events", "When | Event | Subject | What happened | Notice")
	b.wantCells("events", b.row("#events", "globex"), "*", "endpoint.off", "endpoint globex", "*", "not sent")

	// Audit.
	b.open("/ui/audit", "#audit")
	b.wantHeadings("audit", "#audit", "When | Who | Action | Subject | What changed")
	b.wantCells("audit", b.row("#audit", "endpoint_off"), "*", "root", "endpoint_off", "globex", "")

	// Topology, an object and a new one.
	b.open("/ui/topology", "#list-endpoints")
	b.wantHeadings("topology", "#list-endpoints", "Name | Fields | ")
	b.wantCells("topology", b.row("#list-endpoints", "globex"), "globex", "transport: http, url: https://globex.example/in", "Edit")
	b.open("/ui/topology/endpoints/globex", "#spec")
	b.wantText("an endpoint's settings", "h1", "globex")
	b.open("/ui/topology/new/routes", "#spec")
	b.wantText("a new route", "h1", "route")

	// A bulk operation's page.
	b.open("/ui/operations/op-1", "#progress")
	b.wantText("operation", "h1", "Bulk operation op-1")
	b.wantText("operation", "#progress", "Done: discard of 0 messages.")

	// A page that does not exist.
	b.open("/ui/nowhere", "p.error")
	b.wantText("no such page", "p.error", "there is no page at /ui/nowhere")
}
