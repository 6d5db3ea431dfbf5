package postgres

import (
	"context"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// CountLive counts the queued, inflight and suspended messages by route.
// Each count matches the predicate of a partial index, so the planner reads
// that index and not the delivered and discarded rows kept for retention.
// Queued messages are in the claim index, or waiting for their ordering
// key in the index of those; both begin with the route, so the largest
// count is read from the indexes alone.
func (s *Store) CountLive(ctx context.Context) ([]courier.RouteLive, error) {
	rows, err := s.pool.Query(ctx, countLiveSQL)
	counts, err := collect(nil, rows, err, "count live messages", sqlstore.ScanLive)
	if err != nil {
		return nil, err
	}
	return sqlstore.LiveRoutes(counts), nil
}

// countLiveSQL counts the live messages by route and state, each state
// through its partial index.
const countLiveSQL = `
	SELECT route, 'queued', count(*)::int FROM messages WHERE ` + queuedDue + ` GROUP BY route
	UNION ALL
	SELECT route, 'queued', count(*)::int FROM messages WHERE ` + keyWaiting + ` GROUP BY route
	UNION ALL
	SELECT route, 'inflight', count(*)::int FROM messages WHERE state = 'inflight' GROUP BY route
	UNION ALL
	SELECT route, 'suspended', count(*)::int FROM messages WHERE state = 'suspended' GROUP BY route`
