package engine

import (
	"context"

	courier "github.com/courier-gw/courier"
)

// suspendRemovedRoutes suspends, with reason no_route, the queued messages
// of routes the topology no longer has (or of a workflow route itself):
// nobody would ever claim them, and an operator can resubmit them to a
// route that exists.
func (e *Engine) suspendRemovedRoutes(ctx context.Context) error {
	routes, err := e.store.QueuedRoutes(ctx)
	if err != nil {
		return err
	}
	t := e.topology.Load()
	for _, r := range routes {
		why := "route " + r + " is no longer configured; resubmit to a route that is"
		switch rt := t.Route(r); {
		case rt == nil:
		case rt.Workflow != nil:
			// Nothing claims a workflow route itself: its messages go by
			// its steps' routes from the moment they are sent. One that
			// came here another way (resubmitted, or a route that became a
			// workflow in a reload) goes to the operator.
			why = "route " + r + " is a workflow route, which messages enter only when they are sent; send it again, or resubmit it to another route"
		default:
			continue
		}
		n, err := e.store.SuspendRoute(ctx, r, courier.ReasonNoRoute, why, e.clock.Now())
		if err != nil {
			return err
		}
		if n > 0 {
			e.logger.Warn("suspended the messages of a removed route", "route", r, "count", n, "reason", courier.ReasonNoRoute)
		}
	}
	return nil
}
