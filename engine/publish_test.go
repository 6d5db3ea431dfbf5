package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// publish admits a message without a route (its deliveries, one per
// subscription that wants it) and stores them.
func (h *harness) publish(id, typ, key string, headers map[string]string) []*courier.Message {
	h.t.Helper()
	m := &courier.Message{ID: id, Type: typ, Payload: []byte(`{"id":"` + id + `"}`), ContentType: "application/json",
		OrderingKey: key, Headers: headers}
	ds, err := h.top.Admit(m, courier.Intake{}, time.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	return ds
}

// order.created goes to three subscriptions, two by order.* and one by the
// exact type with a header filter; the receiver of one answers 400: that
// delivery alone is suspended, the others are delivered, and resubmitted
// it is delivered too.
func TestPublishedDeliveriesGoTheirOwnWays(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		for _, name := range []string{"erp", "crm", "audit"} {
			h.direct(name)
		}
		h.top.Subscriptions = map[string]*courier.Subscription{
			"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "erp"},
			"audit-all":  {Name: "audit-all", Types: []string{"order.*"}, Route: "audit"},
			"crm-acme":   {Name: "crm-acme", Types: []string{"order.created"}, Route: "crm", Headers: map[string]string{"X-Tenant": "acme"}},
		}
		h.sink.Script("/crm", sink.Respond(400).WithBody(`{"error":"unknown customer"}`))
	})
	h.ingestAll(h.publish("o-1", "order.created", "", map[string]string{"X-Tenant": "acme"}))
	// Another tenant's order: the crm subscription does not want it.
	other := h.publish("o-2", "order.created", "", map[string]string{"X-Tenant": "globex"})
	if len(other) != 2 {
		t.Fatalf("o-2 has %d deliveries, want 2", len(other))
	}
	h.ingestAll(other)

	h.waitState("o-1/erp-orders", courier.StateDelivered)
	h.waitState("o-1/audit-all", courier.StateDelivered)
	crm := h.waitState("o-1/crm-acme", courier.StateSuspended)
	if crm.Reason != courier.ReasonRejected || crm.Route != "crm" {
		t.Fatalf("crm delivery: %+v", crm)
	}
	h.waitState("o-2/erp-orders", courier.StateDelivered)
	h.waitState("o-2/audit-all", courier.StateDelivered)
	if hist := h.attempts("o-1/crm-acme"); len(hist) != 1 || hist[0].Status != 400 || hist[0].Subscription != "crm-acme" {
		t.Fatalf("crm history %+v", hist)
	}
	ds, err := h.store.Deliveries(context.Background(), "o-1")
	if err != nil || courier.Summary(ds) != courier.StateSuspended {
		t.Fatalf("o-1 as a whole: %v, %v; want suspended", ds, err)
	}
	// Each receiver was told which subscription its copy is for, under the
	// delivery's own id.
	for _, path := range []string{"/erp", "/audit", "/crm"} {
		for _, a := range h.sink.Arrivals(path) {
			id := a.Header.Get("webhook-id")
			if msg, sub := courier.ParseKey(id); msg != "o-1" && msg != "o-2" || sub == "" || a.Header.Get("Courier-Subscription") != sub {
				t.Errorf("%s got webhook-id %q, Courier-Subscription %q", path, id, a.Header.Get("Courier-Subscription"))
			}
		}
	}
	h.countStays("/crm", 1, "after the rejection")

	h.sink.Script("/crm", sink.Respond(204))
	if _, err := h.store.Resubmit(context.Background(), "o-1/crm-acme", "", courier.Action{At: time.Now(), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	h.engine.Due([]string{"crm"})
	h.waitState("o-1/crm-acme", courier.StateDelivered)
	ds, err = h.store.Deliveries(context.Background(), "o-1")
	if err != nil || courier.Summary(ds) != courier.StateDelivered {
		t.Fatalf("o-1 after the resubmit: %v; want delivered", err)
	}
	if n := h.sink.Count("/erp"); n != 2 {
		t.Errorf("erp got %d requests, want one for each order", n)
	}
}

// Each subscription keeps the order of each key on its own, through
// receivers that fail one request in ten: a failing delivery holds up its
// key in its subscription only.
func TestPublishedOrderPerSubscription(t *testing.T) {
	const keys, perKey = 20, 30
	h := newHarness(t, func(h *harness) {
		for _, name := range []string{"erp", "audit"} {
			ep := h.httpEndpoint(name, "/"+name)
			ep.MaxConcurrency = 32
			h.top.Endpoints[name] = ep
			h.route(name, name)
			h.sink.Script("/"+name, sink.Fail(0.1, 500), sink.Repeat)
		}
		h.policy(orderedPolicy("order.created"))
		h.top.Subscriptions = map[string]*courier.Subscription{
			"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "erp"},
			"audit-all":  {Name: "audit-all", Types: []string{"order.created"}, Route: "audit"},
		}
	})
	var msgs []*courier.Message
	ids := map[string][]string{}
	var all []string
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("customer-%02d", k)
			id := fmt.Sprintf("%s-%03d", key, i)
			msgs = append(msgs, h.publish(id, "order.created", key, nil)...)
			ids[key] = append(ids[key], id)
			all = append(all, id)
		}
	}
	h.ingestAll(msgs)
	for _, path := range []string{"/erp", "/audit"} {
		first := waitArrived(t, h.sink, path, all, 2*time.Minute)
		checkKeyOrder(t, first, ids)
	}
	if failed := h.sink.StatusCount(500); failed < len(all)/20 {
		t.Fatalf("the receivers failed only %d requests: the test did not exercise retries", failed)
	}
}
