package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/sqlite"
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

// TestKillDuringDrainCountsAbandoned: SIGKILL during a drain on SQLite.
// After a restart every acknowledged message is delivered, those in
// flight at the kill (as the store holds them) arrive at most once more,
// and each of those, and no other, has one abandoned attempt: the count
// that finds a message that kills the process survives the kill.
func TestKillDuringDrainCountsAbandoned(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	sk.Script("/in", sink.Delay(20*time.Millisecond, 204), sink.Repeat)

	dir := t.TempDir()
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  slow: {transport: http, url: "%s/in", max_concurrency: 32, timeout: 5s}
routes:
  slow: {endpoints: [slow]}
`, sk.URL()))

	const total = 3000
	ingest(t, []*process{p}, "order", messageIDs(total), func(int) string { return "slow" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sk.Wait(ctx, "/in", total/3); err != nil {
		t.Fatalf("deliveries before the kill: %d, %v", sk.Count("/in"), err)
	}
	killedAt := time.Now()
	p.kill(t)
	before := countByID(sk.All())
	first := map[string]time.Time{}
	for _, a := range sk.All() {
		if at, ok := first[a.Header.Get("webhook-id")]; !ok || a.Time.Before(at) {
			first[a.Header.Get("webhook-id")] = a.Time
		}
	}

	inflight := map[string]bool{}
	for _, m := range inflightInSQLite(t, storePath(dir)) {
		inflight[m.ID] = true
	}
	if len(inflight) == 0 {
		t.Fatal("nothing in flight at the kill")
	}

	q := startServerWith(t, p.config)
	if err := sk.Wait(ctx, "/in", total); err != nil {
		t.Fatalf("after restart: %d arrivals, %v", sk.Count("/in"), err)
	}
	seen := arrivalsByID(t, sk, total, 30*time.Second)
	if len(seen) != total {
		t.Fatalf("%d of %d messages arrived", len(seen), total)
	}
	twice, late := 0, 0
	var earliest time.Duration
	for id, n := range seen {
		if n > 1 {
			twice++
			d := killedAt.Sub(first[id])
			earliest = max(earliest, d)
			if d > 150*time.Millisecond {
				late++
			}
		}
		switch {
		case !inflight[id] && n != 1:
			t.Errorf("%s arrived %d times but was not in flight at the kill", id, n)
		case inflight[id] && n-before[id] > 1:
			t.Errorf("%s, in flight at the kill, arrived %d times after the restart", id, n-before[id])
		}
	}
	waits := histogramBuckets(t, q, "courier_outcome_wait_seconds")
	if err := q.terminate(t, 30*time.Second); err != nil {
		t.Fatalf("stop after the drain: %v", err)
	}

	store, err := sqlite.Open(storePath(dir), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	for _, id := range messageIDs(total) {
		m, err := store.Message(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if m.State != courier.StateDelivered {
			t.Errorf("%s is %s after the drain", id, m.State)
		}
		attempts, err := store.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		abandoned := 0
		for _, a := range attempts {
			if a.Outcome == courier.OutcomeAbandoned {
				abandoned++
			}
		}
		if want := map[bool]int{true: 1}[inflight[id]]; abandoned != want {
			t.Errorf("%s (in flight at the kill: %v) has %d abandoned attempts of %d, want %d", id, inflight[id], abandoned, len(attempts), want)
		}
	}
	fmt.Printf("SQLite, killed during a drain (max_concurrency 32): %d in flight at the kill; %d arrived twice, first sent at most %v before the kill, %d of them more than 150 ms before; after the restart, answer to outcome written p50 within %gs, p99 within %gs\n",
		len(inflight), twice, earliest.Round(time.Millisecond), late, quantileBound(waits, 0.5), quantileBound(waits, 0.99))
}
