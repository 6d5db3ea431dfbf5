package engine

import (
	"context"
	"sync"

	courier "github.com/courier-gw/courier"
)

// orphans remembers which routes with queued messages the topology lacked
// at the last look, so that the periodic look suspends only what stayed
// unknown between two looks: a route another node has just created, and
// this node has not yet heard of, is not taken for a removed one.
type orphans struct {
	mu     sync.Mutex
	looked bool
	last   map[string]bool
}

// suspendOrphans is the periodic look (and the first, at start): queued
// messages of routes the topology does not have, or of a workflow route
// itself, are suspended no_route once the route was unknown at the look
// before too. The first look suspends at once: at start the topology is
// read whole, so an unknown route is gone, not new.
func (e *Engine) suspendOrphans(ctx context.Context) error {
	routes, err := e.store.QueuedRoutes(ctx)
	if err != nil {
		return err
	}
	t := e.topology.Load()
	e.orphans.mu.Lock()
	prev, first := e.orphans.last, !e.orphans.looked
	unknown := map[string]bool{}
	var due []string
	for _, r := range routes {
		if unclaimable(t, r) {
			unknown[r] = true
			if first || prev[r] {
				due = append(due, r)
			}
		}
	}
	e.orphans.last, e.orphans.looked = unknown, true
	e.orphans.mu.Unlock()
	return e.suspendRoutes(ctx, t, due)
}

// suspendRemovedRoutes suspends the queued messages of the routes a new
// topology removed from the one before it, and of its workflow routes
// (queued there only by mistake: a resubmit, or a route that became a
// workflow). Workflow routes are few, and known to this node, so looking
// at them each time is cheap and safe; routes it does not know may be
// another node's new ones, which the periodic look leaves for a while.
func (e *Engine) suspendRemovedRoutes(ctx context.Context, before, after *courier.Topology) error {
	var removed []string
	for name := range before.Routes {
		if after.Route(name) == nil {
			removed = append(removed, name)
		}
	}
	for name, r := range after.Routes {
		if r.Workflow != nil {
			removed = append(removed, name)
		}
	}
	return e.suspendRoutes(ctx, after, removed)
}

// unclaimable reports whether nothing would ever claim queued messages of
// a route: the topology lacks it, or it is a workflow route, whose
// messages go by its steps' routes from the moment they are sent (one
// that came there another way, resubmitted or by a route that became a
// workflow, goes to the operator).
func unclaimable(t *courier.Topology, route string) bool {
	rt := t.Route(route)
	return rt == nil || rt.Workflow != nil
}

// suspendRoutes suspends, with reason no_route, the queued messages of
// routes nobody would claim, so that an operator can resubmit them to a
// route that exists.
func (e *Engine) suspendRoutes(ctx context.Context, t *courier.Topology, routes []string) error {
	for _, r := range routes {
		why := "route " + r + " is no longer configured; resubmit to a route that is"
		if rt := t.Route(r); rt != nil && rt.Workflow != nil {
			why = "route " + r + " is a workflow route, which messages enter only when they are sent; send it again, or resubmit it to another route"
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
