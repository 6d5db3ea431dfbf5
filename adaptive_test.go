package courier

import (
	"testing"
	"time"
)

// receiverModel answers n attempts in flight at once: how long each takes
// and what it answers.
type receiverModel func(n int) (time.Duration, Result)

// flat answers every attempt in d, whatever the load.
func flat(d time.Duration) receiverModel {
	return func(int) (time.Duration, Result) { return d, Result{} }
}

// knee answers in base up to knee attempts at once and then proportionally
// slower (it serves knee at a time; the rest queue), and 429 past full.
func knee(base time.Duration, knee, full int) receiverModel {
	return func(n int) (time.Duration, Result) {
		if n > full {
			return time.Millisecond, Result{Class: ClassHTTP429, Status: 429}
		}
		return base * time.Duration(max(n, knee)) / time.Duration(knee), Result{}
	}
}

// drive runs rounds of attempts against m: each round sends as many as
// the limit allows at once, and the limit hears of each answer. It returns
// the limit after each round.
func drive(a *AdaptiveLimit, m receiverModel, rounds int) []int {
	out := make([]int, rounds)
	for i := range rounds {
		n := a.Limit()
		for range n {
			d, r := m(n)
			a.Observe(d, r, n)
		}
		out[i] = a.Limit()
	}
	return out
}

// grown returns a limit that rounds of flat latency have driven up to its
// ceiling; it fails t if they have not.
func grown(t *testing.T, ceiling int, latency time.Duration, rounds int) *AdaptiveLimit {
	t.Helper()
	a := NewAdaptiveLimit(ceiling)
	drive(a, flat(latency), rounds)
	if got := a.Limit(); got != ceiling {
		t.Fatalf("limit %d after %d rounds of flat latency, want the ceiling %d", got, rounds, ceiling)
	}
	return a
}

func span(limits []int) (lo, hi int) {
	lo, hi = limits[0], limits[0]
	for _, l := range limits {
		lo, hi = min(lo, l), max(hi, l)
	}
	return lo, hi
}

func TestAdaptiveLimitSettles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		ceiling int
		model   receiverModel
		rounds  int
		lo, hi  int // the range of the limit over the last half of the rounds
	}{
		{"flat and fast climbs to the ceiling", 64, flat(2 * time.Millisecond), 100, 64, 64},
		{"flat and slow climbs to the ceiling", 200, flat(time.Second), 400, 200, 200},
		{"a low ceiling holds", 5, flat(10 * time.Millisecond), 50, 5, 5},
		{"latency past 20, 429 past 40", 64, knee(20*time.Millisecond, 20, 40), 1000, 15, 40},
		{"latency past 20, 429 past 40, ceiling 1000", 1000, knee(20*time.Millisecond, 20, 40), 1000, 15, 40},
		{"latency past 50, no 429", 500, knee(5*time.Millisecond, 50, 1<<30), 2000, 40, 90},
		{"429 past 10 at flat latency", 64, knee(10*time.Millisecond, 1000, 10), 1000, 4, 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := NewAdaptiveLimit(tt.ceiling)
			limits := drive(a, tt.model, tt.rounds)
			lo, hi := span(limits[tt.rounds/2:])
			if lo < tt.lo || hi > tt.hi {
				t.Fatalf("limit ranged %d..%d over the last %d rounds, want within %d..%d", lo, hi, tt.rounds/2, tt.lo, tt.hi)
			}
		})
	}
}

func TestAdaptiveLimitCuts(t *testing.T) {
	t.Parallel()
	ok := Result{}
	tests := []struct {
		name string
		r    Result
		cut  bool
	}{
		{"429", Result{Class: ClassHTTP429, Status: 429}, true},
		{"503", Result{Class: ClassHTTP5xx, Status: 503}, true},
		{"timeout", Result{Class: ClassTimeout}, true},
		{"connect timeout", Result{Class: ClassConnectTimeout}, true},
		{"500", Result{Class: ClassHTTP5xx, Status: 500}, false},
		{"400", Result{Class: ClassHTTP4xx, Status: 400}, false},
		{"refused", Result{Class: ClassConnectRefused}, false},
		{"delivered", ok, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := grown(t, 64, 10*time.Millisecond, 3) // 8 → 16 → 32 → 64
			before := a.Limit()
			a.Observe(10*time.Millisecond, tt.r, before)
			got := a.Limit()
			if tt.cut && got >= before {
				t.Fatalf("limit %d after %s, want below %d", got, tt.name, before)
			}
			if !tt.cut && got != before {
				t.Fatalf("limit %d after %s, want %d unchanged", got, tt.name, before)
			}
		})
	}
}

// The answers of the attempts that were in flight when the limit was cut
// do not cut it again: one overload is one cut.
func TestAdaptiveLimitCutsOncePerOverload(t *testing.T) {
	t.Parallel()
	a := grown(t, 64, 10*time.Millisecond, 3)
	tooMany := Result{Class: ClassHTTP429, Status: 429}
	for range 64 {
		a.Observe(time.Millisecond, tooMany, 64)
	}
	if got, want := a.Limit(), 48; got != want {
		t.Fatalf("limit %d after 64 429s of one round at 64, want %d (one cut by a quarter)", got, want)
	}
	// The next round's 429s cut again.
	a.Observe(time.Millisecond, tooMany, 48)
	if got, want := a.Limit(), 36; got != want {
		t.Fatalf("limit %d after a 429 of the next round, want %d", got, want)
	}
}

func TestAdaptiveLimitNeverBelowOne(t *testing.T) {
	t.Parallel()
	a := NewAdaptiveLimit(64)
	for range 100 {
		a.Observe(time.Second, Result{Class: ClassTimeout}, 1)
		if got := a.Limit(); got < 1 {
			t.Fatalf("limit %d", got)
		}
	}
	if got := a.Limit(); got != 1 {
		t.Fatalf("limit %d after 100 timeouts, want 1", got)
	}
	// Rising latency at the floor neither takes it lower.
	drive(a, func(n int) (time.Duration, Result) { return time.Duration(n) * time.Second, Result{} }, 50)
	if got := a.Limit(); got < 1 {
		t.Fatalf("limit %d", got)
	}
	if NewAdaptiveLimit(0).Limit() != 1 {
		t.Fatal("a ceiling of 0 gives a limit below 1")
	}
}

// Latency that rises with the load cuts the limit, though every answer
// succeeds.
func TestAdaptiveLimitCutsOnRisingLatency(t *testing.T) {
	t.Parallel()
	a := grown(t, 64, 10*time.Millisecond, 3)
	drive(a, flat(40*time.Millisecond), 1)
	if got := a.Limit(); got != 64 {
		t.Fatalf("limit %d after one round four times slower, want 64 kept (one slow window may be noise)", got)
	}
	drive(a, flat(40*time.Millisecond), 1)
	if got := a.Limit(); got >= 64 {
		t.Fatalf("limit %d after two rounds four times slower, want below 64", got)
	}
	// A rise within the tolerance is not one.
	b := grown(t, 64, 10*time.Millisecond, 3)
	drive(b, flat(14*time.Millisecond), 5)
	if got := b.Limit(); got != 64 {
		t.Fatalf("limit %d after rounds 40%% slower, want 64 kept", got)
	}
}

// A limit that attempts do not fill does not grow: the receiver's answers
// at a load it did not get say nothing about that load.
func TestAdaptiveLimitGrowsOnlyWhenUsed(t *testing.T) {
	t.Parallel()
	a := NewAdaptiveLimit(64)
	for range 1000 {
		a.Observe(10*time.Millisecond, Result{}, 3)
	}
	if got := a.Limit(); got != 8 {
		t.Fatalf("limit %d after 1000 answers with 3 in flight, want the initial 8", got)
	}
}

// A receiver that becomes slower at any load for good is learnt anew: the
// limit comes down, and then climbs again at the new pace.
func TestAdaptiveLimitLearnsSlowerReceiver(t *testing.T) {
	t.Parallel()
	a := grown(t, 32, 5*time.Millisecond, 10)
	limits := drive(a, flat(50*time.Millisecond), 500)
	if lo, _ := span(limits[:20]); lo >= 32 {
		t.Fatalf("limit never came down after the receiver became ten times slower: %v", limits[:20])
	}
	if got := limits[len(limits)-1]; got != 32 {
		t.Fatalf("limit %d long after the receiver became slower at flat latency, want 32 again", got)
	}
}

func TestAdaptiveLimitCeiling(t *testing.T) {
	t.Parallel()
	a := grown(t, 64, time.Millisecond, 10)
	a.SetCeiling(10)
	if got := a.Limit(); got != 10 {
		t.Fatalf("limit %d after the ceiling was lowered to 10", got)
	}
	if NewAdaptiveLimit(3).Limit() != 3 {
		t.Fatal("the initial limit exceeds a ceiling of 3")
	}
}
