// Package startstop is the start and stop of courier's background services,
// written once: a service embeds Base, which guards against a double start,
// hands each run the contexts it works under, and lets Stop cancel and wait,
// whoever calls Start and Stop, as often and as concurrently as they like.
// Every is the loop of a service that works every so often, and Sleep its
// wait, which ends with the run.
package startstop

import (
	"context"
	"sync"
	"time"
)

// Service is a part of the server that works in the background: Start
// begins its work and returns; Stop ends it, letting the work under way
// finish until ctx ends, and then cutting it off.
type Service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// Base is embedded in a service to start and stop it. Its zero value is a
// stopped service. A service's Start calls StartInit and, when it reports a
// new run, launches its work under the run's contexts and calls
// Run.Stopped once all of that work has returned; Stop is Base's, or the
// service's own built on StopInit.
type Base struct {
	mu      sync.Mutex
	run     *Run // nil while stopped
	stopped chan struct{}
}

// Run is one run of a service, from StartInit to its Stopped.
type Run struct {
	// Ctx ends at Stop: the service takes up no new work.
	Ctx context.Context
	// Life ends when a Stop runs out of time, and at the end of the run:
	// the work still under way is cut off, as at a crash.
	Life context.Context

	cancel, kill context.CancelFunc
	stopping     bool
	once         sync.Once
	base         *Base
	stopped      chan struct{}
}

// StartInit begins a run, unless one is under way: then it reports false
// (and a Start returns at once, the service running). A run being stopped
// is waited for, so that a Start after a Stop starts again; false too when
// ctx ends meanwhile. The run's contexts carry ctx's values, and Ctx its
// cancellation.
func (b *Base) StartInit(ctx context.Context) (*Run, bool) {
	for {
		b.mu.Lock()
		r := b.run
		if r == nil {
			r = &Run{base: b, stopped: make(chan struct{})}
			r.Ctx, r.cancel = context.WithCancel(ctx)
			r.Life, r.kill = context.WithCancel(context.WithoutCancel(ctx))
			b.run = r
			b.mu.Unlock()
			return r, true
		}
		stopping, stopped := r.stopping, r.stopped
		b.mu.Unlock()
		if !stopping {
			return nil, false
		}
		select {
		case <-stopped:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// Stopped tells that the run's work has all returned: it ends the run, and
// the service may start again. Called more than once, it does nothing more.
func (r *Run) Stopped() {
	r.once.Do(func() {
		b := r.base
		b.mu.Lock()
		defer b.mu.Unlock()
		r.stopping = true
		r.cancel()
		r.kill()
		b.run = nil
		close(r.stopped)
	})
}

// StopInit begins a stop: it ends the run's Ctx and returns a channel
// closed once the run has stopped and a func that cuts the run's work off
// (ends its Life). It reports false when no run is under way. Several
// stops of one run all wait for it.
func (b *Base) StopInit() (stopped <-chan struct{}, cutOff func(), ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.run
	if r == nil {
		return nil, nil, false
	}
	r.stopping = true
	r.cancel()
	return r.stopped, r.kill, true
}

// Stop ends the run's Ctx and waits until it has stopped or ctx ends; then
// it cuts the work still under way off and returns ctx's error. A service
// that is not running stops at once.
func (b *Base) Stop(ctx context.Context) error {
	stopped, cutOff, ok := b.StopInit()
	if !ok {
		return nil
	}
	return WaitOrCutOff(ctx, stopped, cutOff)
}

// WaitOrCutOff waits until done is closed; when ctx ends first, it calls
// cutOff and returns ctx's error.
func WaitOrCutOff(ctx context.Context, done <-chan struct{}, cutOff func()) error {
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		cutOff()
		return ctx.Err()
	}
}

// StartWork starts a run whose work is the funcs given, each on a
// goroutine of its own under the run's Ctx; the run stops once they have
// all returned. A run under way is left as it is.
func (b *Base) StartWork(ctx context.Context, work ...func(ctx context.Context)) error {
	run, ok := b.StartInit(ctx)
	if !ok {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for _, w := range work {
		wg.Go(func() { w(run.Ctx) })
	}
	go func() {
		wg.Wait()
		run.Stopped()
	}()
	return nil
}

// Every calls fn again and again until ctx ends, and never after: the
// first time once first has passed (at once when it is 0), then each time
// interval after the last call returned, so that a slow call never has
// the next one follow on its heels.
func Every(ctx context.Context, first, interval time.Duration, fn func(ctx context.Context)) {
	for wait := first; Sleep(ctx, wait); wait = interval {
		fn(ctx)
	}
}

// Sleep waits for d, or until ctx ends; it reports whether the whole time
// passed with ctx still going.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}
