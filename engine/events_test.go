package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// withAlerts adds the endpoint ops on the sink's /ops and sends alerts to
// it, at most perHour per subject, with links to public.example.
func withAlerts(h *harness, perHour int, oldestDue time.Duration) {
	h.top.Endpoints["ops"] = h.httpEndpoint("ops", "/ops")
	h.alerts = &courier.Alerts{Notify: []string{"ops"}, MaxPerHour: perHour, OldestDue: oldestDue, PublicURL: "https://courier.example/"}
}

// notices returns the bodies of the notices the sink's /ops got.
func (h *harness) notices() []courier.EventBody {
	h.t.Helper()
	var out []courier.EventBody
	for _, a := range h.sink.Arrivals("/ops") {
		var b courier.EventBody
		if err := json.Unmarshal(a.Body, &b); err != nil {
			h.t.Fatalf("a notice that is not an event's: %s: %v", a.Body, err)
		}
		out = append(out, b)
	}
	return out
}

// waitNotices waits until /ops has had n notices, gives more the time to
// come, and returns them in the order of their events (notices go out
// concurrently, so they may arrive in another); it fails when any more
// came.
func (h *harness) waitNotices(n int) []courier.EventBody {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.sink.Wait(ctx, "/ops", n); err != nil {
		h.t.Fatalf("waiting for %d notices: %v; got %+v", n, err, h.notices())
	}
	h.countStays("/ops", n, "(notices)")
	got := h.notices()
	slices.SortStableFunc(got, func(a, b courier.EventBody) int { return a.At.Compare(b.At) })
	return got
}

func (h *harness) events(f courier.EventFilter) []courier.Event {
	h.t.Helper()
	page, err := h.store.Events(context.Background(), f)
	if err != nil {
		h.t.Fatal(err)
	}
	return page.Events
}

// An endpoint refusing with 429 is suspended, which sends one notice; its
// probe succeeds, which sends one more, that it recovered.
func TestSuspensionAndRecoverySendOneNoticeEach(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		withAlerts(h, 6, time.Hour)
		ep := withRules(h.httpEndpoint("flaky", "/flaky"), 200*time.Millisecond, time.Hour)
		h.top.Endpoints["flaky"] = ep
		h.route("flaky", "flaky")
		h.policy(schedulePolicy("t", 10*time.Millisecond))
		h.sink.Script("/flaky", sink.Respond(429), sink.Respond(200), sink.Repeat)
	})
	h.send("m", "t", "flaky")
	h.waitState("m", courier.StateDelivered)
	got := h.waitNotices(2)
	for i, want := range []courier.EventKind{courier.EventEndpointSuspended, courier.EventEndpointRecovered} {
		b := got[i]
		if b.Event != want || b.Subject != "flaky" || b.Kind != "endpoint" || b.Link != "https://courier.example/ui/endpoints#ep-flaky" || b.At.IsZero() {
			t.Errorf("notice %d: %+v; want %s of endpoint flaky with its link", i, b, want)
		}
	}
	if d := got[0].Details; d.State != courier.HealthSuspended || d.SuspendedUntil.IsZero() || d.Reason == "" {
		t.Errorf("the suspension's details: %+v; want the state, suspended_until and the reason", d)
	}
	if d := got[1].Details; d.State != courier.HealthActive {
		t.Errorf("the recovery's details: %+v", d)
	}
	if evs := h.events(courier.EventFilter{Subject: "flaky"}); len(evs) != 2 || !evs[0].Notified || !evs[1].Notified {
		t.Fatalf("recorded events: %+v; want 2, both notified", evs)
	}
}

// An operator's switch (as the API reports it) sends endpoint.off, and
// switching on again endpoint.recovered.
func TestSwitchOffAndOnSendNotices(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		withAlerts(h, 6, time.Hour)
		h.direct("acme")
	})
	for _, on := range []bool{false, true} {
		switchEndpoint(t, h.store, h.engine, "acme", on)
	}
	got := h.waitNotices(2)
	if got[0].Event != courier.EventEndpointOff || got[0].Details.State != courier.HealthOff || got[0].Details.Reason != "switched off by ops" {
		t.Errorf("first notice: %+v; want endpoint.off by ops", got[0])
	}
	if got[1].Event != courier.EventEndpointRecovered {
		t.Errorf("second notice: %+v; want endpoint.recovered", got[1])
	}
}

// A flapping endpoint, suspended and recovered ten times in a second, sends
// no more notices than max_per_hour; every transition is recorded.
func TestFlappingEndpointIsRateLimited(t *testing.T) {
	const perHour = 3
	h := newHarness(t, func(h *harness) {
		withAlerts(h, perHour, time.Hour)
		ep := withRules(h.httpEndpoint("flap", "/flap"), 20*time.Millisecond, 20*time.Millisecond)
		// One attempt at a time, each answered only once the transitions
		// of the answers before it are recorded, so that each answer moves
		// the health: a batch of outcomes moves it once, and on a busy
		// machine no spacing of the attempts keeps two out of one batch.
		ep.MaxConcurrency, ep.Timeout = 1, 30*time.Second
		httptransport.Of(ep).URL = afterTransitions(t, h, "flap", 10) + "/flap"
		h.top.Endpoints["flap"] = ep
		h.route("flap", "flap")
		h.policy(steadyPolicy("t", 100, 10*time.Millisecond))
		var steps []sink.Step
		for range 5 {
			steps = append(steps, sink.Respond(429), sink.Respond(200))
		}
		h.sink.Script("/flap", append(steps, sink.Respond(200), sink.Repeat)...)
	})
	h.deliverEach("m-%d", 6, "flap")
	deadline := time.Now().Add(10 * time.Second)
	var evs []courier.Event
	for {
		evs = h.events(courier.EventFilter{Subject: "flap"})
		if len(evs) >= 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(evs) != 10 {
		for _, a := range h.sink.Arrivals("/flap") {
			t.Logf("%s %d %s", a.Time.Format("05.000000"), a.Status, a.Header.Get("webhook-id"))
		}
		t.Fatalf("%d transitions recorded, want 10 (5 suspensions, 5 recoveries): %+v", len(evs), evs)
	}
	notified := 0
	for _, ev := range evs {
		if ev.Notified {
			notified++
		}
	}
	if notified != perHour {
		t.Errorf("%d events marked notified, want %d", notified, perHour)
	}
	if got := h.waitNotices(perHour); got[0].Event != courier.EventEndpointSuspended {
		t.Errorf("first notice %+v; want the first suspension", got[0])
	}
}

// afterTransitions starts a receiver in front of the harness's sink that
// holds its n-th request until the store has recorded n-1 events of
// subject (up to max), and returns its URL.
func afterTransitions(t *testing.T, h *harness, subject string, max int) string {
	t.Helper()
	var answered atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := min(int(answered.Add(1))-1, max)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			page, err := h.store.Events(r.Context(), courier.EventFilter{Subject: subject})
			if err == nil && len(page.Events) >= want || r.Context().Err() != nil {
				break
			}
		}
		h.sink.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// A route whose oldest due message waits longer than oldest_due (its
// endpoint is off) sends one route.lagging notice, not one per look.
func TestLaggingRouteSendsOneNotice(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		withAlerts(h, 6, 200*time.Millisecond)
		h.direct("slow")
		if _, err := h.store.UpdateHealth(context.Background(), "slow", func(eh courier.EndpointHealth) courier.EndpointHealth { return eh.SwitchedOff(time.Now()) }, nil); err != nil {
			t.Fatal(err)
		}
	})
	for i := range 3 {
		h.send(fmt.Sprintf("m-%d", i), "t", "slow")
	}
	got := h.waitNotices(1)
	b := got[0]
	if b.Event != courier.EventRouteLagging || b.Subject != "slow" || b.Kind != "route" || b.Details.DueSince.IsZero() ||
		b.Link != "https://courier.example/ui/topology/routes/slow" {
		t.Fatalf("notice %+v; want route.lagging of route slow", b)
	}
	if age := time.Duration(b.Details.OldestDueAge) * time.Second; age > time.Minute {
		t.Fatalf("oldest due age %v", age)
	}
	h.countStays("/ops", 1, "while the route keeps lagging")
}

// Two nodes on one PostgreSQL database: an endpoint that both fail on is
// suspended once and notified once; a route both see lagging is notified
// once.
func testOneNoticeForTwoNodes(t *testing.T) {
	addr := closedPort(t)
	h := newHarness(t, func(h *harness) {
		withAlerts(h, 6, 300*time.Millisecond)
		ep := withRules(h.httpEndpoint("down", "/"), time.Hour, time.Hour)
		httptransport.Of(ep).URL = "http://" + addr + "/in"
		h.top.Endpoints["down"] = ep
		h.route("down", "down")
		h.policy(schedulePolicy("t", 10*time.Millisecond))
	})
	other := h.addNode()
	for i := range 10 {
		h.send(fmt.Sprintf("m-%d", i), "t", "down")
		other.Due([]string{"down"})
	}
	h.waitHealth("down", courier.HealthSuspended)
	// The route lags behind its suspended endpoint: both nodes see it.
	got := h.waitNotices(2)
	kinds := map[courier.EventKind]int{}
	for _, b := range got {
		kinds[b.Event]++
	}
	if kinds[courier.EventEndpointSuspended] != 1 || kinds[courier.EventRouteLagging] != 1 {
		t.Fatalf("notices %+v; want one endpoint.suspended and one route.lagging", got)
	}
	// The same transition reported by both nodes is one event.
	before := courier.EndpointHealth{Endpoint: "down", State: courier.HealthSuspended}
	after := courier.EndpointHealth{Endpoint: "down", State: courier.HealthOff, UpdatedAt: time.Now()}
	h.engine.HealthSwitched("down", before, after, "ops")
	other.HealthSwitched("down", before, after, "ops")
	got = h.waitNotices(3)
	if got[2].Event != courier.EventEndpointOff {
		t.Fatalf("third notice %+v; want endpoint.off", got[2])
	}
}

// A tenant's alert targets hear of the events of its own endpoints, and
// another tenant's do not; the server's alerts.notify is not needed.
func TestTenantAlertTargets(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		for _, tenant := range []string{"acme", "beta"} {
			pager := tenant + "/pager"
			h.top.Endpoints[pager] = h.httpEndpoint(pager, "/"+tenant+"-pager")
		}
		h.top.Tenants = map[string]*courier.Tenant{
			"acme": {Name: "acme", Weight: 1, Alerts: courier.TenantAlerts{Notify: []string{"acme/pager"}, MaxPerHour: 1}},
			"beta": {Name: "beta", Weight: 1, Alerts: courier.TenantAlerts{Notify: []string{"beta/pager"}}},
		}
		h.direct("acme/crm")
	})
	ctx := context.Background()
	for _, on := range []bool{false, true} {
		switchEndpoint(t, h.store, h.engine, "acme/crm", on)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := h.sink.Wait(wctx, "/acme-pager", 1); err != nil {
		t.Fatalf("acme's pager got no notice: %v", err)
	}
	var b courier.EventBody
	if err := json.Unmarshal(h.sink.Arrivals("/acme-pager")[0].Body, &b); err != nil || b.Event != courier.EventEndpointOff || b.Subject != "acme/crm" {
		t.Fatalf("acme's notice: %+v (%v); want endpoint.off of acme/crm", b, err)
	}
	// Both events are recorded, the second held back by acme's
	// max_per_hour of 1; no notice was ever made for beta's pager.
	var evs []courier.Event
	for deadline := time.Now().Add(20 * time.Second); len(evs) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		evs = h.events(courier.EventFilter{Subject: "acme/crm"})
	}
	if len(evs) != 2 || !evs[1].Notified || evs[0].Notified {
		t.Fatalf("events of acme/crm: %+v; want the off notified and the recovery held back", evs)
	}
	for _, route := range []string{courier.NoticeRoute("beta/pager"), courier.NoticeRoute("acme/pager")} {
		page, err := h.store.Messages(ctx, courier.MessageFilter{Route: route})
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		if route == courier.NoticeRoute("acme/pager") {
			want = 1
		}
		if len(page.Messages) != want {
			t.Errorf("%d notices on %s, want %d", len(page.Messages), route, want)
		}
	}
	if n := h.sink.Count("/beta-pager"); n != 0 {
		t.Fatalf("beta's pager got %d notices of acme's endpoint", n)
	}
}
