package engine_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// outcomeFaults stands between the engine and the store and fails the
// writes of outcomes as fail says: fail(n) is the error of the nth one.
type outcomeFaults struct {
	courier.Store
	mu   sync.Mutex
	n    int
	fail func(n int) error
}

func (f *outcomeFaults) Apply(ctx context.Context, changes []courier.Change) ([]bool, error) {
	for _, c := range changes {
		if c.Attempt != nil && c.From == courier.StateInflight {
			f.mu.Lock()
			f.n++
			err := f.fail(f.n)
			f.mu.Unlock()
			if err != nil {
				return nil, err
			}
			break
		}
	}
	return f.Store.Apply(ctx, changes)
}

func (f *outcomeFaults) writes() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// givenUp is a log handler that closes its channel at the line of outcomes
// given up.
type givenUp struct {
	slog.Handler
	once sync.Once
	ch   chan struct{}
}

func (g *givenUp) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "outcomes could not be written; their messages will be delivered again when the leases lapse" {
		g.once.Do(func() { close(g.ch) })
	}
	return nil
}

func (g *givenUp) Enabled(context.Context, slog.Level) bool { return true }

// While the store is unavailable, the outcome is written again until it
// takes.
func TestOutcomeRetriedWhileStoreUnavailable(t *testing.T) {
	faults := &outcomeFaults{fail: func(n int) error {
		if n <= 2 {
			return courier.Unavailable("the store", errors.New("connection lost"))
		}
		return nil
	}}
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		h.wrap = func(s courier.Store) courier.Store { faults.Store = s; return faults }
	})
	h.send("a", "invoice", "acme")
	m := h.waitState("a", courier.StateDelivered)
	if m.Attempts != 1 {
		t.Errorf("attempts = %d, want the one whose outcome was written at the third try", m.Attempts)
	}
	if got := faults.writes(); got != 3 {
		t.Errorf("outcome writes = %d, want 3", got)
	}
}

// An internal failure is not tried again for ten minutes: the outcome is
// given up at once (the message is delivered again when its lease lapses).
func TestOutcomeNotRetriedOnInternalError(t *testing.T) {
	faults := &outcomeFaults{fail: func(n int) error {
		if n == 1 {
			return errors.New("a constraint that should hold does not")
		}
		return nil
	}}
	logged := &givenUp{Handler: slog.DiscardHandler, ch: make(chan struct{})}
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		h.wrap = func(s courier.Store) courier.Store { faults.Store = s; return faults }
		h.logger = slog.New(logged)
	})
	h.send("a", "invoice", "acme")
	select {
	case <-logged.ch:
	case <-time.After(30 * time.Second):
		t.Fatalf("the outcome was not given up; %d writes of it", faults.writes())
	}
	if got := faults.writes(); got != 1 {
		t.Errorf("outcome writes = %d when given up, want 1", got)
	}
}
