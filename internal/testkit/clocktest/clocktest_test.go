package clocktest_test

import (
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
)

var _ courier.Clock = (*clocktest.Clock)(nil)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)
	c := clocktest.New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now = %v, want %v", got, start)
	}
	c.Advance(90 * time.Second)
	if got, want := c.Now(), start.Add(90*time.Second); !got.Equal(want) {
		t.Fatalf("after Advance: %v, want %v", got, want)
	}
	c.Set(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("after Set: %v, want %v", got, start)
	}
}

// TestClockConcurrentUse is for the race detector: the code under test
// reads the clock from its goroutines while the test moves it.
func TestClockConcurrentUse(t *testing.T) {
	c := clocktest.New(time.Unix(0, 0))
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				c.Now()
			}
		}()
	}
	for range 100 {
		c.Advance(time.Millisecond)
	}
	wg.Wait()
	if got, want := c.Now(), time.Unix(0, 0).Add(100*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Now = %v, want %v", got, want)
	}
}
