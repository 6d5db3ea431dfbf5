package storetest

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// AttemptStep claims the one message due on route and writes what the
// topology decides after an attempt on the route's first endpoint with
// result r, as the engine would. It returns the message as written. Tests of
// what the API, the CLI and the dashboard show of a message part-way through
// its workflow use it to move the message along.
func AttemptStep(t *testing.T, store courier.Store, top *courier.Topology, route string, r courier.Result) *courier.Message {
	t.Helper()
	return AttemptOn(t, store, top, route, top.Route(route).Endpoints[0], r)
}

// AttemptOn claims the one message due on route and writes what the
// topology decides after an attempt on endpoint with result r, as the
// engine would, and returns the message as written.
func AttemptOn(t *testing.T, store courier.Store, top *courier.Topology, route, endpoint string, r courier.Result) *courier.Message {
	t.Helper()
	now := time.Now()
	claimed, err := store.ClaimDue(context.Background(), courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Minute), Owner: "t",
		Routes: []courier.RouteQuota{{Route: route, Limit: 1}}})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim on %s: %d messages, %v", route, len(claimed), err)
	}
	m := claimed[0]
	next, notices := top.AfterAttempt(m, &courier.Endpoint{Name: endpoint}, r, now, 0)
	a := &courier.Attempt{MessageID: m.ID, Subscription: m.Subscription, N: m.TotalAttempts, Endpoint: endpoint, Route: m.Route,
		StartedAt: now, Outcome: courier.OutcomeDelivered, Status: r.Status, Response: r.Response}
	if !r.Delivered() {
		a.Outcome, a.Class, a.Error = courier.OutcomeFailed, r.Class, r.Error
	}
	MustApply(t, store, courier.Change{Message: next, From: courier.StateInflight, Token: m.TotalAttempts, Attempt: a, Notices: notices, Prior: m})
	return next
}
