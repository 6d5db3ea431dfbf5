package engine

import (
	"iter"
	"maps"

	courier "github.com/courier-gw/courier"
)

// HealthMaxAge is healthMaxAge, for the tests of the bound it sets.
const HealthMaxAge = healthMaxAge

// TenantState lists what the engine keeps of a tenant: the names of its
// endpoints and routes, and the tenant's own name, wherever they are kept.
func (e *Engine) TenantState(tenant string) []string {
	var out []string
	of := func(where string, names iter.Seq[string]) {
		for name := range names {
			if courier.TenantOf(name) == tenant {
				out = append(out, where+" "+name)
			}
		}
	}
	e.health.mu.Lock()
	of("health", maps.Keys(e.health.m))
	e.health.mu.Unlock()
	e.steady.mu.Lock()
	of("steady", maps.Keys(e.steady.steady))
	of("written", maps.Keys(e.steady.written))
	e.steady.mu.Unlock()
	e.pace.mu.Lock()
	of("pace", maps.Keys(e.pace.times))
	of("pace", maps.Keys(e.pace.last))
	e.pace.mu.Unlock()
	e.activity.mu.Lock()
	of("activity", maps.Keys(e.activity.endpoints))
	e.activity.mu.Unlock()
	e.slots.mu.Lock()
	of("slots", maps.Keys(e.slots.running))
	of("slots", maps.Keys(e.slots.waiting))
	of("slots", maps.Keys(e.slots.held))
	of("hungry", maps.Keys(e.slots.hungry))
	of("retry", maps.Keys(e.slots.retryAt))
	of("adaptive", maps.Keys(e.slots.adaptive))
	e.slots.mu.Unlock()
	e.lanes.mu.Lock()
	of("lane", maps.Keys(e.lanes.byName))
	of("users", maps.Keys(e.lanes.users))
	for name, u := range e.lanes.users {
		for tn := range u {
			if tn == tenant {
				out = append(out, "user of "+name)
			}
		}
	}
	if e.lanes.tenants[tenant] != nil {
		out = append(out, "fair share")
	}
	e.lanes.mu.Unlock()
	return out
}
