package api

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// TestLimiterSteps walks one key's bucket through steps at given offsets
// from a start: each step takes n tokens and is let through or refused
// with the given Retry-After.
func TestLimiterSteps(t *testing.T) {
	type step struct {
		at    time.Duration
		n     int
		retry string // "" lets the step through
	}
	for _, tt := range []struct {
		name  string
		rate  courier.Rate
		steps []step
	}{
		{"a full bucket, then one token per 20 s", courier.Rate{N: 3, Per: time.Minute}, []step{
			{0, 1, ""}, {0, 1, ""}, {0, 1, ""}, {0, 1, "20"}, {19 * time.Second, 1, "1"}, {20 * time.Second, 1, ""},
		}},
		{"a refusal takes no token", courier.Rate{N: 1, Per: time.Minute}, []step{
			{0, 1, ""}, {30 * time.Second, 1, "30"}, {30 * time.Second, 1, "30"}, {time.Minute, 1, ""},
		}},
		{"a batch larger than the bucket goes through in debt", courier.Rate{N: 2, Per: 2 * time.Second}, []step{
			{0, 7, ""}, {0, 1, "6"}, {5 * time.Second, 1, "1"}, {6 * time.Second, 5, ""}, {6 * time.Second, 1, "5"},
		}},
		{"a rate that is no whole number of seconds a token", courier.Rate{N: 7, Per: time.Minute}, []step{
			{0, 7, ""}, {0, 1, "9"}, {8 * time.Second, 1, "1"}, {time.Minute, 8, ""}, {time.Minute, 1, "18"},
		}},
		{"time that goes back refuses nothing it should not", courier.Rate{N: 1, Per: time.Second}, []step{
			{time.Hour, 1, ""}, {0, 1, "1"}, {time.Hour + time.Second, 1, ""},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var l limiter
			k := &Key{Name: "erp", Rate: tt.rate}
			start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			for i, s := range tt.steps {
				err := l.take(k, start.Add(s.at), s.n)
				if got := retryAfter(err); got != s.retry || (s.retry == "") != (err == nil) {
					t.Fatalf("step %d (%v, %d): %v, Retry-After %q; want %q", i, s.at, s.n, err, got, s.retry)
				}
			}
		})
	}
}

// TestLimiterKeysAndReload: each key has its own bucket, a key without a
// rate is not limited, and a key whose rate changes starts full.
func TestLimiterKeysAndReload(t *testing.T) {
	var l limiter
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	erp := &Key{Name: "erp", Rate: courier.Rate{N: 1, Per: time.Hour}}
	if err := l.take(erp, now, 1); err != nil {
		t.Fatal(err)
	}
	if l.take(erp, now, 1) == nil {
		t.Fatal("erp's second message in the hour went through")
	}
	if err := l.take(&Key{Name: "shop", Rate: erp.Rate}, now, 1); err != nil {
		t.Errorf("shop limited by erp's bucket: %v", err)
	}
	if err := l.take(&Key{Name: "free"}, now, 1000); err != nil {
		t.Errorf("a key without a rate: %v", err)
	}
	if err := l.take(nil, now, 1000); err != nil {
		t.Errorf("no key: %v", err)
	}
	reloaded := &Key{Name: "erp", Rate: courier.Rate{N: 2, Per: time.Hour}}
	if err := l.take(reloaded, now, 1); err != nil {
		t.Errorf("erp after its rate changed: %v", err)
	}
}
