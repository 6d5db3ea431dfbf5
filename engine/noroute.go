package engine

import (
	"context"

	courier "github.com/courier-gw/courier"
)

// suspendRemovedRoutes suspends, with reason no_route, the queued messages
// of routes the topology no longer has: nobody would ever claim them, and an
// operator can resubmit them to a route that exists.
func (e *Engine) suspendRemovedRoutes(ctx context.Context) error {
	routes, err := e.store.QueuedRoutes(ctx)
	if err != nil {
		return err
	}
	t := e.topology.Load()
	for _, r := range routes {
		if t.Route(r) != nil {
			continue
		}
		n, err := e.store.SuspendRoute(ctx, r, courier.ReasonNoRoute,
			"route "+r+" is no longer configured; resubmit to a route that is", e.clock.Now())
		if err != nil {
			return err
		}
		if n > 0 {
			e.logger.Warn("suspended the messages of a removed route", "route", r, "count", n, "reason", courier.ReasonNoRoute)
		}
	}
	return nil
}
