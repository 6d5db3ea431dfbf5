package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// testCountLive: the live states are counted, the terminal ones are not,
// and the counts follow claims, deliveries and discards.
func testCountLive(t *testing.T, s courier.Store) {
	ctx := context.Background()
	if got, err := s.CountLive(ctx); err != nil || got != (courier.LiveCounts{}) {
		t.Fatalf("CountLive of an empty store = %+v, %v; want zeros", got, err)
	}
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
	claimed, err := s.ClaimDue(ctx, courier.Claim{Now: base, LeaseUntil: base.Add(time.Minute), Owner: "n",
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 2}}})
	if err != nil || len(claimed) != 2 {
		t.Fatalf("claim: %d %v", len(claimed), err)
	}
	want := courier.LiveCounts{Queued: 4, Inflight: 2, Suspended: 3}
	if got, err := s.CountLive(ctx); err != nil || got != want {
		t.Fatalf("CountLive = %+v, %v; want %+v", got, err, want)
	}

	// One claimed message is delivered, one suspended message discarded:
	// neither counts any more.
	m := *claimed[0]
	m.State, m.FinishedAt, m.LeaseUntil, m.LeaseOwner = courier.StateDelivered, base.Add(time.Second), time.Time{}, ""
	MustApply(t, s, courier.Change{Message: &m, From: courier.StateInflight, Token: claimed[0].TotalAttempts})
	if _, err := s.Discard(ctx, "s-0", courier.Action{At: base, Who: "ops", Kind: courier.ActionDiscard, Subject: "s-0"}); err != nil {
		t.Fatal(err)
	}
	want = courier.LiveCounts{Queued: 4, Inflight: 1, Suspended: 2}
	if got, err := s.CountLive(ctx); err != nil || got != want {
		t.Fatalf("after a delivery and a discard: CountLive = %+v, %v; want %+v", got, err, want)
	}
}
