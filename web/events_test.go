package web_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// The events page lists the operational events newest first, links each
// subject's page, says whether the notice went out, filters and pages.
func TestEventsPage(t *testing.T) {
	d := newDashboard(t, true)
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	record := func(ev courier.Event, notified bool) {
		t.Helper()
		if _, err := d.store.RecordEvents(context.Background(), []courier.Event{ev}, time.Hour, func(ev courier.Event, _ []courier.Event) (courier.Event, []*courier.Message) {
			ev.Notified = notified
			return ev, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	record(courier.ReceiverEvent("erp-queue", "stopped by ops", start), true)
	off, _ := courier.HealthEvent("acme", courier.EndpointHealth{}, courier.EndpointHealth{State: courier.HealthOff, UpdatedAt: start.Add(time.Minute)}, "switched off by ops")
	record(off, false)
	for i := range 55 {
		record(courier.LagEvent("globex", start.Add(time.Duration(i)*time.Minute), start.Add(time.Duration(20+i)*time.Minute)), true)
	}

	ops := d.browser(t)
	ops.login("ops")
	a := ops.get("/ui/events?subject=acme")
	want(t, "events of acme", a, 200, `href="/ui/events" aria-current="page"`, "endpoint.off",
		`<a href="/ui/endpoints#ep-acme">acme</a>`, "switched off by ops", "not sent")
	if strings.Contains(a.body, "globex") {
		t.Errorf("a filter by subject shows other subjects:\n%s", a.body)
	}
	a = ops.get("/ui/events?event=receiver.stopped")
	want(t, "receiver events", a, 200, `<a href="/ui/endpoints#rc-erp-queue">erp-queue</a>`, "sent")
	a = ops.get("/ui/events")
	if n := strings.Count(a.body, `<tr class="event">`); n != 50 {
		t.Fatalf("first page: %d events, want 50", n)
	}
	m := olderRE.FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("no link to older events:\n%s", a.body)
	}
	a = ops.get(strings.ReplaceAll(m[1], "&amp;", "&"))
	want(t, "older events", a, 200, "endpoint.off", "receiver.stopped", `>Newest</a>`)
	if n := strings.Count(a.body, `<tr class="event">`); n != 7 {
		t.Fatalf("second page: %d events, want 7", n)
	}
	want(t, "an event the API does not know", ops.get("/ui/events?event=endpoint.exploded"), http.StatusUnprocessableEntity, "endpoint.exploded")
}
