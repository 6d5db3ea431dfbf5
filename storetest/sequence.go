package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// wantSequence wants the stored message id numbered n after prev.
func wantSequence(t *testing.T, s courier.Store, id string, n int64, prev string) {
	t.Helper()
	m := mustGet(t, s, id)
	if m.Sequence != n || m.PreviousID != prev {
		t.Errorf("%s: sequence %d after %q, want %d after %q", id, m.Sequence, m.PreviousID, n, prev)
	}
}

// testSequence: the messages that join their key's order at ingest are
// numbered 1, 2, 3 … per route and key in ingest order, each naming the
// message numbered before it (Courier-Sequence, migration 0012).
func testSequence(t *testing.T, s courier.Store) {
	t.Run("PerRouteAndKey", func(t *testing.T) { testSequencePerRouteAndKey(t, s) })
	t.Run("Batch", func(t *testing.T) { testSequenceBatch(t, s) })
	t.Run("IngestAgain", func(t *testing.T) { testSequenceIngestAgain(t, s) })
	t.Run("Unkeyed", func(t *testing.T) { testSequenceUnkeyed(t, s) })
	t.Run("KeptOnResubmit", func(t *testing.T) { testSequenceKeptOnResubmit(t, s) })
	t.Run("Published", func(t *testing.T) { testSequencePublished(t, s) })
	t.Run("Concurrent", func(t *testing.T) { testSequenceConcurrent(t, s) })
}

func testSequencePerRouteAndKey(t *testing.T, s courier.Store) {
	mustCreate(t, s, keyed("sq-a1", "sq", "k"))
	mustCreate(t, s, keyed("sq-a2", "sq", "k"), keyed("sq-b1", "sq", "l"))
	mustCreate(t, s, keyed("sq-o1", "sq-other", "k")) // the same key on another route: its own numbering
	mustCreate(t, s, keyed("sq-a3", "sq", "k"))
	wantSequence(t, s, "sq-a1", 1, "")
	wantSequence(t, s, "sq-a2", 2, "sq-a1")
	wantSequence(t, s, "sq-a3", 3, "sq-a2")
	wantSequence(t, s, "sq-b1", 1, "")
	wantSequence(t, s, "sq-o1", 1, "")

	// A purge of the delivered messages does not start the numbering over.
	ctx := context.Background()
	now := base.Add(time.Minute)
	for _, m := range claimOn(t, s, "sq", now, "[sq-a1 sq-b1]") {
		finish(t, s, m, courier.StateDelivered, false, now)
	}
	if _, err := s.Purge(ctx, courier.Purge{Before: now.Add(time.Second)}, 100); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, keyed("sq-b2", "sq", "l"))
	wantSequence(t, s, "sq-b2", 2, "sq-b1")
}

// testSequenceBatch: several messages of one key in one call are numbered
// consecutively in input order, among those of other keys.
func testSequenceBatch(t *testing.T, s courier.Store) {
	mustCreate(t, s, keyed("sb-x0", "sb", "x"))
	var batch []*courier.Message
	for i := 1; i <= 5; i++ {
		batch = append(batch, keyed(fmt.Sprintf("sb-x%d", i), "sb", "x"), keyed(fmt.Sprintf("sb-y%d", i), "sb", "y"))
	}
	res := mustIngest(t, s, batch...)
	for i, m := range batch {
		if res[i].Status != courier.IngestCreated {
			t.Fatalf("%s: %v, want created", m.ID, res[i].Status)
		}
	}
	// The sender is told the number, as stored.
	if batch[0].Sequence != 2 || batch[0].PreviousID != "sb-x0" {
		t.Errorf("ingest told sb-x1 sequence %d after %q, want 2 after sb-x0", batch[0].Sequence, batch[0].PreviousID)
	}
	for i := 1; i <= 5; i++ {
		wantSequence(t, s, fmt.Sprintf("sb-x%d", i), int64(i+1), fmt.Sprintf("sb-x%d", i-1))
		prev := ""
		if i > 1 {
			prev = fmt.Sprintf("sb-y%d", i-1)
		}
		wantSequence(t, s, fmt.Sprintf("sb-y%d", i), int64(i), prev)
	}
}

// testSequenceIngestAgain: a message ingested again, alone or beside new
// ones, or an id taken by other content, takes no number.
func testSequenceIngestAgain(t *testing.T, s courier.Store) {
	mustCreate(t, s, keyed("si-1", "si", "k"))
	again := mustIngest(t, s, keyed("si-1", "si", "k"))
	if again[0].Status != courier.IngestExists || again[0].Message.Sequence != 1 {
		t.Fatalf("ingest again: %v with sequence %d, want exists with sequence 1", again[0].Status, again[0].Message.Sequence)
	}
	other := keyed("si-1", "si", "k")
	other.Payload, other.Hash = []byte("other"), ""
	other.Hash = courier.ContentHash(other)
	mustIngest(t, s, keyed("si-1", "si", "k"), other, keyed("si-2", "si", "k"))
	mustIngest(t, s, keyed("si-2", "si", "k"), keyed("si-3", "si", "k"))
	wantSequence(t, s, "si-1", 1, "")
	wantSequence(t, s, "si-2", 2, "si-1")
	wantSequence(t, s, "si-3", 3, "si-2")
}

// testSequenceUnkeyed: a message without a key, or one that never joins
// its key's order (taken in unusable), has no number and uses none.
func testSequenceUnkeyed(t *testing.T, s courier.Store) {
	bad := keyed("su-bad", "su", "k")
	courier.Unusable(bad, courier.ReasonInvalid, "not XML", base)
	mustCreate(t, s, keyed("su-none", "su", ""), bad, keyed("su-1", "su", "k"))
	wantSequence(t, s, "su-none", 0, "")
	wantSequence(t, s, "su-bad", 0, "")
	wantSequence(t, s, "su-1", 1, "")
}

// testSequenceKeptOnResubmit: a message resubmitted to another route keeps
// its number and previous id (its place on the route it was ingested to);
// the other route's numbering is not touched.
func testSequenceKeptOnResubmit(t *testing.T, s courier.Store) {
	mustCreate(t, s, keyed("sr-1", "sr", "k"), keyed("sr-2", "sr", "k"))
	now := base.Add(time.Minute)
	finish(t, s, claimOn(t, s, "sr", now, "[sr-1]")[0], courier.StateDelivered, false, now)
	finish(t, s, claimOn(t, s, "sr", now, "[sr-2]")[0], courier.StateSuspended, true, now)
	m := mustResubmit(t, s, "sr-2", "sr-elsewhere", now.Add(time.Second))
	if m.Sequence != 2 || m.PreviousID != "sr-1" {
		t.Errorf("resubmit said sequence %d after %q, want 2 after sr-1", m.Sequence, m.PreviousID)
	}
	wantSequence(t, s, "sr-2", 2, "sr-1")
	mustCreate(t, s, keyed("sr-e1", "sr-elsewhere", "k"))
	wantSequence(t, s, "sr-e1", 1, "")
	// Claimed, it carries its number to the transport.
	got := claimOn(t, s, "sr-elsewhere", now.Add(2*time.Second), "[sr-2]")
	if got[0].Sequence != 2 || got[0].PreviousID != "sr-1" {
		t.Errorf("claimed sr-2 with sequence %d after %q, want 2 after sr-1", got[0].Sequence, got[0].PreviousID)
	}
}

// testSequencePublished: each delivery of a published message is numbered
// on its subscription's route.
func testSequencePublished(t *testing.T, s courier.Store) {
	top := pubTopology()
	for _, id := range []string{"sp-1", "sp-2"} {
		ds := published(t, top, id, "order.created", `{}`, map[string]string{"X-Tenant": "acme"}, base)
		for _, d := range ds {
			d.OrderingKey = "cust-sp"
		}
		mustCreate(t, s, ds...)
	}
	mustCreate(t, s, keyed("sp-direct", "erp", "cust-sp"))
	for _, sub := range []string{"erp-orders", "crm-acme", "audit-all"} {
		wantSequence(t, s, courier.DeliveryKey("sp-1", sub), 1, "")
		wantSequence(t, s, courier.DeliveryKey("sp-2", sub), 2, "sp-1")
	}
	wantSequence(t, s, "sp-direct", 3, "sp-2")
}

// testSequenceConcurrent: writers on several connections ingesting the same
// keys at once number each route and key 1..n with no number twice or
// missed, and each writer's messages of a key in the order it sent them.
func testSequenceConcurrent(t *testing.T, s courier.Store) {
	ctx := context.Background()
	const writers, keys, rounds = 6, 3, 12
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				var batch []*courier.Message
				for k := 0; k < keys; k++ {
					// Two of a key in each call, besides a message of no key.
					for j := 0; j < 2; j++ {
						batch = append(batch, keyed(fmt.Sprintf("sc-w%d-k%d-%03d-%d", w, k, i, j), "sc", fmt.Sprintf("k%d", k)))
					}
				}
				batch = append(batch, keyed(fmt.Sprintf("sc-w%d-u-%03d", w, i), "sc", ""))
				if _, err := s.Ingest(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	waitNoError(t, &wg, errs)
	for k := 0; k < keys; k++ {
		byN := map[int64]*courier.Message{}
		last := map[int]int64{} // by writer: the number of its latest message
		for w := 0; w < writers; w++ {
			for i := 0; i < rounds; i++ {
				for j := 0; j < 2; j++ {
					m := mustGet(t, s, fmt.Sprintf("sc-w%d-k%d-%03d-%d", w, k, i, j))
					if other := byN[m.Sequence]; other != nil {
						t.Fatalf("key k%d: %s and %s are both numbered %d", k, other.ID, m.ID, m.Sequence)
					}
					byN[m.Sequence] = m
					if m.Sequence <= last[w] {
						t.Fatalf("key k%d: %s numbered %d after the writer's earlier %d", k, m.ID, m.Sequence, last[w])
					}
					last[w] = m.Sequence
				}
			}
		}
		for n := int64(1); n <= writers*rounds*2; n++ {
			m := byN[n]
			if m == nil {
				t.Fatalf("key k%d: no message numbered %d", k, n)
			}
			want := ""
			if n > 1 {
				want = byN[n-1].ID
			}
			if m.PreviousID != want {
				t.Fatalf("key k%d: %s (%d) names %q as previous, want %q", k, m.ID, n, m.PreviousID, want)
			}
		}
	}
}
