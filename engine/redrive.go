package engine

import (
	"context"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// Redrive lets the engine start, on bulk, the re-drives of routes with
// redrive.on_recovery when one of their endpoints recovers, and pace them
// (courier.RedrivePace) by the endpoint's limits and health. Call it
// before bulk's Start, so that the re-drives it resumes are paced too.
func (e *Engine) Redrive(bulk *Bulk) {
	e.bulk.Store(bulk)
	bulk.Pace(e.paceRedrive)
}

// redrive starts the re-drive of each route of the endpoint that re-drives
// on its recovery at the time. The operation's id comes from the
// recovery, so that nodes that see the same one start one operation.
func (e *Engine) redrive(endpoint string, recovered time.Time) {
	bulk := e.bulk.Load()
	if bulk == nil {
		return
	}
	t := e.topology.Load()
	for _, name := range t.RoutesOf(endpoint) {
		op, ok := t.Routes[name].RedriveOp(endpoint, recovered)
		if !ok {
			continue
		}
		ctx, cancel := context.WithTimeout(e.life, eventTimeout)
		got, err := bulk.Begin(ctx, op)
		cancel()
		if err != nil {
			e.logger.Warn("could not start the re-drive of a route after its endpoint's recovery", "route", name, "endpoint", endpoint, "operation", op.ID, "err", err)
			continue
		}
		e.logger.Info("re-drive after an endpoint's recovery", "route", name, "endpoint", endpoint, "operation", got.ID, "done", got.Done)
	}
}

// paceRedrive decides the next batch of a re-drive as RedrivePace does,
// waiting while there is no room for one; other operations take bulkBatch
// messages at a time.
func (e *Engine) paceRedrive(ctx context.Context, op courier.BulkOp) (int, string, error) {
	if op.Redrive == nil {
		return bulkBatch, "", nil
	}
	name := op.Redrive.Endpoint
	for {
		if err := e.refreshHealth(ctx, false); err != nil {
			return 0, "", err
		}
		h := e.health.get(name)
		h.Endpoint = name
		queued, err := e.store.CountQueued(ctx, []string{op.Filter.Route})
		if err != nil {
			return 0, "", err
		}
		t := e.topology.Load()
		limit, stop := courier.RedrivePace(t.Routes[op.Filter.Route], t.Endpoints[name], h, queued)
		if limit > 0 || stop != "" {
			return limit, stop, nil
		}
		if !startstop.Sleep(ctx, e.opts.PollInterval) {
			return 0, "", ctx.Err()
		}
	}
}
