package sqlite

import (
	"context"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// CountLive counts the queued, inflight and suspended messages by route,
// each state through its partial index, so that the delivered and
// discarded messages kept for retention are not read. Queued messages are
// in the claim index, or waiting for their ordering key in the index of
// those; both begin with the route, so the largest count is read from the
// indexes alone.
func (s *Store) CountLive(ctx context.Context) ([]courier.RouteLive, error) {
	rows, err := s.rdb.QueryContext(ctx, `
		SELECT route, 'queued', COUNT(*) FROM messages INDEXED BY messages_queued WHERE `+queuedDue+` GROUP BY route
		UNION ALL
		SELECT route, 'queued', COUNT(*) FROM messages INDEXED BY messages_key_waiting WHERE `+keyWaiting+` GROUP BY route
		UNION ALL
		SELECT route, 'inflight', COUNT(*) FROM messages INDEXED BY messages_leases WHERE state = 'inflight' GROUP BY route
		UNION ALL
		SELECT route, 'suspended', COUNT(*) FROM messages INDEXED BY messages_suspended WHERE state = 'suspended' GROUP BY route`)
	counts, err := collect(nil, rows, err, "count live messages", sqlstore.ScanLive)
	if err != nil {
		return nil, err
	}
	return sqlstore.LiveRoutes(counts), nil
}
