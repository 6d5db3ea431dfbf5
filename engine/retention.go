package engine

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// Retention deletes terminal messages older than the retention period, a
// small batch at a time so that it never holds the store for long.
type Retention struct {
	store    courier.Store
	period   time.Duration
	interval time.Duration
	batch    int
	clock    courier.Clock
	logger   *slog.Logger
	tenants  func() map[string]*courier.Tenant

	startstop.Base // sweeps between Start and Stop
}

// RetentionOptions tune a Retention; the zero value is usable.
type RetentionOptions struct {
	Interval time.Duration // pause between sweeps (default 1 minute)
	Batch    int           // messages per delete (default 500)
	Clock    courier.Clock
	Logger   *slog.Logger
	// Tenants, if set, gives the tenants in force (the topology's): those
	// with a retention of their own keep their finished messages that
	// long, the others the period's.
	Tenants func() map[string]*courier.Tenant
}

// NewRetention returns a purge of the terminal messages in store that
// finished more than period ago.
func NewRetention(store courier.Store, period time.Duration, o RetentionOptions) *Retention {
	r := &Retention{store: store, period: period, interval: o.Interval, batch: o.Batch, clock: o.Clock, logger: o.Logger, tenants: o.Tenants}
	if r.interval <= 0 {
		r.interval = time.Minute
	}
	if r.batch <= 0 {
		r.batch = 500
	}
	r.clock = courier.ClockOrSystem(r.clock)
	r.logger = courier.LoggerOrDiscard(r.logger)
	return r
}

// Start begins sweeping in the background. Stop ends the sweeping and
// waits for a sweep under way to finish its batch.
func (r *Retention) Start(ctx context.Context) error {
	return r.StartWork(ctx, func(ctx context.Context) {
		startstop.Every(ctx, 0, r.interval, func(ctx context.Context) { r.Sweep(ctx) })
	})
}

// Sweep purges batches until none is full or ctx ends, and returns how many
// messages it removed: first of each tenant with a retention of its own,
// then of all the others.
func (r *Retention) Sweep(ctx context.Context) int {
	now := r.clock.Now()
	var own map[string]*courier.Tenant
	if r.tenants != nil {
		own = r.tenants()
	}
	total := 0
	var except []string
	for _, name := range slices.Sorted(maps.Keys(own)) {
		if tn := own[name]; tn.Retention > 0 {
			total += r.purge(ctx, courier.Purge{Before: now.Add(-tn.Retention), Tenant: name})
			except = append(except, name)
		}
	}
	total += r.purge(ctx, courier.Purge{Before: now.Add(-r.period), Except: except})
	r.sweepBlobs(ctx)
	return total
}

// purge purges the messages p takes, a batch at a time, until a batch is
// not full or ctx ends, and returns how many it removed.
func (r *Retention) purge(ctx context.Context, p courier.Purge) int {
	total := 0
	for ctx.Err() == nil {
		n, err := r.store.Purge(ctx, p, r.batch)
		total += n
		if err != nil {
			if ctx.Err() == nil {
				r.logger.Warn("retention purge failed; will try again", "tenant", p.Tenant, "err", err)
			}
			break
		}
		if n < r.batch {
			break
		}
	}
	if total > 0 {
		r.logger.Info("purged terminal messages past retention", "count", total, "cutoff", p.Before, "tenant", p.Tenant)
	}
	return total
}

// sweepBlobs removes the blobs no message refers to any more: those of the
// messages just purged, and what uploads cut off by a crash left behind.
// The first sweep runs at start.
func (r *Retention) sweepBlobs(ctx context.Context) {
	blobs := r.store.Blobs()
	if blobs == nil || ctx.Err() != nil {
		return
	}
	n, err := blobs.Sweep(ctx, r.store.ReferencedBlobs)
	switch {
	case err != nil && ctx.Err() == nil:
		r.logger.Warn("removing unreferenced blobs failed; will try again", "err", err)
	case n > 0:
		r.logger.Info("removed blobs no message refers to", "count", n)
	}
}
