// Package startstoptest checks that a service starts and stops safely
// however its Start and Stop are called: many times, from many goroutines
// at once, under the race detector; and runs a service for the length of
// a test.
package startstoptest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/startstop"
)

// Start starts svc and stops it when tb's test ends, failing tb when the
// start fails, or the stop does or takes more than half a minute.
func Start(tb testing.TB, svc startstop.Service) {
	tb.Helper()
	if err := svc.Start(context.Background()); err != nil {
		tb.Fatalf("start %T: %v", svc, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Stop(ctx); err != nil {
			tb.Errorf("stop %T: %v", svc, err)
		}
	})
}

// Stress starts and stops svc from several goroutines at once, many times
// each, and fails tb when a Start or a Stop fails. It leaves svc stopped.
func Stress(tb testing.TB, svc startstop.Service) {
	tb.Helper()
	StressErr(tb, svc, nil)
}

// StressErr is Stress for a service whose Start may fail with allowed (by
// errors.Is) under the stress, such as one that cannot start again.
func StressErr(tb testing.TB, svc startstop.Service, allowed error) {
	tb.Helper()
	const goroutines, rounds = 8, 40
	ctx := context.Background()
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				if err := svc.Start(ctx); err != nil && (allowed == nil || !errors.Is(err, allowed)) {
					tb.Errorf("start: %v", err)
				}
				jitter()
				if err := svc.Stop(ctx); err != nil {
					tb.Errorf("stop: %v", err)
				}
				jitter()
			}
		}()
	}
	wg.Wait()
	if err := svc.Stop(ctx); err != nil {
		tb.Errorf("last stop: %v", err)
	}
}

// jitter pauses for up to a millisecond, or not at all, so that the
// goroutines' starts and stops interleave in many ways.
func jitter() {
	if d := rand.IntN(1200) - 200; d > 0 {
		time.Sleep(time.Duration(d) * time.Microsecond)
	}
}
