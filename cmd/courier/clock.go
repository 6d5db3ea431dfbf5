package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/postgres"
	"github.com/prometheus/client_golang/prometheus"
)

// maxClockOffset is how far this node's own clock may be from the
// database's before it says so: courier corrects for any offset, but one
// this large means the machine's time keeping (NTP) is broken.
const maxClockOffset = time.Second

// staleClock is how old the last measurement of the offset may be before
// the node cannot vouch for its clock, and is not ready.
const staleClock = 3 * postgres.ClockInterval

// nodeClock is the clock this node judges time by: its own (baseClock) on
// a store that it keeps alone, the database's as measured from its own on
// PostgreSQL, where every node must judge time alike.
type nodeClock struct {
	courier.Clock
	base   courier.Clock   // the node's own
	db     *postgres.Clock // nil: the node's own clock
	logger *slog.Logger
	mu     sync.Mutex
	off    bool // the last measurement was beyond maxClockOffset
}

// newNodeClock measures the database's clock once, so that nothing runs
// on an unmeasured clock.
func newNodeClock(ctx context.Context, st openedStore, logger *slog.Logger) (*nodeClock, error) {
	c := &nodeClock{Clock: baseClock(), logger: logger}
	c.base = c.Clock
	if st.clock == nil {
		return c, nil
	}
	c.db = st.clock(c.base)
	if err := c.db.Measure(ctx); err != nil {
		return nil, fmt.Errorf("read the database's clock: %w", err)
	}
	c.Clock = c.db
	c.judge(nil)
	return c, nil
}

// run keeps the database's clock measured, in the background, until ctx
// ends.
func (c *nodeClock) run(ctx context.Context) {
	if c.db != nil {
		go c.db.Run(ctx, c.judge)
	}
}

// judge logs a measurement that failed, and the offset when it goes
// beyond maxClockOffset or comes back within it.
func (c *nodeClock) judge(err error) {
	if err != nil {
		c.logger.Warn("could not read the database's clock; this node goes on with the offset it measured last", "err", err)
		return
	}
	offset, uncertainty, _ := c.db.Offset()
	off := offset.Abs() > maxClockOffset
	c.mu.Lock()
	changed := off != c.off
	c.off = off
	c.mu.Unlock()
	switch {
	case off && changed:
		c.logger.Warn("this node's clock is off the database's; courier judges time on the database's clock, but fix this machine's time keeping (NTP)",
			"offset", describeOffset(offset), "uncertainty", uncertainty)
	case changed:
		c.logger.Info("this node's clock is back within a second of the database's", "offset", describeOffset(offset))
	}
}

// ready says what readiness should of the clock: a note while the node's
// own clock is off, an error when its offset was not measured lately.
func (c *nodeClock) ready() ([]string, error) {
	if c.db == nil {
		return nil, nil
	}
	offset, uncertainty, at := c.db.Offset()
	if age := c.base.Now().Sub(at); age > staleClock {
		return nil, fmt.Errorf("this node could not read the database's clock for %s: it cannot judge time as the other nodes do", age.Round(time.Second))
	}
	if offset.Abs() > maxClockOffset {
		return []string{fmt.Sprintf("this node's clock is %s (±%s); it judges time on the database's", describeOffset(offset), uncertainty.Round(time.Microsecond))}, nil
	}
	return nil, nil
}

// collector is the gauge courier_clock_offset_seconds.
func (c *nodeClock) collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "courier_clock_offset_seconds",
		Help: "How far the database's clock is ahead of this node's own (negative: behind), as last measured; courier judges time on the database's. 0 on SQLite."},
		func() float64 {
			if c.db == nil {
				return 0
			}
			offset, _, _ := c.db.Offset()
			return offset.Seconds()
		})
}

// describeOffset says how this node's clock stands to the database's.
func describeOffset(offset time.Duration) string {
	if offset >= 0 {
		return offset.Round(time.Millisecond).String() + " behind the database's"
	}
	return (-offset).Round(time.Millisecond).String() + " ahead of the database's"
}
