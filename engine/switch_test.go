package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
)

// claimHook runs a function once, when a claim returns the message it
// waits for: after the claim round looked at the endpoints' health, before
// the attempt starts.
type claimHook struct {
	courier.Store
	id    string
	once  sync.Once
	fn    func()
	fired chan struct{}
}

func (c *claimHook) ClaimDue(ctx context.Context, cl courier.Claim) ([]*courier.Message, error) {
	msgs, err := c.Store.ClaimDue(ctx, cl)
	for _, m := range msgs {
		if m.ID == c.id {
			c.once.Do(func() { c.fn(); close(c.fired) })
		}
	}
	return msgs, err
}

// switchEndpoint switches an endpoint off or on in the store and tells the
// engine, as the API of its node does before it answers.
func switchEndpoint(t *testing.T, store courier.Store, e *engine.Engine, name string, on bool) {
	t.Helper()
	var before courier.EndpointHealth
	after, err := store.UpdateHealth(context.Background(), name, func(h courier.EndpointHealth) courier.EndpointHealth {
		before = h
		if on {
			return h.SwitchedOn(time.Now())
		}
		return h.SwitchedOff(time.Now())
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.HealthSwitched(name, before, after, "ops")
}

// An endpoint switched off after a round claimed a message for it, before
// the attempt started: the attempt does not start, and the message is held
// (queued, no attempt spent on it, no failure) until the endpoint is on.
func TestSwitchedOffBetweenClaimAndAttempt(t *testing.T) {
	hook := &claimHook{id: "m-1", fired: make(chan struct{})}
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		h.wrap = func(s courier.Store) courier.Store { hook.Store = s; return hook }
	})
	hook.fn = func() { switchEndpoint(t, h.store, h.engine, "acme", false) }
	h.send("m-1", "t", "acme")
	select {
	case <-hook.fired:
	case <-time.After(30 * time.Second):
		t.Fatal("m-1 was never claimed")
	}
	// Claimed, it is in flight; put back, queued again.
	m := h.waitState("m-1", courier.StateQueued)
	if n := h.sink.Count("/acme"); n != 0 || len(h.attempts("m-1")) != 0 || m.Attempts != 0 || m.LastError != "" {
		t.Fatalf("after the switch: %d requests, attempts %+v, message %+v; want none, held", n, h.attempts("m-1"), m)
	}
	switchEndpoint(t, h.store, h.engine, "acme", true)
	h.engine.Due([]string{"acme"})
	if m := h.waitState("m-1", courier.StateDelivered); m.Attempts != 1 || len(h.attempts("m-1")) != 1 {
		t.Errorf("delivered after %d attempts (%d listed); want the one that delivered it", m.Attempts, len(h.attempts("m-1")))
	}
}

// Another node obeys a switch within engine.HealthMaxAge of its commit,
// with no word from the node that switched: an attempt it claimed before
// the switch and that is about to start after that time does not start.
// Run by TestOnPostgres: it takes two nodes.
func testOtherNodeObeysTheSwitchWithinItsBound(t *testing.T) {
	testOtherObeysTheSwitchWithinItsBound(t, func(h *harness) *engine.Engine { return h.addNode() })
}

// Another engine on the same SQLite store, which hears of the switch only
// through the store, obeys it within its bound too.
func TestOtherEngineObeysTheSwitchWithinItsBound(t *testing.T) {
	testOtherObeysTheSwitchWithinItsBound(t, func(h *harness) *engine.Engine { return h.addEngine() })
}

func testOtherObeysTheSwitchWithinItsBound(t *testing.T, addNode func(*harness) *engine.Engine) {
	hook := &claimHook{id: "m-1", fired: make(chan struct{})}
	h := newHarness(t, func(h *harness) { h.direct("acme") })
	// The second node alone claims; the first switches.
	h.engine.Stop(context.Background())
	h.wrap = func(s courier.Store) courier.Store { hook.Store = s; return hook }
	other := addNode(h)
	hook.fn = func() {
		switchEndpoint(t, h.store, h.engine, "acme", false)
		// What the other node read before the switch is stale once this
		// bound has passed on its clock: it reads the store again.
		time.Sleep(engine.HealthMaxAge)
	}
	h.send("m-1", "t", "acme")
	other.Due([]string{"acme"})
	select {
	case <-hook.fired:
	case <-time.After(30 * time.Second):
		t.Fatal("m-1 was never claimed")
	}
	m := h.waitState("m-1", courier.StateQueued)
	if n := h.sink.Count("/acme"); n != 0 || len(h.attempts("m-1")) != 0 || m.Attempts != 0 {
		t.Fatalf("after the switch: %d requests, attempts %+v; want none, held", n, h.attempts("m-1"))
	}
}
