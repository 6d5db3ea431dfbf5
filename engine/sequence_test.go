package engine_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

func TestOrderedDeliveryThroughRandomFailuresSequenceArrivesInOrder(t *testing.T) {
	testSequenceInOrder(t, 1)
}

// testSequenceInOrder: ordered delivery through 10 % random failures, on
// nodes engines sharing one store, with the keys' messages ingested by
// several writers at once: for each key, the successful deliveries carry
// Courier-Sequence 1, 2, 3 … in the order they arrive, each with the
// Courier-Previous-Id of the one before it, and no attempt of a key ever
// carries a lower number than one before it.
func testSequenceInOrder(t *testing.T, nodes int) {
	const keys, writers, perWriter = 4, 3, 25 // per key: writers × perWriter messages
	h := newHarness(t, func(h *harness) {
		h.orderedShop(32)
	})
	for i := 1; i < nodes; i++ {
		h.addNode()
	}
	var want []string
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		var batches [][]*courier.Message
		for i := 0; i < perWriter; i += 5 {
			var batch []*courier.Message
			for j := i; j < i+5; j++ {
				for k := 0; k < keys; k++ {
					id := fmt.Sprintf("w%d-k%d-%03d", w, k, j)
					batch = append(batch, h.message(id, "order", "shop", fmt.Sprintf("k%d", k), 0))
					want = append(want, id)
				}
				id := fmt.Sprintf("w%d-free-%03d", w, j)
				batch = append(batch, h.message(id, "order", "shop", "", 0))
				want = append(want, id)
			}
			batches = append(batches, batch)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, b := range batches {
				if _, err := h.store.Ingest(t.Context(), b); err != nil {
					errs <- err
					return
				}
				h.engine.Wake()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	h.waitDelivered(want, 2*time.Minute)
	if failed := h.sink.StatusCount(500); failed == 0 {
		t.Fatal("the receiver failed no request: the test did not exercise retries")
	}

	arrivals := h.sink.Arrivals("/shop")
	sort.Slice(arrivals, func(i, j int) bool { return arrivals[i].Seq < arrivals[j].Seq })
	type progress struct {
		next   int64  // the number the next successful delivery must carry
		prevID string // the id of the last delivered
		last   int64  // the highest number an attempt carried
	}
	byKey := map[string]*progress{}
	for _, a := range arrivals {
		id := a.Header.Get("webhook-id")
		var m map[string]string
		if err := json.Unmarshal(a.Body, &m); err != nil || m["id"] != id {
			t.Fatalf("arrival %d: body %q for %s", a.Seq, a.Body, id)
		}
		seqHeader := a.Header.Get("Courier-Sequence")
		key := keyOf(id)
		if key == "" {
			if seqHeader != "" || a.Header.Get("Courier-Previous-Id") != "" {
				t.Fatalf("%s has no ordering key but came with Courier-Sequence %q", id, seqHeader)
			}
			continue
		}
		n, err := strconv.ParseInt(seqHeader, 10, 64)
		if err != nil {
			t.Fatalf("%s came with Courier-Sequence %q", id, seqHeader)
		}
		p := byKey[key]
		if p == nil {
			p = &progress{next: 1}
			byKey[key] = p
		}
		if n < p.last {
			t.Fatalf("key %s: an attempt of %s carried sequence %d after one carried %d", key, id, n, p.last)
		}
		p.last = n
		if a.Status < 200 || a.Status > 299 {
			continue
		}
		if n != p.next {
			t.Fatalf("key %s: %s delivered with sequence %d, want %d", key, id, n, p.next)
		}
		if got := a.Header.Get("Courier-Previous-Id"); got != p.prevID {
			t.Fatalf("key %s: %s (sequence %d) came with Courier-Previous-Id %q, want %q", key, id, n, got, p.prevID)
		}
		p.next, p.prevID = n+1, id
	}
	for k := 0; k < keys; k++ {
		key := fmt.Sprintf("k%d", k)
		if p := byKey[key]; p == nil || p.next != writers*perWriter+1 {
			t.Fatalf("key %s: delivered %v, want sequences 1 to %d", key, p, writers*perWriter)
		}
	}
	t.Logf("%d nodes: %d keys of %d messages each delivered with their sequences in order; the receiver failed %d requests",
		nodes, keys, writers*perWriter, h.sink.StatusCount(500))
}

// keyOf is the ordering key of a message of testSequenceInOrder, by its
// id ("w1-k2-007" is of k2); "" for one without.
func keyOf(id string) string {
	var w, k, j int
	if _, err := fmt.Sscanf(id, "w%d-k%d-%d", &w, &k, &j); err != nil {
		return ""
	}
	return fmt.Sprintf("k%d", k)
}

// TestSkipLeavesAGapAndSaysSo: on a route that skips, a rejected message
// of a key is suspended and the key goes on without it. The receiver sees
// the gap (the next delivered carries the number after the skipped one's
// and names the skipped one as its previous), and the endpoint the policy
// escalates to gets a sequence_gap notice naming the skipped message and
// its number.
func TestSkipLeavesAGapAndSaysSo(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("shop")
		h.direct("ops")
		h.top.Routes["shop"].OrderedOnFailure = courier.OrderedSkip
		p := orderedPolicy("order")
		p.Escalate = []courier.Escalation{{After: time.Hour, Notify: "ops"}}
		h.policy(p)
		h.sink.ScriptMessage("g-2", sink.Respond(422))
	})
	var msgs []*courier.Message
	for i := 1; i <= 4; i++ {
		msgs = append(msgs, h.message(fmt.Sprintf("g-%d", i), "order", "shop", "g", 0))
	}
	h.ingestAll(msgs)
	h.waitDelivered([]string{"g-1", "g-3", "g-4"}, 20*time.Second)
	if m := h.waitState("g-2", courier.StateSuspended); !m.OrderSkipped || m.Sequence != 2 {
		t.Fatalf("g-2: %+v, want suspended out of its key's order, sequence 2", m)
	}
	got := map[string][2]string{}
	for _, a := range h.sink.Arrivals("/shop") {
		if a.Status == 204 {
			got[a.Header.Get("webhook-id")] = [2]string{a.Header.Get("Courier-Sequence"), a.Header.Get("Courier-Previous-Id")}
		}
	}
	for id, want := range map[string][2]string{"g-1": {"1", ""}, "g-3": {"3", "g-2"}, "g-4": {"4", "g-3"}} {
		if got[id] != want {
			t.Errorf("%s arrived with sequence and previous id %q, want %q", id, got[id], want)
		}
	}

	deadline := time.Now().Add(20 * time.Second)
	for {
		var gaps []courier.NoticeBody
		for _, a := range h.sink.Arrivals("/ops") {
			var b courier.NoticeBody
			if err := json.Unmarshal(a.Body, &b); err != nil {
				t.Fatalf("notice %q: %v", a.Body, err)
			}
			if b.Notice == courier.NoticeSequenceGap && a.Status == 204 {
				gaps = append(gaps, b)
			}
		}
		if len(gaps) == 1 {
			if b := gaps[0]; b.MessageID != "g-2" || b.Sequence != 2 || b.OrderingKey != "g" || b.Route != "shop" {
				t.Fatalf("gap notice %+v, want g-2, sequence 2 of key g on shop", b)
			}
			break
		}
		if len(gaps) > 1 || time.Now().After(deadline) {
			t.Fatalf("%d sequence_gap notices at ops, want 1", len(gaps))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
