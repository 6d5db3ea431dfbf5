package engine

import (
	"maps"
	"slices"
	"time"

	courier "github.com/courier-gw/courier"
)

// A tenant deleted from the topology (docs/design.md §20, Erasing a
// tenant) leaves nothing in the engine: its routes' lanes go as any removed
// route's, and the tenant's place in the fair-share ring, the health, pace,
// slots and activity of its endpoints go with it. An attempt of its under
// way when it went finishes, but changes nothing that is the tenant's:
// the store no longer has its message (the outcome is not applied) and
// its endpoint's health is neither written nor kept, so that nothing of
// the tenant comes back into the store behind its erasure.

// goneTenants returns the tenants of before that after does not have.
func goneTenants(before, after *courier.Topology) map[string]bool {
	gone := map[string]bool{}
	if before == nil {
		return gone
	}
	for name := range before.Tenants {
		if after.Tenants[name] == nil {
			gone[name] = true
		}
	}
	return gone
}

// tenantGone reports whether the topology lacks the tenant of a qualified
// name (an endpoint's): the default and system tenants always exist.
func tenantGone(t *courier.Topology, name string) bool {
	tn := courier.TenantOf(name)
	return tn != courier.DefaultTenant && tn != courier.SystemTenant && t.Tenants[tn] == nil
}

// forgetTenants drops what the engine keeps of the endpoints of the
// tenants gone, and the tenants' turns.
func (e *Engine) forgetTenants(gone map[string]bool) {
	of := func(name string) bool { return gone[courier.TenantOf(name)] }
	e.health.mu.Lock()
	maps.DeleteFunc(e.health.m, func(name string, _ courier.EndpointHealth) bool { return of(name) })
	e.health.mu.Unlock()
	e.steady.mu.Lock()
	maps.DeleteFunc(e.steady.steady, func(name string, _ bool) bool { return of(name) })
	maps.DeleteFunc(e.steady.written, func(name string, _ uint64) bool { return of(name) })
	e.steady.mu.Unlock()
	e.pace.mu.Lock()
	maps.DeleteFunc(e.pace.times, func(name string, _ time.Time) bool { return of(name) })
	maps.DeleteFunc(e.pace.last, func(name string, _ time.Time) bool { return of(name) })
	e.pace.mu.Unlock()
	e.activity.mu.Lock()
	maps.DeleteFunc(e.activity.endpoints, func(name string, _ *[60]bucket) bool { return of(name) })
	e.activity.mu.Unlock()
	e.slots.mu.Lock()
	// The holds in a shared store go with the tenant's erasure (or lapse);
	// the attempts running keep their count until they end.
	maps.DeleteFunc(e.slots.held, func(name string, _ int) bool { return of(name) })
	maps.DeleteFunc(e.slots.peak, func(name string, _ int) bool { return of(name) })
	maps.DeleteFunc(e.slots.hungry, func(name string, _ bool) bool { return of(name) })
	maps.DeleteFunc(e.slots.retryAt, func(name string, _ time.Time) bool { return of(name) })
	e.slots.mu.Unlock()
	e.lanes.forgetTenants(gone)
}

// forgetTenants drops the tenants gone from the ring, and from the uses of
// the endpoints (the system's) they shared, with the uses of their own
// endpoints. Their lanes were forgotten with their routes; a tenant with a
// lane under a claim is dropped when the last such claim ends (dropGone).
func (ls *lanes) forgetTenants(gone map[string]bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.forgetTenantsLocked(gone)
}

func (ls *lanes) forgetTenantsLocked(gone map[string]bool) {
	for name, u := range ls.users {
		if gone[courier.TenantOf(name)] {
			delete(ls.users, name)
			continue
		}
		maps.DeleteFunc(u, func(tenant string, _ time.Time) bool { return gone[tenant] })
	}
	kept := map[string]bool{}
	for _, l := range ls.byName {
		kept[courier.TenantOf(l.route)] = true
	}
	for name, tl := range ls.tenants {
		if !gone[name] {
			continue
		}
		if kept[name] || tl.wanting > 0 {
			if ls.goneTenants == nil {
				ls.goneTenants = map[string]bool{}
			}
			ls.goneTenants[name] = true
			continue
		}
		delete(ls.goneTenants, name)
		delete(ls.tenants, name)
		if i := slices.Index(ls.ring, tl); i >= 0 {
			ls.ring = slices.Delete(ls.ring, i, i+1)
			if i < ls.cur {
				ls.cur--
			}
		}
	}
	if ls.cur >= len(ls.ring) {
		ls.cur = 0
	}
}
