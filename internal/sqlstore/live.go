package sqlstore

import (
	"slices"
	"strings"

	courier "github.com/courier-gw/courier"
)

// LiveCount is a row of a store's count of the live messages: how many of
// a route's are in one live state.
type LiveCount struct {
	Route string
	State courier.State
	N     int
}

// ScanLive reads a LiveCount from a row of route, state and count.
func ScanLive(row Scanner) (LiveCount, error) {
	var c LiveCount
	err := row.Scan(&c.Route, &c.State, &c.N)
	return c, err
}

// LiveRoutes sums the rows of a count by route, in the order of the
// routes' names.
func LiveRoutes(rows []LiveCount) []courier.RouteLive {
	byRoute := map[string]*courier.RouteLive{}
	var out []courier.RouteLive
	for _, c := range rows {
		r := byRoute[c.Route]
		if r == nil {
			r = &courier.RouteLive{Route: c.Route}
			byRoute[c.Route] = r
		}
		switch c.State {
		case courier.StateQueued:
			r.Queued += c.N
		case courier.StateInflight:
			r.Inflight += c.N
		case courier.StateSuspended:
			r.Suspended += c.N
		}
	}
	for _, r := range byRoute {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b courier.RouteLive) int { return strings.Compare(a.Route, b.Route) })
	return out
}
