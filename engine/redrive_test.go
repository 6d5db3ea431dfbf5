package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// redriveHarness has the route orders to the endpoint hook on the sink's
// /hook, which a 429 suspends at once (probed after 200 ms) and which
// takes concurrency attempts at a time; the route re-drives on its
// recovery. Messages of type t are tried once: a failure exhausts them.
func redriveHarness(t *testing.T, concurrency int) *harness {
	return newHarness(t, func(h *harness) {
		ep := h.httpEndpoint("hook", "/hook")
		ep.MaxConcurrency = concurrency
		ep.SuspendOn = []courier.ErrorClass{courier.ClassHTTP429}
		ep.Suspension = courier.Backoff{Initial: 200 * time.Millisecond, Factor: 2, Max: time.Hour}
		h.top.Endpoints["hook"] = ep
		h.route("orders", "hook")
		h.top.Routes["orders"].Redrive = &courier.Redrive{OnRecovery: true, Reasons: courier.DefaultRedriveReasons, MaxAge: 72 * time.Hour}
		h.policy(steadyPolicy("t", 1, 10*time.Millisecond))
	})
}

// exhaust sends the messages, which the receiver fails (503) and so are
// exhausted, and waits until they are.
func (h *harness) exhaust(ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		h.sink.ScriptMessage(id, sink.Respond(503))
		h.send(id, "t", "orders")
	}
	for _, id := range ids {
		if m := h.waitState(id, courier.StateSuspended); m.Reason != courier.ReasonExhausted {
			h.t.Fatalf("%s: %+v, want exhausted", id, m)
		}
	}
}

// suspendAndRecover has the endpoint hook suspended by a 429 to the
// message down, then recovered by the probe of the message up; it returns
// the recovery's event.
func (h *harness) suspendAndRecover() courier.Event {
	h.t.Helper()
	h.sink.ScriptMessage("down", sink.Respond(429))
	h.send("down", "t", "orders")
	h.waitHealth("hook", courier.HealthSuspended)
	h.sink.ScriptMessage("up", sink.Respond(200))
	h.send("up", "t", "orders")
	h.waitState("up", courier.StateDelivered)
	deadline := time.Now().Add(20 * time.Second)
	for {
		evs := h.events(courier.EventFilter{Kind: courier.EventEndpointRecovered, Subject: "hook"})
		if len(evs) == 1 {
			return evs[0]
		}
		if len(evs) > 1 || time.Now().After(deadline) {
			h.t.Fatalf("recovery events of hook: %+v, want one", evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitRedrive waits until the re-drive of orders after the recovery is
// done, and returns it.
func (h *harness) waitRedrive(recovery courier.Event) courier.BulkOp {
	h.t.Helper()
	id := courier.RedriveID("orders", "hook", recovery.At)
	deadline := time.Now().Add(30 * time.Second)
	for {
		op, err := h.store.Bulk(context.Background(), id)
		if err == nil && op.Done {
			return op
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("re-drive %s: %+v %v, want it done", id, op, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wantRedrivenOnce waits for each message to be delivered and checks that
// the re-drive resubmitted it exactly once.
func (h *harness) wantRedrivenOnce(ids ...string) {
	h.t.Helper()
	for _, id := range ids {
		h.waitState(id, courier.StateDelivered)
		if got := h.redriven(id); len(got) != 1 {
			h.t.Errorf("%s: re-driven %d times, want once", id, len(got))
		}
	}
}

// redriven returns the resubmits of a message by courier's re-drive.
func (h *harness) redriven(id string) []courier.Action {
	h.t.Helper()
	actions, err := h.store.Actions(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []courier.Action
	for _, a := range actions {
		if a.Kind == courier.ActionResubmit {
			if a.Who != courier.SystemWho || !strings.Contains(a.Detail, "re-drive after the recovery of endpoint hook") {
				h.t.Errorf("%s: resubmit %+v, want one by courier's re-drive", id, a)
			}
			out = append(out, a)
		}
	}
	return out
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%02d", prefix, i+1)
	}
	return out
}

// Messages exhausted while the endpoint failed are delivered after it
// recovers, in batches of its concurrency; rejected ones are left.
func TestRedriveAfterRecovery(t *testing.T) {
	h := redriveHarness(t, 2)
	rejected := ids("rejected", 2)
	for _, id := range rejected {
		h.sink.ScriptMessage(id, sink.Respond(400), sink.Repeat)
		h.send(id, "t", "orders")
		if m := h.waitState(id, courier.StateSuspended); m.Reason != courier.ReasonRejected {
			t.Fatalf("%s: %+v, want rejected", id, m)
		}
	}
	exhausted := ids("exhausted", 7)
	h.exhaust(exhausted...)
	h.sink.Script("/hook", sink.Respond(200), sink.Repeat)
	recovery := h.suspendAndRecover()

	// down, exhausted by the 429 that suspended the endpoint, goes too.
	h.wantRedrivenOnce(append(exhausted, "down")...)
	op := h.waitRedrive(recovery)
	if op.Count != 8 || op.Stopped != "" || op.Who != courier.SystemWho {
		t.Errorf("the re-drive: %+v, want 8 messages resubmitted by courier", op)
	}
	for _, id := range rejected {
		if m := h.waitState(id, courier.StateSuspended); m.Reason != courier.ReasonRejected || m.ResubmitCount != 0 {
			t.Errorf("%s: %+v, want it left rejected", id, m)
		}
		if got := h.redriven(id); len(got) != 0 {
			t.Errorf("%s: re-driven: %+v", id, got)
		}
	}
}

// A re-drive stops when the endpoint is suspended again: what it had not
// resubmitted stays suspended.
func TestRedriveStopsWhenSuspendedAgain(t *testing.T) {
	h := redriveHarness(t, 2)
	exhausted := ids("exhausted", 20)
	h.exhaust(exhausted...)
	// The first batch of the re-drive is delivered; then the endpoint
	// refuses with 429 again.
	h.sink.Script("/hook", sink.Respond(200), sink.Respond(200), sink.Respond(429), sink.Repeat)
	recovery := h.suspendAndRecover()
	op := h.waitRedrive(recovery)
	if !strings.Contains(op.Stopped, "suspended again") || op.Count < 2 || op.Count >= len(exhausted) {
		t.Fatalf("the re-drive: %+v, want it stopped after its first batch", op)
	}
	left := 0
	for _, id := range exhausted {
		if len(h.redriven(id)) > 0 {
			continue
		}
		left++
		if m := h.waitState(id, courier.StateSuspended); m.Reason != courier.ReasonExhausted || m.ResubmitCount != 0 {
			t.Errorf("%s: %+v, want it left suspended", id, m)
		}
	}
	if want := len(exhausted) + 1 - op.Count; left+boolInt(len(h.redriven("down")) == 0) != want {
		t.Errorf("%d messages left by the re-drive, want %d", left, want)
	}
	for _, id := range exhausted[:2] {
		h.waitState(id, courier.StateDelivered)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A re-drive cut off by a hard stop resumes at the next start of a node
// on the store: every message is resubmitted once and delivered.
func TestRedriveResumesAfterAHardStop(t *testing.T) {
	h := redriveHarness(t, 1)
	exhausted := ids("exhausted", 8)
	h.exhaust(exhausted...)
	h.sink.Script("/hook", sink.Delay(100*time.Millisecond, 200), sink.Repeat)
	recovery := h.suspendAndRecover()

	// Once the re-drive is under way, its node stops: the bulk
	// operations at once (a batch under way is rolled back), then the
	// engine.
	deadline := time.Now().Add(20 * time.Second)
	for n := 0; n < 2; {
		n = 0
		for _, id := range exhausted {
			n += len(h.redriven(id))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the re-drive resubmitted %d messages, want 2 before the stop", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cut, cancel := context.WithCancel(context.Background())
	cancel()
	h.bulks[h.engine].Stop(cut)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.engine.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	op, err := h.store.Bulk(context.Background(), courier.RedriveID("orders", "hook", recovery.At))
	if err != nil || op.Done {
		t.Fatalf("the re-drive at the stop: %+v %v, want it under way", op, err)
	}

	h.engine = h.startEngine(h.store, nil)
	h.wantRedrivenOnce(append(exhausted, "down")...)
	if op := h.waitRedrive(recovery); op.Count != 9 || op.Stopped != "" {
		t.Errorf("the re-drive: %+v, want 9 messages", op)
	}
}

// Two nodes on one store: one recovery, one re-drive, each message
// resubmitted once.
func testRedriveOnTwoNodes(t *testing.T) {
	h := redriveHarness(t, 2)
	h.addNode()
	exhausted := ids("exhausted", 10)
	h.exhaust(exhausted...)
	h.sink.Script("/hook", sink.Respond(200), sink.Repeat)
	recovery := h.suspendAndRecover()
	h.wantRedrivenOnce(append(exhausted, "down")...)
	if op := h.waitRedrive(recovery); op.Count != 11 {
		t.Errorf("the re-drive: %+v, want 11 messages", op)
	}
	if pending, err := h.store.PendingBulks(context.Background()); err != nil || len(pending) != 0 {
		t.Errorf("pending operations: %+v %v", pending, err)
	}
}
