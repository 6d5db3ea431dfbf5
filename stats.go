package courier

import "time"

// LiveCounts is how many messages are in each live state: waiting, being
// delivered, and waiting for an operator.
type LiveCounts struct {
	Queued    int
	Inflight  int
	Suspended int
}

// Add adds o's counts to c's.
func (c *LiveCounts) Add(o LiveCounts) {
	c.Queued += o.Queued
	c.Inflight += o.Inflight
	c.Suspended += o.Suspended
}

// RouteLive is how many messages of one route (a qualified name) are in
// each live state. A message's route is always its tenant's, so a
// tenant's counts are the sum of its routes' (LiveByTenant).
type RouteLive struct {
	Route string
	LiveCounts
}

// LiveByTenant sums the counts of routes by the tenant of each route, and
// all of them under AllTenants.
func LiveByTenant(routes []RouteLive) map[string]LiveCounts {
	out := map[string]LiveCounts{AllTenants: {}}
	for _, r := range routes {
		t, all := out[TenantOf(r.Route)], out[AllTenants]
		t.Add(r.LiveCounts)
		all.Add(r.LiveCounts)
		out[TenantOf(r.Route)], out[AllTenants] = t, all
	}
	return out
}

// AllTenants names, where statistics are kept by tenant, the sum over all
// of them: the server as a whole.
const AllTenants = ""

// Stats is one node's view of the traffic of a tenant, or of the server as
// a whole: the live states as last counted in the store, the messages this
// node has seen reach an end since it started, and its deliveries and
// failures minute by minute over the last hour. On a store several nodes
// share, the live counts are the store's and the rest is this node's.
type Stats struct {
	// CountedAt is when the live states were counted; zero before the first count.
	CountedAt time.Time
	Live      LiveCounts
	// Since is when this node started counting.
	Since time.Time
	// Ingested, Delivered, Suspended and Discarded count what this node has
	// taken in, delivered, suspended and discarded since Since.
	Ingested  int64
	Delivered int64
	Suspended int64
	Discarded int64
	// Minutes are the last 60 minutes, oldest first, the current one last.
	Minutes []MinuteStats
}

// MinuteStats counts one minute's deliveries (messages) and failed attempts.
type MinuteStats struct {
	Start     time.Time
	Delivered int
	Failed    int
}
