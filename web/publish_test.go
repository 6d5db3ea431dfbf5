package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// A published message shows its deliveries, each of which has its own page
// and actions; the types page shows what came and who wants it.
func TestPublishedPages(t *testing.T) {
	d := newDashboard(t, true, func(o *api.Options) {
		o.Topology.Subscriptions = map[string]*courier.Subscription{
			"acme-orders":   {Name: "acme-orders", Types: []string{"order.*"}, Route: "acme"},
			"globex-orders": {Name: "globex-orders", Types: []string{"order.created"}, Route: "globex", Headers: map[string]string{"X-Tenant": "acme"}},
		}
	})
	top := testTopology()
	top.Subscriptions = map[string]*courier.Subscription{
		"acme-orders":   {Name: "acme-orders", Types: []string{"order.*"}, Route: "acme"},
		"globex-orders": {Name: "globex-orders", Types: []string{"order.created"}, Route: "globex", Headers: map[string]string{"X-Tenant": "acme"}},
	}
	ds, err := top.Admit(&courier.Message{ID: "o-1", Type: "order.created", Payload: []byte(`{"order":1}`),
		ContentType: "application/json", Headers: map[string]string{"X-Tenant": "acme"}}, courier.Intake{}, time.Now().Add(-time.Minute))
	if err != nil || len(ds) != 2 {
		t.Fatalf("admit: %d, %v", len(ds), err)
	}
	// The acme delivery is suspended, the globex one still queued.
	ds[0].State, ds[0].Reason, ds[0].LastError, ds[0].NextAttemptAt, ds[0].FinishedAt = courier.StateSuspended, courier.ReasonRejected, "HTTP 400: no such order", time.Time{}, time.Now()
	if _, err := d.store.Ingest(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	b := d.browser(t)
	b.login("ops")
	want(t, "published message", b.get("/ui/messages/o-1"), 200, "Deliveries", "acme-orders", "globex-orders",
		"HTTP 400: no such order", `href="/ui/messages/o-1%2Facme-orders"`)
	if a := b.get("/ui/messages/o-1"); strings.Contains(a.body, `id="resubmit"`) || strings.Contains(a.body, `id="discard"`) {
		t.Errorf("the published message as a whole offers actions; its deliveries have them")
	}
	page := "/ui/messages/" + url.PathEscape("o-1/acme-orders")
	want(t, "delivery page", b.get(page), 200, "Delivery of", "acme-orders", "rejected", `id="resubmit"`)
	a := b.post(page+"/resubmit", url.Values{"csrf": {b.csrf(page)}})
	if a.status != 303 {
		t.Fatalf("resubmit the delivery: %d %s", a.status, a.body)
	}
	if s := d.state(t, "o-1/acme-orders"); s != courier.StateQueued {
		t.Errorf("after resubmit: %s, want queued", s)
	}
	want(t, "suspended queue", b.get("/ui/suspended"), 200, "No suspended messages")

	want(t, "types", b.get("/ui/types"), 200, "order.created", "acme-orders", "globex-orders", "X-Tenant: acme", "default", `id="replay"`)

	// A replay, started on the types page, shows its progress until done:
	// globex-orders had o-1 (discarded), so again it is given it once more.
	if _, err := d.store.Discard(context.Background(), "o-1/globex-orders", courier.Action{At: time.Now(), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	since := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
	a = b.post("/ui/replay", url.Values{"csrf": {b.csrf("/ui/types")}, "subscription": {"globex-orders"}, "since": {since}, "again": {"1"}})
	if a.status != 303 || !strings.HasPrefix(a.location, "/ui/operations/replay-") {
		t.Fatalf("replay: %d %q %s", a.status, a.location, a.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		page := b.get(a.location)
		if strings.Contains(page.body, "Done: 1 deliveries given to globex-orders") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replay page never said it was done:\n%s", page.body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	want(t, "a replay of nobody", b.post("/ui/replay", url.Values{"csrf": {b.csrf("/ui/types")}, "subscription": {"nobody"}, "since": {since}}), 404, "nobody")
}
