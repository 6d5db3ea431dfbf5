package engine_test

import (
	"context"
	"fmt"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
)

// The engine starts and stops many times from several goroutines at once,
// messages coming in meanwhile, and delivers them all once started again.
func TestEngineStartStopStress(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.direct("acme") })
	for i := range 20 {
		h.send(fmt.Sprintf("m%d", i), "invoice", "acme")
	}
	startstoptest.Stress(t, h.engine)
	if err := h.engine.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.engine.Wake()
	for i := range 20 {
		h.waitState(fmt.Sprintf("m%d", i), courier.StateDelivered)
	}
}

func TestBulkStartStopStress(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.direct("acme") })
	startstoptest.Stress(t, h.bulks[h.engine])
}

// A stop that runs out of time cuts the run off; the engine starts again.
func TestEngineStartsAgainAfterACutOffStop(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.direct("acme") })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	h.engine.Stop(ctx) // cut off, or stopped in time: either way stopped
	if err := h.engine.Start(context.Background()); err != nil {
		t.Fatalf("start after a stop: %v", err)
	}
	h.send("a", "invoice", "acme")
	h.waitState("a", courier.StateDelivered)
}
