package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// RunLimits runs the suite of courier.SharedLimits against limits made by
// open, for stores that several nodes share.
func RunLimits(t *testing.T, open func(t *testing.T) courier.SharedLimits) {
	suite[courier.SharedLimits]{
		{"SlotsNeverExceedMax", testSlotsNeverExceedMax},
		{"SlotsReleaseAndLapse", testSlotsReleaseAndLapse},
		{"SlotsManyEndpoints", testSlotsManyEndpoints},
		{"BookStartSpacesStarts", testBookStart},
	}.run(t, open)
	RunIngestTokens(t, func(t *testing.T) courier.IngestTokens { return open(t) })
}

// testSlotsNeverExceedMax: owners asking at once together never hold more
// than the endpoint's slots, and asking again returns what one holds.
func testSlotsNeverExceedMax(t *testing.T, l courier.SharedLimits) {
	ctx, now := context.Background(), time.Now()
	owners := []string{"node-a", "node-b", "node-c", "node-d"}
	got := make([]map[string]int, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Go(func() {
			s, err := l.AcquireSlots(ctx, o, []courier.SlotRequest{{Endpoint: "ep", Max: 3, N: 2}, {Endpoint: "other", Max: 1, N: 1}}, time.Minute, now)
			if err != nil {
				t.Error(err)
			}
			got[i] = s
		})
	}
	wg.Wait()
	ep, other := 0, 0
	for i, s := range got {
		if s["ep"] > 2 {
			t.Errorf("%s holds %d slots of ep; it asked for 2", owners[i], s["ep"])
		}
		ep += s["ep"]
		other += s["other"]
	}
	if ep != 3 || other != 1 {
		t.Fatalf("held %d slots of ep (want 3) and %d of other (want 1): %v", ep, other, got)
	}
	// Asking again for none returns what the owner holds.
	again, err := l.AcquireSlots(ctx, owners[0], []courier.SlotRequest{{Endpoint: "ep", Max: 3, N: 0}}, time.Minute, now)
	if err != nil || again["ep"] != got[0]["ep"] {
		t.Fatalf("node-a holds %v, %v; want %d of ep", again, err, got[0]["ep"])
	}
	// With every slot held, nobody gets more.
	for i, o := range owners {
		if more, err := l.AcquireSlots(ctx, o, []courier.SlotRequest{{Endpoint: "ep", Max: 3, N: 3}}, time.Minute, now); err != nil || more["ep"] != got[i]["ep"] {
			t.Fatalf("%s asking for more while all are held: %v, %v; want what it held", o, more, err)
		}
	}
}

// testSlotsReleaseAndLapse: released slots and slots whose holder stopped
// renewing them go to others; renewing keeps them.
func testSlotsReleaseAndLapse(t *testing.T, l courier.SharedLimits) {
	ctx, now := context.Background(), time.Now()
	want := []courier.SlotRequest{{Endpoint: "ep", Max: 2, N: 2}}
	a, err := l.AcquireSlots(ctx, "a", want, time.Minute, now)
	if err != nil || a["ep"] != 2 {
		t.Fatalf("a: %v, %v; want 2 slots", a, err)
	}
	if b, err := l.AcquireSlots(ctx, "b", want, time.Minute, now); err != nil || b["ep"] != 0 {
		t.Fatalf("b while a holds both: %v, %v; want none", b, err)
	}
	if err := l.ReleaseSlots(ctx, "a", map[string]int{"ep": 1}); err != nil {
		t.Fatal(err)
	}
	if b, err := l.AcquireSlots(ctx, "b", want, time.Minute, now); err != nil || b["ep"] != 1 {
		t.Fatalf("b after a released one: %v, %v; want 1", b, err)
	}
	if renewed, err := l.RenewSlots(ctx, "a", time.Minute, now); err != nil || renewed["ep"] != 1 || len(renewed) != 1 {
		t.Fatalf("a renews: %v, %v; want its one slot of ep", renewed, err)
	}
	// a stops renewing: its slot lapses and d takes it.
	if _, err := l.RenewSlots(ctx, "a", time.Millisecond, now); err != nil {
		t.Fatal(err)
	}
	now = now.Add(20 * time.Millisecond)
	if renewed, err := l.RenewSlots(ctx, "a", time.Minute, now); err != nil || renewed["ep"] != 0 {
		t.Fatalf("renew after the slot lapsed: %v, %v; want nothing held", renewed, err)
	}
	if d, err := l.AcquireSlots(ctx, "d", want, time.Minute, now); err != nil || d["ep"] != 1 {
		t.Fatalf("d after a's slot lapsed: %v, %v; want 1", d, err)
	}
	if renewed, err := l.RenewSlots(ctx, "d", time.Minute, now); err != nil || renewed["ep"] != 1 {
		t.Fatalf("d renews: %v, %v; want its slot", renewed, err)
	}
	// Giving back every slot leaves none held; they are free for others.
	if err := l.ReleaseSlots(ctx, "d", map[string]int{"ep": 1}); err != nil {
		t.Fatal(err)
	}
	if renewed, err := l.RenewSlots(ctx, "d", time.Minute, now); err != nil || len(renewed) != 0 {
		t.Fatalf("d renews after giving back all: %v, %v; want nothing held", renewed, err)
	}
	if a, err := l.AcquireSlots(ctx, "a", want, time.Minute, now); err != nil || a["ep"] != 1 {
		t.Fatalf("a after d gave back its slot: %v, %v; want 1 (b holds the other)", a, err)
	}
}

// testSlotsManyEndpoints: one request for more endpoints than one
// transaction takes at once gets the slots of every one.
func testSlotsManyEndpoints(t *testing.T, l courier.SharedLimits) {
	ctx, now := context.Background(), time.Now()
	var want []courier.SlotRequest
	for i := range 700 {
		want = append(want, courier.SlotRequest{Endpoint: fmt.Sprintf("ep-%04d", i), Max: 16, N: 16})
	}
	got, err := l.AcquireSlots(ctx, "a", want, time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if got[w.Endpoint] != 16 {
			t.Fatalf("%s: %d slots, want 16", w.Endpoint, got[w.Endpoint])
		}
	}
	if other, err := l.AcquireSlots(ctx, "b", want[:10], time.Minute, now); err != nil || len(other) != 0 {
		t.Fatalf("b while a holds every slot: %v, %v; want none", other, err)
	}
}

// testBookStart: bookings from many callers are spaced by the interval, and
// one further off than the lead is refused with the time to wait.
func testBookStart(t *testing.T, l courier.SharedLimits) {
	ctx, now := context.Background(), time.Now().Truncate(time.Millisecond)
	const interval, lead = 200 * time.Millisecond, 50 * time.Millisecond
	wait, ok, err := l.BookStart(ctx, "paced", interval, lead, now)
	if err != nil || !ok || wait != 0 {
		t.Fatalf("first booking: wait %v, ok %v, %v; want at once", wait, ok, err)
	}
	wait, ok, err = l.BookStart(ctx, "paced", interval, lead, now)
	if err != nil || ok {
		t.Fatalf("second booking at once: ok %v, %v; want refused (the next start is an interval away)", ok, err)
	}
	if wait != interval-lead {
		t.Fatalf("refused booking says wait %v; want %v", wait, interval-lead)
	}
	now = now.Add(wait)
	wait, ok, err = l.BookStart(ctx, "paced", interval, lead, now)
	if err != nil || !ok || wait != lead {
		t.Fatalf("booking after the wait: wait %v, ok %v, %v; want the lead, %v", wait, ok, err, lead)
	}
	// The one after that is an interval later.
	now = now.Add(interval)
	if wait, ok, err = l.BookStart(ctx, "paced", interval, lead, now); err != nil || !ok || wait != lead {
		t.Fatalf("booking an interval on: wait %v, ok %v, %v; want the lead, %v", wait, ok, err, lead)
	}
	if _, ok, _ := l.BookStart(ctx, "other", interval, lead, now); !ok {
		t.Fatal("another endpoint's first booking was refused")
	}
}

// RunIngestTokens runs the suite of courier.IngestTokens against buckets
// made by open: the shared limits of a store (RunLimits runs it) and the
// buckets of one process.
func RunIngestTokens(t *testing.T, open func(t *testing.T) courier.IngestTokens) {
	suite[courier.IngestTokens]{
		{"TakeTokens", testTakeTokens},
		{"TakeTokensConcurrent", testTakeTokensConcurrent},
	}.run(t, open)
}

// testTakeTokens: a bucket starts full, refuses a take it cannot serve
// with the time until it can, refills at the rate, and is one per tenant.
func testTakeTokens(t *testing.T, l courier.IngestTokens) {
	ctx := context.Background()
	rate := courier.Rate{N: 10, Per: time.Second} // a token each 100 ms
	take := func(tenant string, n int, at time.Time) (time.Duration, bool) {
		t.Helper()
		wait, ok, err := l.TakeTokens(ctx, tenant, rate, 5, n, at)
		if err != nil {
			t.Fatal(err)
		}
		return wait, ok
	}
	for i := range 5 {
		if _, ok := take("acme", 1, base); !ok {
			t.Fatalf("take %d of a full bucket of 5 refused", i+1)
		}
	}
	if wait, ok := take("acme", 1, base); ok || wait != 100*time.Millisecond {
		t.Fatalf("take of an empty bucket: %v, %v; want refused for 100ms", wait, ok)
	}
	if wait, ok := take("acme", 2, base.Add(50*time.Millisecond)); ok || wait != 150*time.Millisecond {
		t.Fatalf("take of 2 at half a token: %v, %v; want refused for 150ms", wait, ok)
	}
	if _, ok := take("acme", 2, base.Add(200*time.Millisecond)); !ok {
		t.Fatal("take of 2 after two tokens came back refused")
	}
	if _, ok := take("beta", 5, base.Add(200*time.Millisecond)); !ok {
		t.Fatal("another tenant's full bucket refused")
	}
	// A take larger than the burst waits for a full bucket.
	if wait, ok := take("acme", 50, base.Add(300*time.Millisecond)); ok || wait != 400*time.Millisecond {
		t.Fatalf("take of 50 with 1 token: %v, %v; want refused until the bucket is full (400ms)", wait, ok)
	}
	if _, ok := take("acme", 50, base.Add(700*time.Millisecond)); !ok {
		t.Fatal("take of 50 of a full bucket refused")
	}
	if _, ok, err := l.TakeTokens(ctx, "acme", courier.Rate{}, 0, 1000, base); err != nil || !ok {
		t.Fatalf("take without a rate: %v, %v; want taken", ok, err)
	}
}

// testTakeTokensConcurrent: callers taking at once at one time take the
// burst, no more.
func testTakeTokensConcurrent(t *testing.T, l courier.IngestTokens) {
	ctx := context.Background()
	var mu sync.Mutex
	taken := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				_, ok, err := l.TakeTokens(ctx, "acme", courier.Rate{N: 1, Per: time.Hour}, 20, 1, base)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					taken++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if taken != 20 {
		t.Fatalf("%d tokens taken of a bucket of 20", taken)
	}
}
