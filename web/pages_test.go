package web_test

import (
	"bytes"
	"context"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	natstransport "github.com/courier-gw/courier/transport/nats"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/receivertest"
)

// want fails the test unless the answer has the status and every text.
func want(t *testing.T, what string, a answer, status int, texts ...string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, a.status, status, a.body)
	}
	for _, s := range texts {
		if !strings.Contains(a.body, s) {
			t.Errorf("%s does not show %q", what, s)
		}
	}
}

// wantNot fails the test if the answer shows any of texts: a secret, a
// payload or a control that the page must leave out.
func wantNot(t *testing.T, what string, a answer, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(a.body, s) {
			t.Errorf("%s shows %q", what, s)
		}
	}
}

func TestPages(t *testing.T) {
	d := newDashboard(t, true)
	d.suspendedWithHistory(t, "inv-1", []byte(`{"invoice":"2026-1","total":42}`), "application/json",
		map[string]string{"X-Tenant": "acme"}, "HTTP 400: the receiver refused it", `{"error":"unknown customer"}`)
	d.suspendedWithHistory(t, "inv-2", []byte(`<Invoice xmlns:cbc="urn:cbc"><cbc:ID>2</cbc:ID></Invoice>`), "application/xml", nil, "HTTP 400", "")
	d.suspendedWithHistory(t, "inv-3", []byte("plain"), "text/plain", nil, "HTTP 400", "")
	b := d.browser(t)
	b.login("ops")

	want(t, "overview", b.get("/ui/"), 200, `id="count-suspended">3<`, "Endpoints that are not active", "All 2 endpoints are active")

	// The message page: its facts, attempt history, headers and payload.
	want(t, "message page", b.get("/ui/messages/inv-1"), 200,
		"inv-1", "rejected", "HTTP 400: the receiver refused it", "http_4xx", "<td>400</td>", "42 ms",
		"{&#34;error&#34;:&#34;unknown customer&#34;}", "X-Tenant", "&#34;total&#34;: 42", `id="resubmit"`, `id="discard"`)
	want(t, "XML payload", b.get("/ui/messages/inv-2"), 200, "&lt;cbc:ID&gt;2&lt;/cbc:ID&gt;", "XML, indented")

	// Search by id.
	if a := b.get("/ui/messages?id=inv-2"); a.status != http.StatusSeeOther || a.location != "/ui/messages/inv-2" {
		t.Errorf("search: %d %q", a.status, a.location)
	}
	// An id no message has, nor begins with, is an empty list that says so.
	want(t, "search for a missing id", b.get("/ui/messages?id=nope"), 200, "none has an id that begins with “nope”")

	// The suspended queue, filtered.
	want(t, "suspended queue", b.get("/ui/suspended"), 200, "inv-1", "inv-2", "inv-3", "HTTP 400: the receiver refused it")
	a := b.get("/ui/suspended?type=order")
	want(t, "filtered queue", a, 200, "No suspended messages match the filter")
	// The error names the field as its label does.
	want(t, "bad time filter", b.get("/ui/suspended?after=yesterday"), 422, "Ingested after: &#34;yesterday&#34; is not a time", "Ingested after (UTC)")
	want(t, "bad time filter", b.get("/ui/suspended?before=tomorrow"), 422, "Ingested before: &#34;tomorrow&#34; is not a time", "Ingested before (UTC)")

	// Resubmit two selected messages to another route.
	token := b.csrf("/ui/suspended")
	a = b.post("/ui/suspended", url.Values{"csrf": {token}, "action": {"resubmit"}, "id": {"inv-1", "inv-2"}, "route": {"globex"}})
	want(t, "resubmit selected", a, 200, "Resubmitted 2 of 2")
	for _, id := range []string{"inv-1", "inv-2"} {
		m, _ := d.store.Message(context.Background(), id)
		if m.State != courier.StateQueued || m.Route != "globex" {
			t.Errorf("%s after resubmit to globex: %s on %s", id, m.State, m.Route)
		}
	}
	// Selected ones that cannot be resubmitted say why, one by one.
	a = b.post("/ui/suspended", url.Values{"csrf": {token}, "action": {"resubmit"}, "id": {"inv-1", "inv-3"}})
	want(t, "resubmit with one not suspended", a, 200, "Resubmitted 1 of 2", "inv-1")
	want(t, "message page after the resubmit", b.get("/ui/messages/inv-1"), 200, "resubmit by <b>ops</b>")

	// Discard every suspended message matching a filter, as a bulk
	// operation whose progress has its own page.
	for i := range 5 {
		d.suspendedWithHistory(t, fmt.Sprintf("ord-%d", i), []byte(`{}`), "application/json", nil, "HTTP 400", "")
	}
	a = b.post("/ui/suspended", url.Values{"csrf": {token}, "action": {"discard_all"}, "f_route": {"acme"}})
	if a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, "/ui/operations/ui-") {
		t.Fatalf("discard all: %d %q %s", a.status, a.location, a.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a = b.get(a.location)
		if a.status == 200 && strings.Contains(a.body, "Done: discard of 5 messages") {
			if strings.Contains(a.body, `http-equiv="refresh"`) {
				t.Error("a finished operation's page still reloads itself")
			}
			break
		}
		if a.status != 200 || time.Now().After(deadline) {
			t.Fatalf("operation page: %d %s", a.status, a.body)
		}
		if !strings.Contains(a.body, `http-equiv="refresh"`) {
			t.Fatal("the page of an operation under way does not reload itself")
		}
		time.Sleep(20 * time.Millisecond)
		a.location = strings.TrimPrefix(a.location, d.URL)
		if a.location == "" {
			a.location = "/ui/operations/" + regexp.MustCompile(`Bulk operation (ui-[0-9a-f]+)`).FindStringSubmatch(a.body)[1]
		}
	}
	if got := d.state(t, "ord-3"); got != courier.StateDiscarded {
		t.Errorf("ord-3 after discard all: %s", got)
	}
	// A bulk resubmit to a route that does not exist is refused, and the
	// operation page says so.
	a = b.post("/ui/suspended", url.Values{"csrf": {token}, "action": {"resubmit_all"}, "route": {"nowhere"}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("resubmit all to nowhere: %d", a.status)
	}
	op := a.location
	for deadline := time.Now().Add(10 * time.Second); ; {
		a = b.get(op)
		if strings.Contains(a.body, "The operation was refused") {
			want(t, "refused operation", a, 200, "route &#34;nowhere&#34; is not configured")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refused operation page: %d %s", a.status, a.body)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Endpoints: switch one off and on again.
	want(t, "endpoints", b.get("/ui/endpoints"), 200, "acme", "globex", "https://acme.example/in", "Switch off")
	a = b.post("/ui/endpoints/acme/off", url.Values{"csrf": {token}})
	if a.status != http.StatusSeeOther || a.location != "/ui/endpoints?note=endpoint_off" {
		t.Fatalf("switch off: %d %q %s", a.status, a.location, a.body)
	}
	want(t, "endpoints after switching off", b.get("/ui/endpoints?note=endpoint_off"), 200, `class="state off"`, "Switch on", "was switched off")
	want(t, "overview with an endpoint off", b.get("/ui/"), 200, "Endpoints that are not active", `href="/ui/endpoints#ep-acme"`)
	if a := b.post("/ui/endpoints/acme/on", url.Values{"csrf": {token}}); a.status != http.StatusSeeOther {
		t.Fatalf("switch on: %d", a.status)
	}
	if a := b.post("/ui/endpoints/nope/off", url.Values{"csrf": {token}}); a.status != http.StatusNotFound {
		t.Errorf("switching an endpoint that is not configured: %d", a.status)
	}
	want(t, "unknown page", b.get("/ui/nowhere"), 404, "there is no page")
}

// busyHour is an hour of traffic: deliveries every minute, failures in some.
func busyHour(context.Context, string) (courier.Stats, error) {
	now := time.Now()
	s := courier.Stats{CountedAt: now, Live: courier.LiveCounts{Queued: 12, Inflight: 3, Suspended: 1}, Since: now.Add(-2 * time.Hour),
		Delivered: 123456}
	for i := range 60 {
		s.Minutes = append(s.Minutes, courier.MinuteStats{Start: now.Truncate(time.Minute).Add(time.Duration(i-59) * time.Minute),
			Delivered: 1000 + 37*i, Failed: i % 7})
	}
	return s, nil
}

func TestOverviewChart(t *testing.T) {
	d := newDashboard(t, true, func(o *api.Options) { o.StatsFunc = busyHour })
	b := d.browser(t)
	b.login("ops")
	a := b.get("/ui/")
	want(t, "overview", a, 200, `<svg class="chart"`, `<rect class="ok"`, `<rect class="fail"`, `id="count-queued">12<`,
		"3186/min", "delivered, 6 failed</title>", "per minute over the last hour: 125490 delivered, 174 failed")
	if n := strings.Count(a.body, "<rect "); n != 60+51 {
		t.Errorf("%d bars drawn, want 60 of deliveries and 51 of failures", n)
	}
}

// TestErrorStatusAsAPI: an error is shown with the status the API answers
// its code with: a request too large for the API is 413, not 400.
func TestErrorStatusAsAPI(t *testing.T) {
	d := newDashboard(t, true)
	d.suspendedWithHistory(t, "s1", []byte("x"), "text/plain", nil, "HTTP 400", "")
	b := d.browser(t)
	b.login("ops")
	token := b.csrf("/ui/messages/s1")
	a := b.post("/ui/messages/s1/resubmit", url.Values{"csrf": {token}, "route": {strings.Repeat("r", 64<<10)}})
	want(t, "resubmit with a body too large for the API", a, http.StatusRequestEntityTooLarge, "request body is larger than")
	if got := d.state(t, "s1"); got != courier.StateSuspended {
		t.Errorf("s1 after the refused resubmit: %s", got)
	}
}

// TestPageWeight: the dashboard's pages and assets together stay small.
func TestPageWeight(t *testing.T) {
	d := newDashboard(t, true, func(o *api.Options) { o.StatsFunc = busyHour })
	d.suspendedWithHistory(t, "inv-1", []byte(`{"invoice":"2026-1","total":42}`), "application/json",
		map[string]string{"X-Tenant": "acme"}, "HTTP 400: the receiver refused it", `{"error":"unknown customer"}`)
	b := d.browser(t)
	login := b.get("/ui/login")
	b.login("ops")
	total := len(login.body)
	sizes := map[string]int{"/ui/login": len(login.body)}
	for _, path := range []string{"/ui/", "/ui/endpoints", "/ui/suspended", "/ui/messages/inv-1",
		"/ui/static/style.css", "/ui/static/app.js", "/ui/static/icon.svg"} {
		a := b.get(path)
		if a.status != 200 {
			t.Fatalf("%s: %d", path, a.status)
		}
		sizes[path] = len(a.body)
		total += len(a.body)
	}
	// Nothing is loaded from elsewhere: every page's assets are its own.
	for _, path := range []string{"/ui/", "/ui/messages/inv-1"} {
		for _, m := range regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(b.get(path).body, -1) {
			if strings.Contains(m[1], "//") {
				t.Errorf("%s loads %s from elsewhere", path, m[1])
			}
		}
	}
	t.Logf("dashboard page weight: %d bytes (%.1f KiB) in all: %v", total, float64(total)/1024, sizes)
	if total > 200<<10 {
		t.Errorf("the dashboard's pages and assets weigh %d bytes, more than 200 KiB", total)
	}
}

// TestOrderingShown: a message waiting behind a suspended one of its key
// says which, and the suspended one that it holds the key.
func TestOrderingShown(t *testing.T) {
	d := newDashboard(t, true)
	holder := &courier.Message{ID: "k-1", Type: "t", Route: "acme", OrderingKey: "customer-42", Payload: []byte(`{}`), ContentType: "application/json"}
	d.suspend(t, holder, "HTTP 400", "")
	waiting := &courier.Message{ID: "k-2", Type: "t", Route: "acme", OrderingKey: "customer-42", Payload: []byte(`{}`), ContentType: "application/json"}
	courier.Accept(waiting, courier.DefaultPolicy(), false, time.Now())
	if _, err := d.store.Ingest(context.Background(), []*courier.Message{waiting}); err != nil {
		t.Fatal(err)
	}
	b := d.browser(t)
	b.login("ops")
	want(t, "waiting message", b.get("/ui/messages/k-2"), 200, `waiting for <a href="/ui/messages/k-1">k-1</a> (suspended: rejected)`)
	want(t, "holder", b.get("/ui/messages/k-1"), 200, "holds the key")
}

// TestPayloadAsStored: the message page shows the payload's own text and
// size, not those of the API's JSON encoding of it (compacted, with <, >
// and & escaped as \u003c and so on).
func TestPayloadAsStored(t *testing.T) {
	d := newDashboard(t, true)
	payload := `{ "note": "<b>fish & chips</b>" }`
	d.suspendedWithHistory(t, "j1", []byte(payload), "application/json", nil, "HTTP 400", "")
	b := d.browser(t)
	b.login("ops")
	a := b.get("/ui/messages/j1")
	want(t, "message page", a, 200, fmt.Sprintf("%d bytes", len(payload)), "&#34;note&#34;: &#34;&lt;b&gt;fish &amp; chips&lt;/b&gt;&#34;")
	wantNot(t, "message page", a, "u003c", "u0026") // the payload as the API encodes it
}

// TestLargePayloadDownloaded: a payload over 1 MiB is not shown on its
// page but linked, and the link serves it whole, as an attachment.
func TestLargePayloadDownloaded(t *testing.T) {
	d := newDashboard(t, true)
	payload := bytes.Repeat([]byte("<row/>"), courier.InlineMax/6+100)
	sp := courier.NewSpool(context.Background(), d.store.Blobs(), 0)
	defer sp.Close()
	sp.Write(payload)
	m := &courier.Message{ID: "big-1", Type: "invoice", Route: "acme", ContentType: "application/xml"}
	if err := sp.Finish(m); err != nil {
		t.Fatal(err)
	}
	d.suspend(t, m, "HTTP 500", "")
	b := d.browser(t)
	b.login("ops")
	a := b.get("/ui/messages/big-1")
	want(t, "message page", a, 200, "too large to show here", courier.PayloadDigest(payload), `href="/ui/messages/big-1/payload"`)
	wantNot(t, "message page", a, "&lt;row/&gt;") // the large payload itself
	a = b.get("/ui/messages/big-1/payload")
	if a.status != 200 || a.body != string(payload) || !strings.HasPrefix(a.header.Get("Content-Disposition"), "attachment") {
		t.Fatalf("download: %d, %d bytes (equal %v), disposition %q", a.status, len(a.body), a.body == string(payload), a.header.Get("Content-Disposition"))
	}
}

// TestEndpointsHideTokens: a NATS token written as the user of its URL is
// not shown.
func TestEndpointsHideTokens(t *testing.T) {
	d := newDashboard(t, true, func(o *api.Options) {
		events := courier.NewEndpoint("events", courier.TransportNATS)
		natstransport.Of(events).URL, natstransport.Of(events).Subject = "nats://s3cr3t-t0ken@127.0.0.1:4222", "courier.out"
		o.Topology.Endpoints["events"] = events
	})
	b := d.browser(t)
	b.login("ops")
	a := b.get("/ui/endpoints")
	want(t, "endpoints", a, 200, "events", "127.0.0.1:4222")
	wantNot(t, "endpoints", a, "s3cr3t-t0ken") // the NATS token
}

// The endpoints page tells how an endpoint authenticates, when its token
// expires and its last failure to obtain one; never its secrets.
func TestEndpointsShowAuth(t *testing.T) {
	var tested atomic.Pointer[courier.Delivery]
	expiry := time.Date(2026, 11, 21, 11, 0, 0, 0, time.UTC)
	failed := time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC)
	d := newDashboard(t, true, func(o *api.Options) {
		crm := courier.NewEndpoint("crm", courier.TransportHTTP)
		s := httptransport.Of(crm)
		s.URL = "https://crm.example/hook"
		s.Auth.OAuth2 = &httptransport.OAuth2{TokenURL: "https://auth.example/token", ClientID: "courier", ClientSecret: "client-s3cret"}
		s.Headers = []httptransport.Header{{Name: "X-Api-Key", Value: "hdr-s3cret", Secret: true}}
		o.Topology.Endpoints["crm"] = crm
		o.TestSendFunc = func(_ context.Context, d courier.Delivery) courier.Result {
			tested.Store(&d)
			return courier.Result{Status: 202, Response: `{"queued":"job-17"}`}
		}
		o.AuthFunc = func(e *courier.Endpoint) courier.AuthState {
			if e.Name != "crm" {
				return courier.AuthState{}
			}
			return courier.AuthState{Kind: "oauth2", TokenExpiry: expiry, LastFailure: failed,
				LastError: "token endpoint https://auth.example/token answered HTTP 503 Service Unavailable"}
		}
	})
	b := d.browser(t)
	b.login("ops")
	a := b.get("/ui/endpoints")
	want(t, "endpoints", a, 200, "auth: oauth2", "token expires", `class="auth-failure"`, "answered HTTP 503 Service Unavailable")
	wantNot(t, "endpoints", a, "client-s3cret", "hdr-s3cret")

	// The Test button sends a test message and shows what was answered.
	a = b.post("/ui/endpoints/crm/test", url.Values{"csrf": {b.csrf("/ui/endpoints")}})
	want(t, "tested", a, 200, `id="tested"`, "Test message to crm", "delivered", "HTTP 202", "job-17")
	if got := tested.Load(); got == nil || got.Endpoint.Name != "crm" {
		t.Fatalf("the test message went to %+v", got)
	}
}

// lateReceivers is given to the API before the receive locations exist:
// they need the dashboard's store.
type lateReceivers struct{ courier.Receivers }

// The receive locations on the endpoints page and, when one is not
// running, on the overview; an operator stops and starts one.
func TestReceiversShown(t *testing.T) {
	late := &lateReceivers{}
	d := newDashboard(t, true, func(o *api.Options) { o.Receivers = late })
	inbox := t.TempDir()
	svc := receivertest.StartPickup(t, d.store, testTopology, &courier.Receiver{Name: "vans-inbox", Transport: courier.ReceiveDir,
		Type: "invoice", Route: "acme", Batch: 10, Dir: courier.DirSource{Path: inbox, Pattern: "*.xml", Settle: time.Second}})
	late.Receivers = svc
	b := d.browser(t)
	b.login("ops")
	deadline := time.Now().Add(10 * time.Second)
	for svc.Statuses()[0].State != courier.ReceiverRunning {
		if time.Now().After(deadline) {
			t.Fatalf("the receiver did not start: %+v", svc.Statuses())
		}
		time.Sleep(10 * time.Millisecond)
	}
	want(t, "endpoints page", b.get("/ui/endpoints"), 200, "Receive locations", "vans-inbox", "directory "+inbox+" (*.xml)", `class="state running"`)
	want(t, "overview", b.get("/ui/"), 200, "All 1 receive locations are running")

	token := b.csrf("/ui/endpoints")
	a := b.post("/ui/receivers/vans-inbox/stop", url.Values{"csrf": {token}})
	if a.status != http.StatusSeeOther || !strings.HasPrefix(a.location, "/ui/endpoints?note=receiver_stop") {
		t.Fatalf("stop: %d %q %s", a.status, a.location, a.body)
	}
	want(t, "stopped", b.get("/ui/endpoints?note=receiver_stop"), 200, "The receive location was stopped", `class="state stopped"`, "stopped by ops", "/ui/receivers/vans-inbox/start")
	want(t, "overview with a stopped receiver", b.get("/ui/"), 200, "Receive locations that are not running", "vans-inbox", "stopped by ops")
	a = b.post("/ui/receivers/vans-inbox/start", url.Values{"csrf": {token}})
	if a.status != http.StatusSeeOther {
		t.Fatalf("start: %d %s", a.status, a.body)
	}
	if st := svc.Statuses()[0]; st.State == courier.ReceiverStopped {
		t.Fatalf("after start: %+v", st)
	}
	// Without the form's token nothing happens.
	if a := b.post("/ui/receivers/vans-inbox/stop", url.Values{}); a.status != http.StatusForbidden {
		t.Fatalf("stop without the token: %d", a.status)
	}
}
