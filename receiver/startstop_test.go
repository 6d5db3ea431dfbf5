package receiver_test

import (
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
)

func TestStartStopStress(t *testing.T) {
	q := newQueue(item("a", "acme"), item("b", "acme"))
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	startstoptest.Stress(t, h.svc)
	// Every item fetched was stored and acknowledged or went back to the
	// queue: none is left half-read.
	if _, out, _ := q.state(); out != 0 {
		t.Errorf("%d items fetched and neither acknowledged nor released after the stops", out)
	}
}
