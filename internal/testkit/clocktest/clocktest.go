// Package clocktest is the one clock of the tests: a courier.Clock that
// stands still until the test sets or advances it (so that output carrying
// the time, such as a webhook's timestamp, a mail's Date header or a
// metric's minute, can be checked), and that the code under test may read
// from any goroutine.
package clocktest

import (
	"sync"
	"time"
)

// Clock tells the time the test gave it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a clock that reads t until it is moved.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Set moves the clock to t, forwards or back.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// Advance moves the clock forwards by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
