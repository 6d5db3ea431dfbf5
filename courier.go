// Package courier is the domain of a durable delivery gateway: messages, their
// states and error classes, endpoints, routes and policies, the pure decisions
// made about them, and the small interfaces that the stores, transports and
// servers in the sub-packages implement.
//
// The package does no I/O. Everything here is a function of its inputs
// (state, outcome, clock), so it is tested with tables and a fake clock.
package courier

import (
	"log/slog"
	"time"
)

// Clock tells the time. Services take one from their constructor so that
// tests can drive time by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the wall clock.
type SystemClock struct{}

// Now returns the current time.
func (SystemClock) Now() time.Time { return time.Now() }

// ClockOrSystem returns c, or the system clock when c is nil: the clock of
// a service given none.
func ClockOrSystem(c Clock) Clock {
	if c == nil {
		return SystemClock{}
	}
	return c
}

// LoggerOrDiscard returns l, or a logger that drops every record when l is
// nil: the logger of a service given none.
func LoggerOrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
