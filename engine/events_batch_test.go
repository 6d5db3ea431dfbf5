package engine

import (
	"fmt"
	"slices"
	"testing"

	courier "github.com/courier-gw/courier"
)

// The first event after a quiet spell is written at once, alone; those
// that come while it is written go together in the next batch, in the
// order they came; past maxQueuedEvents waiting, an event is refused, not
// waited for.
func TestEventsGoInBatches(t *testing.T) {
	var b eventBatcher
	batches := make(chan []string, 10)
	release := make(chan struct{})
	write := func(batch []courier.Event) {
		var ids []string
		for _, ev := range batch {
			ids = append(ids, ev.ID)
		}
		batches <- ids
		<-release
	}
	ev := func(i int) courier.Event { return courier.Event{ID: fmt.Sprintf("e-%d", i)} }
	if !b.add(ev(0), write) {
		t.Fatal("the first event was refused")
	}
	if got := <-batches; !slices.Equal(got, []string{"e-0"}) {
		t.Fatalf("first batch %v; want e-0 alone, at once", got)
	}
	// e-0 is being written: the next ones wait for it.
	for i := 1; i < maxQueuedEvents+1; i++ {
		if !b.add(ev(i), write) {
			t.Fatalf("event %d refused with %d waiting", i, i-1)
		}
	}
	if b.add(ev(-1), write) {
		t.Fatalf("an event was queued with %d waiting", maxQueuedEvents)
	}
	close(release)
	var next []string
	for len(next) < maxQueuedEvents {
		got := <-batches
		if len(next) == 0 && len(got) != maxEventBatch {
			t.Fatalf("the batch after e-0 has %d events; want all that waited, up to %d", len(got), maxEventBatch)
		}
		if len(got) > maxEventBatch {
			t.Fatalf("a batch of %d events; want at most %d", len(got), maxEventBatch)
		}
		next = append(next, got...)
	}
	for i, id := range next {
		if id != ev(i+1).ID {
			t.Fatalf("written %s at %d; want %s, in the order they came", id, i, ev(i+1).ID)
		}
	}
	b.wait()
	if len(batches) != 0 {
		t.Fatalf("more batches written: %v", <-batches)
	}
}
