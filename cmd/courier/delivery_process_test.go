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

// killedDrain is a node that was delivering messages to a slow sink when
// it was killed (SIGKILL).
type killedDrain struct {
	sk       *sink.Sink
	p        *process
	dir      string
	killedAt time.Time
	// inflight is what the store had in flight at the kill: the only
	// messages allowed to arrive twice.
	inflight map[string]bool
}

// killDuringDrain starts a node that delivers total messages to a sink
// answering each after delay, at most concurrency at once, and kills it
// once killAfter of them have arrived.
func killDuringDrain(t *testing.T, total, killAfter, concurrency int, delay time.Duration) *killedDrain {
	t.Helper()
	k := &killedDrain{sk: sink.MustStart(t, sink.Options{DiscardBodies: true}), dir: t.TempDir()}
	k.sk.Script("/in", sink.Delay(delay, 204), sink.Repeat)
	k.p = startNode(t, k.dir, fmt.Sprintf(`endpoints:
  slow: {transport: http, url: "%s/in", max_concurrency: %d, timeout: 5s}
routes:
  slow: {endpoints: [slow]}
`, k.sk.URL(), concurrency))

	ingest(t, []*process{k.p}, "order", messageIDs(total), func(int) string { return "slow" })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.sk.Wait(ctx, "/in", killAfter); err != nil {
		t.Fatalf("deliveries before the kill: %d, %v", k.sk.Count("/in"), err)
	}
	k.killedAt = time.Now()
	k.p.kill(t)
	k.inflight = map[string]bool{}
	for _, m := range inflightInSQLite(t, storePath(k.dir)) {
		k.inflight[m.ID] = true
	}
	return k
}

// restart starts the node again and waits until every one of the total
// messages has arrived; it returns the node and the arrivals of each.
func (k *killedDrain) restart(t *testing.T, total int) (*process, map[string]int) {
	t.Helper()
	q := startServerWith(t, k.p.config)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := k.sk.Wait(ctx, "/in", total); err != nil {
		t.Fatalf("after restart: %d arrivals, %v", k.sk.Count("/in"), err)
	}
	// Let stragglers arrive, then count per id.
	seen := arrivalsByID(t, k.sk, total, 30*time.Second)
	if len(seen) != total {
		t.Fatalf("%d of %d messages arrived", len(seen), total)
	}
	return q, seen
}

// TestKillDuringDelivery: SIGKILL while 20,000 messages are being delivered
// to a slow receiver. After a restart every message arrives at least once,
// and the only messages that arrive twice are ones the store had in flight
// at the kill.
func TestKillDuringDelivery(t *testing.T) {
	skipIfShort(t)
	const total = 20000
	k := killDuringDrain(t, total, total/4, 64, 5*time.Millisecond)
	arrivedBeforeKill, inflight := k.sk.Count("/in"), k.inflight
	_, seen := k.restart(t, total)
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
	const total = 3000
	k := killDuringDrain(t, total, total/3, 32, 20*time.Millisecond)
	killedAt, inflight := k.killedAt, k.inflight
	before := countByID(k.sk.All())
	first := map[string]time.Time{}
	for _, a := range k.sk.All() {
		if at, ok := first[a.Header.Get("webhook-id")]; !ok || a.Time.Before(at) {
			first[a.Header.Get("webhook-id")] = a.Time
		}
	}
	if len(inflight) == 0 {
		t.Fatal("nothing in flight at the kill")
	}

	q, seen := k.restart(t, total)
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

	store, err := sqlite.Open(storePath(k.dir), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
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
