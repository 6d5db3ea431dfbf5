package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/sink"
)

// TestKillDuringDelivery: SIGKILL while 20,000 messages are being delivered
// to a slow receiver. After a restart every message arrives at least once,
// and the only messages that arrive twice are ones the store had in flight
// at the kill.
func TestKillDuringDelivery(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	sk.Script("/in", sink.Delay(5*time.Millisecond, 204), sink.Repeat)

	dir := t.TempDir()
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  slow: {transport: http, url: "%s/in", max_concurrency: 64, timeout: 5s}
routes:
  slow: {endpoints: [slow]}
`, sk.URL()))

	const total = 20000
	ingest(t, []*process{p}, "order", messageIDs(total), func(int) string { return "slow" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sk.Wait(ctx, "/in", total/4); err != nil {
		t.Fatalf("deliveries before the kill: %d, %v", sk.Count("/in"), err)
	}
	p.kill(t)
	arrivedBeforeKill := sk.Count("/in")

	// What the store had in flight at the kill: the only messages allowed
	// to arrive twice.
	inflight := map[string]bool{}
	for _, m := range inflightInSQLite(t, storePath(dir)) {
		inflight[m.ID] = true
	}

	startServerWith(t, p.config)
	if err := sk.Wait(ctx, "/in", total); err != nil {
		t.Fatalf("after restart: %d arrivals, %v", sk.Count("/in"), err)
	}
	// Let stragglers arrive, then count per id.
	seen := arrivalsByID(t, sk, total, 30*time.Second)
	if len(seen) != total {
		t.Fatalf("%d of %d messages arrived", len(seen), total)
	}
	dups := 0
	for id, n := range seen {
		if n > 1 {
			dups += n - 1
			if !inflight[id] {
				t.Errorf("%s arrived %d times but was not in flight at the kill", id, n)
			}
		}
	}
	t.Logf("%d arrivals before SIGKILL, %d messages in flight at the kill, %d duplicates after restart", arrivedBeforeKill, len(inflight), dups)
	fmt.Printf("kill during delivery: %d of %d delivered before SIGKILL; %d in flight at the kill; %d delivered twice\n",
		arrivedBeforeKill, total, len(inflight), dups)
}
