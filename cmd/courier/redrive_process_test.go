package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// TestKillDuringRedrive: messages exhausted while their receiver failed are
// re-driven when the endpoint comes back; courier is killed with SIGKILL
// half-way. After a restart the re-drive goes on where it was: every
// message arrives, and none is resubmitted twice by it.
func TestKillDuringRedrive(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	sk.Script("/in", sink.Respond(http.StatusInternalServerError), sink.Repeat)

	dir := t.TempDir()
	// Failures change nothing in the endpoint's health here, so that the
	// operator's switch alone makes it come back; max_concurrency 2 makes
	// the re-drive go in batches of 2.
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  in: {transport: http, url: "%s/in", max_concurrency: 2, timeout: 5s, timeout_on: [], suspend_on: []}
routes:
  in:
    endpoints: [in]
    redrive: {on_recovery: true}
policies:
  order: {max_attempts: 1}
`, sk.URL()))
	const total = 30
	ids := messageIDs(total)
	ingest(t, []*process{p}, "order", ids, func(int) string { return "in" })
	c := api.NewClient(p.url, "")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, id := range ids {
		if m := waitForState(t, p, c, id, courier.StateSuspended, time.Now().Add(time.Minute)); m.Reason != courier.ReasonExhausted {
			t.Fatalf("%s: suspended %s, want exhausted", id, m.Reason)
		}
	}
	failed := sk.Count("/in")

	// The receiver is mended, slowly; the endpoint is switched off and on,
	// which is its recovery.
	sk.Script("/in", sink.Delay(150*time.Millisecond, http.StatusNoContent), sink.Repeat)
	for _, on := range []bool{false, true} {
		if _, err := c.SwitchEndpoint(ctx, "in", on); err != nil {
			t.Fatal(err)
		}
	}
	if err := sk.Wait(ctx, "/in", failed+total/3); err != nil {
		t.Fatalf("re-driven before the kill: %d, %v", sk.Count("/in")-failed, err)
	}
	p.kill(t)
	if got := sk.Count("/in") - failed; got >= total {
		t.Fatalf("all %d were re-driven before the kill; the test would show nothing", got)
	}

	p = startServerWith(t, p.config)
	c = api.NewClient(p.url, "")
	for _, id := range ids {
		waitForState(t, p, c, id, courier.StateDelivered, time.Now().Add(time.Minute))
	}
	delivered := map[string]bool{}
	for _, a := range sk.Arrivals("/in") {
		if a.Status == http.StatusNoContent {
			delivered[a.Header.Get("webhook-id")] = true
		}
	}
	for _, id := range ids {
		if !delivered[id] {
			t.Errorf("%s is delivered, but the receiver never took it", id)
		}
		m, err := c.Message(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		redriven := 0
		for _, a := range m.Actions {
			if a.Kind == courier.ActionResubmit && a.Who == "courier" {
				redriven++
			}
		}
		if redriven != 1 {
			t.Errorf("%s was re-driven %d times, want once: %+v", id, redriven, m.Actions)
		}
	}
}
