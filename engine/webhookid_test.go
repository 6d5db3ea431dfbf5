package engine_test

import (
	httptransport "github.com/courier-gw/courier/transport/http"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// Two subscriptions that reach one endpoint make two deliveries of a
// message: the receiver, deduplicating on webhook-id as Standard Webhooks
// asks, must see two ids (each signed as its own), and each delivery keeps
// its id on a retry.
func TestDeliveriesToOneEndpointHaveTheirOwnWebhookID(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		ep := h.httpEndpoint("crm", "/crm")
		httptransport.Of(ep).Secrets = []string{claimSecret}
		h.top.Endpoints["crm"] = ep
		h.route("crm", "crm")
		h.policy(steadyPolicy("order.created", 5, 20*time.Millisecond))
		h.top.Subscriptions = map[string]*courier.Subscription{
			"sales":   {Name: "sales", Types: []string{"order.*"}, Route: "crm"},
			"billing": {Name: "billing", Types: []string{"order.created"}, Route: "crm"},
		}
		// The billing delivery fails once, and is retried.
		h.sink.ScriptMessage("o-1/billing", sink.Respond(500))
	})
	h.ingestAll(h.publish("o-1", "order.created", "", nil))
	h.waitState("o-1/sales", courier.StateDelivered)
	h.waitState("o-1/billing", courier.StateDelivered)

	byID := map[string][]sink.Arrival{}
	for _, a := range h.sink.Arrivals("/crm") {
		checkWebhookSignature(t, a)
		byID[a.Header.Get("webhook-id")] = append(byID[a.Header.Get("webhook-id")], a)
	}
	sales, billing := byID["o-1/sales"], byID["o-1/billing"]
	if len(byID) != 2 || len(sales) != 1 || len(billing) != 2 {
		ids := map[string]int{}
		for id, as := range byID {
			ids[id] = len(as)
		}
		t.Fatalf("arrivals by webhook-id %v; want o-1/sales once and o-1/billing twice (a failure and its retry)", ids)
	}
	if sales[0].Header.Get("webhook-signature") == billing[1].Header.Get("webhook-signature") {
		t.Errorf("both deliveries carry the signature %q", sales[0].Header.Get("webhook-signature"))
	}
	for _, a := range append(sales, billing...) {
		if _, want := courier.ParseKey(a.Header.Get("webhook-id")); a.Header.Get("Courier-Subscription") != want {
			t.Errorf("webhook-id %s came with Courier-Subscription %q", a.Header.Get("webhook-id"), a.Header.Get("Courier-Subscription"))
		}
	}
}
