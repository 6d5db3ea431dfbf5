package engine

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// TestPacer checks the pacing arithmetic with explicit times: bookings are
// an interval apart, a claim may book at most its lead ahead, and an attempt
// that woke late keeps the next one an interval behind its actual start.
func TestPacer(t *testing.T) {
	ep := &courier.Endpoint{Name: "e", MinInterval: 200 * time.Millisecond}
	t0 := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	var p pacer

	if at, ok := p.start(ep, ms(0)); !ok || !at.Equal(ms(0)) {
		t.Fatalf("first booking: %v %v", at, ok)
	}
	if _, ok := p.start(ep, ms(100)); ok {
		t.Fatal("booked 100 ms after the first, more than the 50 ms lead ahead of 200")
	}
	if at, ok := p.start(ep, ms(160)); !ok || !at.Equal(ms(200)) {
		t.Fatalf("booking within the lead: %v %v, want at 200", at, ok)
	}
	if at, ok := p.start(ep, ms(500)); !ok || !at.Equal(ms(500)) {
		t.Fatalf("late booking: %v %v, want now (no burst to catch up)", at, ok)
	}

	// Actual starts: the one booked for 200 woke late, at 390; the one booked
	// for 500 must not start before 590.
	var q pacer
	if w := q.begin(ep, ms(0)); w != 0 {
		t.Fatalf("first start waits %v", w)
	}
	if w := q.begin(ep, ms(390)); w != 0 {
		t.Fatalf("late start waits %v", w)
	}
	if w := q.begin(ep, ms(500)); w != 90*time.Millisecond {
		t.Fatalf("start 110 ms after a late one waits %v, want 90ms", w)
	}
	if w := q.begin(ep, ms(590)); w != 0 {
		t.Fatalf("start at 590 waits %v", w)
	}

	rated := &courier.Endpoint{Name: "r", Rate: courier.Rate{N: 50, Per: time.Second}, MinInterval: 10 * time.Millisecond}
	if got := interval(rated); got != 20*time.Millisecond {
		t.Errorf("interval of 50/s with min_interval 10ms: %v, want 20ms", got)
	}
	if got := interval(&courier.Endpoint{}); got != 0 {
		t.Errorf("interval of an unpaced endpoint: %v", got)
	}
}
