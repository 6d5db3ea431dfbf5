package engine

import (
	"time"

	courier "github.com/courier-gw/courier"
)

// Observer is told what the engine does, for metrics and statistics. Its
// methods are called on the delivery path, from many goroutines: they must
// be quick, safe for concurrent use, and never block.
type Observer interface {
	// AttemptDone is called when an attempt of m (as claimed) on an
	// endpoint has ended, with its result and how long it took, before its
	// outcome is written.
	AttemptDone(m *courier.Message, endpoint string, r courier.Result, d time.Duration)
	// Applied is called for each change the store applied: the outcome of an
	// attempt, a lapsed lease taken up, a timer that fired.
	Applied(c courier.Change)
	// HealthChanged is called after the outcomes of attempts updated an
	// endpoint's health, with the health before and after.
	HealthChanged(endpoint string, before, after courier.EndpointHealth)
	// OutcomeWritten is called for each attempt whose outcome was written,
	// with how long after the receiver's answer (the attempt's end) it was
	// committed: what a crash in between would have sent again.
	OutcomeWritten(wait time.Duration)
}

// NopObserver observes nothing; it is the engine's default.
type NopObserver struct{}

// AttemptDone does nothing.
func (NopObserver) AttemptDone(*courier.Message, string, courier.Result, time.Duration) {}

// Applied does nothing.
func (NopObserver) Applied(courier.Change) {}

// HealthChanged does nothing.
func (NopObserver) HealthChanged(string, courier.EndpointHealth, courier.EndpointHealth) {}

// OutcomeWritten does nothing.
func (NopObserver) OutcomeWritten(time.Duration) {}

// InFlight returns the attempts running on an endpoint on this node. It is
// cheaper than Activity, for scrapes.
func (e *Engine) InFlight(endpoint string) int {
	e.slots.mu.Lock()
	defer e.slots.mu.Unlock()
	return e.slots.running[endpoint]
}
