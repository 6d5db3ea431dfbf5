package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// TestWorkflowSurvivesKill: 1,000 four-step workflows, courier killed with
// SIGKILL while they run. After the restart every step of every workflow
// was done, in order, and a step was sent twice only where it was in flight
// at the kill (counted by webhook-id, which is <id>.<step>).
func TestWorkflowSurvivesKill(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	steps := []string{"accounts", "packages", "drones", "deliveries"}
	for _, s := range steps {
		sk.Script("/"+s, sink.Delay(3*time.Millisecond, 200).WithBody(`{"ok":true}`), sink.Repeat)
	}
	dir := t.TempDir()
	var eps strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&eps, "  %s: {transport: http, url: \"%s/%s\", max_concurrency: 32}\n", s, sk.URL(), s)
	}
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
%sroutes:
  schedule:
    workflow:
      - {endpoint: accounts}
      - {endpoint: packages}
      - {endpoint: drones}
      - {endpoint: deliveries}
`, eps.String()))

	const total = 1000
	ids := messageIDs(total)
	ingest(t, []*process{p}, "delivery", ids, func(int) string { return "schedule" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sk.Wait(ctx, "/packages", total/2); err != nil {
		t.Fatalf("before the kill: %v", err)
	}
	p.kill(t)
	before := sk.Total()

	// The steps in flight at the kill: the only ones allowed twice.
	inflight := map[string]bool{}
	for _, m := range inflightInSQLite(t, storePath(dir)) {
		inflight[fmt.Sprintf("%s.%d", m.ID, m.Step)] = true
	}

	p2 := startServerWith(t, p.config)
	waitUntil(t, p2, 2*time.Minute, "every workflow's last step", func() bool {
		last := map[string]bool{}
		for _, a := range sk.Arrivals("/deliveries") {
			last[a.Header.Get("webhook-id")] = true
		}
		return len(last) == total
	})
	seen := map[string]int{}
	first := map[string]int{}
	for _, a := range sk.All() {
		id := a.Header.Get("webhook-id")
		seen[id]++
		if _, ok := first[id]; !ok {
			first[id] = a.Seq
		}
	}
	dups := 0
	for i := 0; i < total; i++ {
		prev := 0
		for k := range steps {
			id := fmt.Sprintf("%s.%d", ids[i], k+1)
			switch n := seen[id]; {
			case n == 0:
				t.Fatalf("step %s was never sent", id)
			case n > 1 && !inflight[id]:
				t.Fatalf("step %s was sent %d times but was not in flight at the kill", id, n)
			case n > 1:
				dups += n - 1
			}
			if first[id] < prev {
				t.Fatalf("step %s was sent before the step before it", id)
			}
			prev = first[id]
		}
	}
	t.Logf("%d requests before SIGKILL, %d steps in flight at the kill, %d sent twice after the restart", before, len(inflight), dups)
	// Every workflow ends delivered.
	client := api.NewClient(p2.url, "")
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		waitForState(t, p2, client, id, courier.StateDelivered, deadline)
	}
}
