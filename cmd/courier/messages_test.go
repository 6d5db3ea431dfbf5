package main

import (
	"context"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/storetest"
)

// TestMessagesShow: messages show says that a queued message is held, by
// which endpoint and why, instead of a next attempt in the past; counts
// the attempts as it lists them after a resubmit; shows no last error once
// delivered; gives an ordered message's sequence and previous id; and
// resend of a published message names its deliveries as ID/SUBSCRIPTION.
func TestMessagesShow(t *testing.T) {
	store := sqlitetest.Open(t)
	top := &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"acme": courier.NewEndpoint("acme", courier.TransportHTTP),
			"globex": courier.NewEndpoint("globex", courier.TransportHTTP)},
		Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}},
			"globex": {Name: "globex", Endpoints: []string{"globex"}}},
		Subscriptions: map[string]*courier.Subscription{"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "globex"},
			"crm-orders": {Name: "crm-orders", Types: []string{"order.*"}, Route: "globex"}},
	}
	url := apiServer(t, api.Options{Store: store, Topology: top})
	ctx := context.Background()
	show := func(key string, want ...string) string {
		t.Helper()
		return cliPrints(t, "", []string{"--server", url, "messages", "show", key}, want...)
	}

	// Held by an endpoint switched off.
	cliPrints(t, `{"n":1}`, []string{"--server", url, "send", "--type", "invoice", "--route", "acme", "--id", "held-1"}, "created held-1")
	offAt := time.Now().Add(-3 * time.Minute)
	if _, err := store.UpdateHealth(ctx, "acme", func(h courier.EndpointHealth) courier.EndpointHealth { return h.SwitchedOff(offAt) },
		&courier.Action{At: offAt, Who: "ops", Kind: courier.ActionEndpointOff, Subject: "acme"}); err != nil {
		t.Fatal(err)
	}
	out := show("held-1", "queued, held", "by endpoint acme, switched off by ops 3m0s ago", "when acme takes attempts again")
	if strings.Contains(out, "s ago)") {
		t.Errorf("a held message shows a next attempt in the past:\n%s", out)
	}
	cliPrints(t, "", []string{"--server", url, "messages", "list", "--state", "queued"}, "held by acme")

	// A JSON payload is shown indented from its own bytes: its keys in
	// their order, its characters unescaped.
	cliPrints(t, `{"z":"<b>&","a":1}`, []string{"--server", url, "send", "--type", "invoice", "--route", "acme", "--id", "kept-1"}, "created kept-1")
	show("kept-1", "{\n  \"z\": \"<b>&\",\n  \"a\": 1\n}")

	// Failed, resubmitted, delivered: two attempts in all, as listed.
	cliPrints(t, `{"n":2}`, []string{"--server", url, "send", "--type", "invoice", "--route", "globex", "--id", "again-1"}, "created again-1")
	storetest.AttemptOn(t, store, top, "globex", "globex", courier.Result{Class: courier.ClassRejected, Status: 400, Error: "HTTP 400: unknown customer"})
	show("again-1", "suspended", "HTTP 400: unknown customer")
	cliPrints(t, "", []string{"--server", url, "messages", "resubmit", "again-1"}, "resubmitted again-1")
	storetest.AttemptOn(t, store, top, "globex", "globex", courier.Result{Status: 204})
	out = show("again-1", "delivered", "Attempts:        2 in all, 1 since it was resubmitted or resent (once)")
	if strings.Contains(out, "Last error") {
		t.Errorf("a delivered message shows a last error:\n%s", out)
	}
	if n := strings.Count(out, "\n1 ") + strings.Count(out, "\n2 "); n != 2 {
		t.Errorf("want the two attempts listed:\n%s", out)
	}

	// An ordered message's place in its key's order.
	for _, id := range []string{"k-1", "k-2"} {
		cliPrints(t, `{}`, []string{"--server", url, "send", "--type", "invoice", "--route", "acme", "--id", id, "--ordering-key", "customer-42"}, "created "+id)
	}
	show("k-2", "Sequence:        2 on route acme", "Previous id:     k-1")
	show("k-1", "Sequence:        1 on route acme", "Previous id:     none: it is the first of its key")

	// A published message is resent delivery by delivery.
	cliPrints(t, `{}`, []string{"--server", url, "send", "--type", "order.created", "--route", "", "--id", "o-1"}, "o-1")
	_, _, err := runCLI(t, "", "--server", url, "messages", "resend", "o-1")
	if err == nil || !strings.Contains(describe(err), "o-1/crm-orders, o-1/erp-orders") {
		t.Fatalf("resend of a published message: %v", err)
	}
}
