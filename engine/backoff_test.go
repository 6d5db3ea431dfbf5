package engine

import (
	"errors"
	"log/slog"
	"testing"
	"time"
)

func TestBackoffDoublesUpToItsMax(t *testing.T) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var b backoff
	var got []time.Duration
	for range 10 {
		got = append(got, b.after(timer))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 6400, 10000, 10000, 10000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("pauses %v, want %v ms", got, want)
		}
	}
	if !b.settle(nil, timer, nil, "") {
		t.Fatal("settle took a success for a failure")
	}
	if d := b.after(timer); d != 100*time.Millisecond {
		t.Errorf("after a success the first pause is %v, want 100ms", d)
	}
	if b.settle(errors.New("store down"), timer, slog.New(slog.DiscardHandler), "failed") || time.Duration(b) != 200*time.Millisecond {
		t.Errorf("after a failure: pause %v, want 200ms and the loop told to wait", time.Duration(b))
	}
}
