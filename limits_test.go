package courier_test

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestNextStart(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const interval, lead = 200 * time.Millisecond, 50 * time.Millisecond
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	for _, tt := range []struct {
		name      string
		next, now time.Time
		at, after time.Time
		ok        bool
	}{
		{"none booked: now", time.Time{}, ms(0), ms(0), ms(200), true},
		{"the next free start passed: now", ms(100), ms(300), ms(300), ms(500), true},
		{"the next free start is now", ms(300), ms(300), ms(300), ms(500), true},
		{"within the lead: at the next free start", ms(340), ms(300), ms(340), ms(540), true},
		{"just within the lead", ms(350), ms(300), ms(350), ms(550), true},
		{"further than the lead: try again at the lead", ms(351), ms(300), ms(301), ms(351), false},
		{"much further: try again at the lead", ms(900), ms(300), ms(850), ms(900), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			at, after, ok := courier.NextStart(tt.next, tt.now, interval, lead)
			if !at.Equal(tt.at) || !after.Equal(tt.after) || ok != tt.ok {
				t.Errorf("NextStart = %v, %v, %v; want %v, %v, %v", at.Sub(t0), after.Sub(t0), ok, tt.at.Sub(t0), tt.after.Sub(t0), tt.ok)
			}
		})
	}
}

func TestSlotShare(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	live, lapsed, lapsing := now.Add(time.Minute), now.Add(-time.Millisecond), now.Add(courier.SlotGrace/2)
	for _, tt := range []struct {
		name  string
		holds []courier.SlotHold
		req   courier.SlotRequest
		want  int
	}{
		{"no holds: what it asks for", nil, courier.SlotRequest{Max: 4, N: 3}, 3},
		{"no more than max", nil, courier.SlotRequest{Max: 4, N: 9}, 4},
		{"its own hold and more", []courier.SlotHold{{"me", 2, live}}, courier.SlotRequest{Max: 4, N: 1}, 3},
		{"asking for none keeps its hold", []courier.SlotHold{{"me", 2, live}}, courier.SlotRequest{Max: 4}, 2},
		{"others' live holds are not free", []courier.SlotHold{{"a", 1, live}, {"b", 2, live}}, courier.SlotRequest{Max: 4, N: 4}, 1},
		{"others hold all", []courier.SlotHold{{"a", 4, live}, {"me", 1, live}}, courier.SlotRequest{Max: 4, N: 4}, 0},
		{"a lower max leaves less than it held", []courier.SlotHold{{"a", 3, live}, {"me", 3, live}}, courier.SlotRequest{Max: 4}, 1},
		{"a lapsed hold of another is free", []courier.SlotHold{{"a", 4, lapsed}}, courier.SlotRequest{Max: 4, N: 4}, 4},
		{"another's hold within the grace still counts", []courier.SlotHold{{"a", 3, lapsing}}, courier.SlotRequest{Max: 4, N: 4}, 1},
		{"its own hold within the grace counts as none", []courier.SlotHold{{"me", 3, lapsing}}, courier.SlotRequest{Max: 4, N: 1}, 1},
		{"max below one is one", nil, courier.SlotRequest{Max: 0, N: 2}, 1},
		{"a negative ask is none", []courier.SlotHold{{"me", 2, live}}, courier.SlotRequest{Max: 4, N: -3}, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := courier.SlotShare(tt.holds, "me", tt.req, now); got != tt.want {
				t.Errorf("SlotShare = %d, want %d", got, tt.want)
			}
		})
	}
}
