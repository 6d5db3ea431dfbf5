package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// Nodes that book the starts of one paced endpoint at once, each from what
// it last knew of the endpoint's bookings, book starts an interval apart:
// a booking decided from a start that another node has moved on is not
// written, and is decided again.
func TestBookStartAcrossNodes(t *testing.T) {
	ctx := context.Background()
	const interval, lead = 2 * time.Millisecond, time.Millisecond
	var mu sync.Mutex
	var starts []time.Time
	var wg sync.WaitGroup
	for _, s := range nodes(t, 3) {
		for range 3 {
			wg.Go(func() {
				for booked := 0; booked < 10; {
					now := time.Now().Round(0) // the wall clock, which bookings are on
					wait, ok, err := s.BookStart(ctx, "paced", interval, lead, now)
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						mu.Lock()
						starts = append(starts, now.Add(wait))
						mu.Unlock()
						booked++
					}
					time.Sleep(wait) // until the booked start, or until a booking may be tried again
				}
			})
		}
	}
	wg.Wait()
	slices.SortFunc(starts, time.Time.Compare)
	for i := 1; i < len(starts); i++ {
		if d := starts[i].Sub(starts[i-1]); d < interval {
			t.Errorf("starts %d and %d booked %v apart, less than the interval %v", i-1, i, d, interval)
		}
	}
	if len(starts) != 90 {
		t.Errorf("%d starts booked, want 90", len(starts))
	}
}
