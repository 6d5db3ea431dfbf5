package startstop_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/startstop"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
)

// worker is the smallest service: one goroutine per run, which ends with
// the run's Ctx unless hold keeps it until its Life ends.
type worker struct {
	startstop.Base
	runs    atomic.Int64 // runs begun
	running atomic.Int64 // goroutines under way
	hold    bool
}

func (w *worker) Start(ctx context.Context) error {
	run, ok := w.StartInit(ctx)
	if !ok {
		return ctx.Err()
	}
	w.runs.Add(1)
	if w.running.Add(1) != 1 {
		panic("two runs at once")
	}
	go func() {
		defer run.Stopped()
		defer w.running.Add(-1)
		if w.hold {
			<-run.Life.Done()
			return
		}
		<-run.Ctx.Done()
	}()
	return nil
}

func TestStress(t *testing.T) {
	w := &worker{}
	startstoptest.Stress(t, w)
	if got := w.running.Load(); got != 0 {
		t.Errorf("goroutines under way after the last stop: %d", got)
	}
	if w.runs.Load() < 2 {
		t.Errorf("runs = %d, want it started again after a stop", w.runs.Load())
	}
}

func TestStartTwiceRunsOnce(t *testing.T) {
	w := &worker{}
	for range 3 {
		if err := w.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.runs.Load(); got != 1 {
		t.Errorf("runs = %d, want 1", got)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := w.running.Load(); got != 0 {
		t.Errorf("goroutines under way after Stop returned: %d", got)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Errorf("second stop: %v", err)
	}
}

func TestStopOutOfTimeCutsOff(t *testing.T) {
	w := &worker{hold: true}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Stop(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("stop = %v, want the context's error", err)
	}
	// Cut off, the run ends by itself; a Start waits for that and starts
	// again.
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := w.runs.Load(); got != 2 {
		t.Errorf("runs = %d, want 2", got)
	}
	stopped, cutOff, ok := w.StopInit()
	if !ok {
		t.Fatal("StopInit reports no run under way")
	}
	cutOff()
	<-stopped
}

func TestStartAfterCancelledStart(t *testing.T) {
	w := &worker{}
	ctx, cancel := context.WithCancel(context.Background())
	if err := w.Start(ctx); err != nil {
		t.Fatal(err)
	}
	cancel() // the run's Ctx ends with the start's context; it still waits for Stop
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := w.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer w.Stop(context.Background())
	if got := w.runs.Load(); got != 2 {
		t.Errorf("runs = %d, want 2", got)
	}
}

func TestEveryCallsUntilCtxEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	startstop.Every(ctx, 0, time.Millisecond, func(ctx context.Context) {
		if calls++; calls == 3 {
			cancel()
		}
	})
	if calls != 3 {
		t.Errorf("calls = %d, want 3: none after ctx ended", calls)
	}
}

func TestEveryFirstCallAtOnce(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	called := make(chan struct{})
	go startstop.Every(ctx, 0, time.Hour, func(context.Context) { close(called) })
	<-called // an hour's interval comes after the first call, not before it
	cancel()
}

func TestStartWorkStopsWhenWorkReturns(t *testing.T) {
	var w struct{ startstop.Base }
	started := make(chan struct{}, 2)
	var running atomic.Int64
	work := func(ctx context.Context) {
		running.Add(1)
		defer running.Add(-1)
		started <- struct{}{}
		<-ctx.Done()
	}
	if err := w.StartWork(context.Background(), work, work); err != nil {
		t.Fatal(err)
	}
	<-started
	<-started
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := running.Load(); got != 0 {
		t.Errorf("work under way after Stop returned: %d", got)
	}
	// Stopped, it starts again.
	if err := w.StartWork(context.Background(), work); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestSleepEndsWithCtx(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	if !startstop.Sleep(ctx, 0) || !startstop.Sleep(ctx, time.Millisecond) {
		t.Error("Sleep with ctx going: false, want true")
	}
	cancel()
	if startstop.Sleep(ctx, time.Hour) || startstop.Sleep(ctx, 0) {
		t.Error("Sleep with ctx ended: true, want false")
	}
}
