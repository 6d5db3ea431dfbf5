package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// Clock is the one clock of the nodes that share a database: the
// database's, as this node reads it from its own clock (base) and base's
// offset from the database's, measured at start and every ClockInterval
// while Run runs. Every node judges what is due, when a lease lapses and
// when a retry may start on it, so nodes whose own clocks disagree still
// agree (docs/design.md §11).
type Clock struct {
	store *Store
	base  courier.Clock
	// offset is the database's clock minus base's, read on every Now
	// without a lock.
	offset atomic.Int64

	mu          sync.Mutex
	uncertainty time.Duration // half the round trip of the best reading
	measuredAt  time.Time     // on base; zero: never
}

// ClockInterval is how often Run measures the offset again.
const ClockInterval = 10 * time.Second

// clockReadings is how many readings a measurement takes; the one with
// the shortest round trip is kept, as it bounds the error best.
const clockReadings = 5

// Clock returns the database's clock as read from base. Measure it before
// use; Run keeps it measured.
func (s *Store) Clock(base courier.Clock) *Clock {
	return &Clock{store: s, base: base}
}

// Now is base's time corrected by its offset from the database's.
func (c *Clock) Now() time.Time {
	return c.base.Now().Add(time.Duration(c.offset.Load()))
}

// Offset returns how far the database's clock is ahead of base (negative:
// behind), within uncertainty, as last measured at (on base; zero: never).
func (c *Clock) Offset() (offset, uncertainty time.Duration, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Duration(c.offset.Load()), c.uncertainty, c.measuredAt
}

// Measure reads the database's clock a few times, each between two
// readings of base, and keeps the offset of the reading with the shortest
// round trip (its midpoint is nearest the database's reading).
func (c *Clock) Measure(ctx context.Context) error {
	conn, err := c.store.pool.Acquire(ctx)
	if err != nil {
		return classify("read the database's clock", err)
	}
	defer conn.Release()
	best := time.Duration(-1)
	var offset time.Duration
	for range clockReadings {
		var db time.Time
		t0 := c.base.Now()
		if err := conn.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
			return classify("read the database's clock", err)
		}
		t1 := c.base.Now()
		rtt := t1.Sub(t0)
		if best < 0 || rtt < best {
			best, offset = rtt, db.Sub(t0.Add(rtt/2))
		}
	}
	c.mu.Lock()
	c.offset.Store(int64(offset))
	c.uncertainty, c.measuredAt = best/2, c.base.Now()
	c.mu.Unlock()
	return nil
}

// Run measures the offset every ClockInterval until ctx ends; measured,
// if set, hears of each measurement or failure.
func (c *Clock) Run(ctx context.Context, measured func(err error)) {
	startstop.Every(ctx, ClockInterval, ClockInterval, func(ctx context.Context) {
		err := c.Measure(ctx)
		if measured != nil && ctx.Err() == nil {
			measured(err)
		}
	})
}
