package engine

import courier "github.com/courier-gw/courier"

// HealthMaxAge is healthMaxAge, for the tests of the bound it sets.
const HealthMaxAge = healthMaxAge

// TenantState lists what the engine keeps of a tenant: the names of its
// endpoints and routes, and the tenant's own name, wherever they are kept.
func (e *Engine) TenantState(tenant string) []string {
	var out []string
	of := func(where, name string) {
		if courier.TenantOf(name) == tenant {
			out = append(out, where+" "+name)
		}
	}
	e.health.mu.Lock()
	for name := range e.health.m {
		of("health", name)
	}
	e.health.mu.Unlock()
	e.steady.mu.Lock()
	for name := range e.steady.steady {
		of("steady", name)
	}
	for name := range e.steady.written {
		of("written", name)
	}
	e.steady.mu.Unlock()
	e.pace.mu.Lock()
	for name := range e.pace.times {
		of("pace", name)
	}
	for name := range e.pace.last {
		of("pace", name)
	}
	e.pace.mu.Unlock()
	e.activity.mu.Lock()
	for name := range e.activity.endpoints {
		of("activity", name)
	}
	e.activity.mu.Unlock()
	e.slots.mu.Lock()
	for _, m := range []map[string]int{e.slots.running, e.slots.waiting, e.slots.held} {
		for name := range m {
			of("slots", name)
		}
	}
	for name := range e.slots.hungry {
		of("hungry", name)
	}
	for name := range e.slots.retryAt {
		of("retry", name)
	}
	for name := range e.slots.adaptive {
		of("adaptive", name)
	}
	e.slots.mu.Unlock()
	e.lanes.mu.Lock()
	for name := range e.lanes.byName {
		of("lane", name)
	}
	for name, u := range e.lanes.users {
		of("users", name)
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
