package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// testCountLive: the live states are counted by route, the terminal ones
// are not, and the counts follow claims, deliveries and discards; a
// tenant's counts are its routes'.
func testCountLive(t *testing.T, s courier.Store) {
	ctx := context.Background()
	count := func(when string, want []courier.RouteLive) {
		t.Helper()
		got, err := s.CountLive(ctx)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s: CountLive = %+v, %v; want %+v", when, got, err, want)
		}
	}
	count("an empty store", nil)
	for i := range 4 {
		queuedAt(t, s, fmt.Sprintf("q-%d", i), "acme", 0, base)
	}
	for i := range 3 {
		suspendedMsg(t, s, fmt.Sprintf("s-%d", i), "invoice")
	}
	// Two messages of one ordering key: the second waits for the first, and
	// is queued all the same.
	for _, id := range []string{"k-1", "k-2"} {
		mustIngest(t, s, keyed(id, "ordered", "customer-42"))
	}
	if m := mustGet(t, s, "k-2"); !m.NextAttemptAt.IsZero() {
		t.Fatalf("the second message of a key is due at %v, want it waiting", m.NextAttemptAt)
	}
	// Tenant beta's messages, on its own route; a delivered one is not live.
	queuedAt(t, s, "beta~q-1", "beta/orders", 0, base)
	suspended := newMessage("beta~s-1", base)
	suspended.Route = "beta/orders"
	courier.Accept(suspended, courier.DefaultPolicy(), true, base)
	suspended.State, suspended.Reason, suspended.FinishedAt, suspended.TimerAt = courier.StateSuspended, courier.ReasonExhausted, base, time.Time{}
	mustIngest(t, s, suspended)
	claimed, err := s.ClaimDue(ctx, courier.Claim{Now: base, LeaseUntil: base.Add(time.Minute), Owner: "n",
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 2}, {Route: "ordered", Limit: 1}}})
	if err != nil || len(claimed) != 3 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	count("after claims", []courier.RouteLive{
		{Route: "acme", LiveCounts: courier.LiveCounts{Queued: 2, Inflight: 2, Suspended: 3}},
		{Route: "beta/orders", LiveCounts: courier.LiveCounts{Queued: 1, Suspended: 1}},
		{Route: "ordered", LiveCounts: courier.LiveCounts{Queued: 1, Inflight: 1}},
	})

	// One claimed message is delivered, one suspended message discarded:
	// neither counts any more; a route without live messages is left out.
	var acme *courier.Message
	for _, m := range claimed {
		if m.Route == "acme" {
			acme = m
		}
	}
	m := *acme
	m.State, m.FinishedAt, m.LeaseUntil, m.LeaseOwner = courier.StateDelivered, base.Add(time.Second), time.Time{}, ""
	MustApply(t, s, courier.Change{Message: &m, From: courier.StateInflight, Token: acme.TotalAttempts})
	for _, id := range []string{"s-0", "beta~s-1", "beta~q-1"} {
		if _, err := s.Discard(ctx, id, courier.Action{At: base, Who: "ops", Kind: courier.ActionDiscard, Subject: id}); err != nil {
			t.Fatal(err)
		}
	}
	count("after a delivery and discards", []courier.RouteLive{
		{Route: "acme", LiveCounts: courier.LiveCounts{Queued: 2, Inflight: 1, Suspended: 2}},
		{Route: "ordered", LiveCounts: courier.LiveCounts{Queued: 1, Inflight: 1}},
	})
}
