package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// RunLimits runs the suite of courier.SharedLimits against limits made by
// open, for stores that several nodes share.
func RunLimits(t *testing.T, open func(t *testing.T) courier.SharedLimits) {
	tests := []struct {
		name string
		fn   func(t *testing.T, l courier.SharedLimits)
	}{
		{"SlotsNeverExceedMax", testSlotsNeverExceedMax},
		{"SlotsReleaseAndLapse", testSlotsReleaseAndLapse},
		{"BookStartSpacesStarts", testBookStart},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

func count(slots map[string][]int, endpoint string) int { return len(slots[endpoint]) }

// testSlotsNeverExceedMax: owners asking at once together never hold more
// than the endpoint's slots, and asking again returns what one holds.
func testSlotsNeverExceedMax(t *testing.T, l courier.SharedLimits) {
	ctx := context.Background()
	owners := []string{"node-a", "node-b", "node-c", "node-d"}
	got := make([]map[string][]int, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := l.AcquireSlots(ctx, o, []courier.SlotRequest{{Endpoint: "ep", Max: 3, N: 2}, {Endpoint: "other", Max: 1, N: 1}}, time.Minute)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		}()
	}
	wg.Wait()
	held, other := map[int]string{}, 0
	for i, s := range got {
		for _, slot := range s["ep"] {
			if prev, ok := held[slot]; ok {
				t.Errorf("slot %d held by %s and %s", slot, prev, owners[i])
			}
			held[slot] = owners[i]
		}
		other += count(s, "other")
	}
	if len(held) != 3 || other != 1 {
		t.Fatalf("held %d slots of ep (want 3) and %d of other (want 1): %v", len(held), other, got)
	}
	// Asking again for none returns what the owner holds.
	again, err := l.AcquireSlots(ctx, owners[0], []courier.SlotRequest{{Endpoint: "ep", Max: 3, N: 0}}, time.Minute)
	if err != nil || count(again, "ep") != count(got[0], "ep") {
		t.Fatalf("node-a holds %v, %v; want %v", again, err, got[0]["ep"])
	}
}

// testSlotsReleaseAndLapse: released slots and slots whose holder stopped
// renewing them go to others; renewing keeps them.
func testSlotsReleaseAndLapse(t *testing.T, l courier.SharedLimits) {
	ctx := context.Background()
	want := []courier.SlotRequest{{Endpoint: "ep", Max: 2, N: 2}}
	a, err := l.AcquireSlots(ctx, "a", want, time.Minute)
	if err != nil || count(a, "ep") != 2 {
		t.Fatalf("a: %v, %v; want 2 slots", a, err)
	}
	if b, err := l.AcquireSlots(ctx, "b", want, time.Minute); err != nil || count(b, "ep") != 0 {
		t.Fatalf("b while a holds both: %v, %v; want none", b, err)
	}
	if err := l.ReleaseSlots(ctx, "a", map[string][]int{"ep": a["ep"][:1]}); err != nil {
		t.Fatal(err)
	}
	if b, err := l.AcquireSlots(ctx, "b", want, time.Minute); err != nil || count(b, "ep") != 1 {
		t.Fatalf("b after a released one: %v, %v; want 1", b, err)
	}
	// a stops renewing: its slot lapses and d takes it.
	if _, err := l.RenewSlots(ctx, "a", time.Millisecond); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if renewed, err := l.RenewSlots(ctx, "a", time.Minute); err != nil || count(renewed, "ep") != 0 {
		t.Fatalf("renew after the slot lapsed: %v, %v; want nothing held", renewed, err)
	}
	if d, err := l.AcquireSlots(ctx, "d", want, time.Minute); err != nil || count(d, "ep") != 1 {
		t.Fatalf("d after a's slot lapsed: %v, %v; want 1", d, err)
	}
	if renewed, err := l.RenewSlots(ctx, "d", time.Minute); err != nil || count(renewed, "ep") != 1 {
		t.Fatalf("d renews: %v, %v; want its slot", renewed, err)
	}
}

// testBookStart: bookings from many callers are spaced by the interval, and
// one further off than the lead is refused with the time to wait.
func testBookStart(t *testing.T, l courier.SharedLimits) {
	ctx := context.Background()
	const interval, lead = 200 * time.Millisecond, 50 * time.Millisecond
	wait, ok, err := l.BookStart(ctx, "paced", interval, lead)
	if err != nil || !ok || wait > lead {
		t.Fatalf("first booking: wait %v, ok %v, %v; want at once", wait, ok, err)
	}
	wait, ok, err = l.BookStart(ctx, "paced", interval, lead)
	if err != nil || ok {
		t.Fatalf("second booking at once: ok %v, %v; want refused (the next start is an interval away)", ok, err)
	}
	if wait < interval-lead-50*time.Millisecond || wait > interval {
		t.Fatalf("refused booking says wait %v; want about %v", wait, interval-lead)
	}
	time.Sleep(wait)
	wait, ok, err = l.BookStart(ctx, "paced", interval, lead)
	if err != nil || !ok || wait > lead {
		t.Fatalf("booking after the wait: wait %v, ok %v, %v; want within the lead", wait, ok, err)
	}
	if _, ok, _ := l.BookStart(ctx, "other", interval, lead); !ok {
		t.Fatal("another endpoint's first booking was refused")
	}
}
