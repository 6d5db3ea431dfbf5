// Package clocktest has the clock of tests whose output carries the time:
// a webhook's timestamp, a mail's Date header, a metric's minute.
package clocktest

import (
	"time"

	"github.com/courier-gw/courier"
)

// Fixed is a clock that always tells the same time.
type Fixed time.Time

var _ courier.Clock = Fixed{}

// Now returns the fixed time.
func (c Fixed) Now() time.Time { return time.Time(c) }
