package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/postgres"
)

// A node whose presence in the shared store is lost (its session ended, as
// when its process dies or the database loses sight of it) stops
// delivering at once; another node takes over its messages and its
// endpoint's slots without waiting for the leases and holds to lapse, each
// message with one abandoned attempt that says so; the first node joins
// again under another name and delivers again. (Its HTTP requests already
// sent run to their timeout, as the transport cannot take back a request;
// what they get is dropped.) Run under TestOnPostgres.
func testPresenceLostIsTakenOver(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		ep := h.httpEndpoint("ep", "/ep")
		ep.Timeout, ep.MaxConcurrency = 5*time.Second, 4
		h.top.Endpoints["ep"] = ep
		h.route("ep", "ep")
		h.direct("ep2")
	})
	// The first node's four attempts hang at the receiver; every later one
	// is answered.
	h.sink.Script("/ep", sink.BlackHole(), sink.BlackHole(), sink.BlackHole(), sink.BlackHole(), sink.Respond(204), sink.Repeat)
	ids := []string{"m1", "m2", "m3", "m4"}
	for _, id := range ids {
		h.send(id, "t", "ep")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.sink.Wait(ctx, "/ep", 4); err != nil {
		t.Fatalf("the first node's attempts did not reach the receiver: %v", err)
	}
	if err := h.engine.Ready(); err != nil {
		t.Fatalf("the first node is not ready while present: %v", err)
	}
	other := h.addNode()
	if n, err := h.store.(*postgres.Store).EndPresence(ctx, "node-1"); err != nil || n != 1 {
		t.Fatalf("ended %d sessions of node-1 (%v), want 1", n, err)
	}
	for _, id := range ids {
		h.waitState(id, courier.StateDelivered)
		var abandoned []courier.Attempt
		for _, a := range h.attempts(id) {
			if a.Outcome == courier.OutcomeAbandoned {
				abandoned = append(abandoned, a)
			}
		}
		if len(abandoned) != 1 || !strings.Contains(abandoned[0].Error, "node-1") || !strings.Contains(abandoned[0].Error, "gone") {
			t.Errorf("%s: abandoned attempts %+v, want one, of node-1, taken over because its node is gone", id, abandoned)
		}
	}
	if n := h.sink.Count("/ep"); n != 8 {
		t.Errorf("%d requests reached the receiver, want 8: each message once by each node", n)
	}
	// The first node is back, under another name, and delivers.
	for deadline := time.Now().Add(time.Minute); h.engine.Ready() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the first node did not join again: %v", h.engine.Ready())
		}
	}
	if err := other.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	h.deliverEach("n%d", 4, "ep2")
}
