// Package sendopts has the options that every transport's sender takes
// alike: a logger, a clock and the timeouts, with their defaults in one
// place, and the attempt timeout that follows from them for an endpoint;
// and the delivery that no sender can send.
package sendopts

import (
	"log/slog"
	"time"

	"github.com/courier-gw/courier"
)

// Defaults of the shared options.
const (
	DefaultTimeout        = courier.DefaultTimeout // the attempt timeout of an endpoint that sets none
	DefaultConnectTimeout = 10 * time.Second       // the most a connect and its handshakes may take
)

// Common points at the shared options in a transport's Options; a
// transport that has no such option leaves its pointer nil.
type Common struct {
	Logger         **slog.Logger
	Clock          *courier.Clock
	DefaultTimeout *time.Duration
	ConnectTimeout *time.Duration
}

// SetDefaults sets every option c points at that is unset to its default:
// slog.Default(), the system clock, DefaultTimeout and
// DefaultConnectTimeout. A duration is unset when it is not positive.
func (c Common) SetDefaults() {
	if c.Logger != nil && *c.Logger == nil {
		*c.Logger = slog.Default()
	}
	if c.Clock != nil {
		*c.Clock = courier.ClockOrSystem(*c.Clock)
	}
	setDuration(c.DefaultTimeout, DefaultTimeout)
	setDuration(c.ConnectTimeout, DefaultConnectTimeout)
}

func setDuration(d *time.Duration, def time.Duration) {
	if d != nil && *d <= 0 {
		*d = def
	}
}

// Timeout is the attempt timeout of e: its own, or def (the transport's
// DefaultTimeout option) when it sets none.
func Timeout(e *courier.Endpoint, def time.Duration) time.Duration {
	if e.Timeout > 0 {
		return e.Timeout
	}
	return def
}

// Unsendable is the result of a delivery that lacks its message or its
// endpoint, which no transport can send; nil for a delivery with both.
func Unsendable(d courier.Delivery) *courier.Result {
	if d.Message == nil || d.Endpoint == nil {
		return &courier.Result{Class: courier.ClassTransport, Error: "delivery without a message or an endpoint"}
	}
	return nil
}
