package postgres

import (
	"context"

	courier "github.com/courier-gw/courier"
)

// CountLive counts the queued, inflight and suspended messages. Each count
// matches the predicate of a partial index, so the planner reads that index
// and not the delivered and discarded rows kept for retention. Queued
// messages are in the claim index, or waiting for their ordering key in the
// index of those.
func (s *Store) CountLive(ctx context.Context) (courier.LiveCounts, error) {
	var c courier.LiveCounts
	err := s.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM messages WHERE `+queuedDue+`) +
		(SELECT count(*) FROM messages WHERE `+keyWaiting+`),
		(SELECT count(*) FROM messages WHERE state = 'inflight'),
		(SELECT count(*) FROM messages WHERE state = 'suspended')`).
		Scan(&c.Queued, &c.Inflight, &c.Suspended)
	if err != nil {
		return c, classify("count live messages", err)
	}
	return c, nil
}
