package sqlite

import (
	"context"

	courier "github.com/courier-gw/courier"
)

// CountLive counts the queued, inflight and suspended messages, each
// through the partial indexes of its state, so that the delivered and
// discarded messages kept for retention are not read. Queued messages are
// in the claim index, or waiting for their ordering key in the index of
// those.
func (s *Store) CountLive(ctx context.Context) (courier.LiveCounts, error) {
	var c courier.LiveCounts
	err := s.rdb.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM messages INDEXED BY messages_queued WHERE `+queuedDue+`) +
		(SELECT COUNT(*) FROM messages INDEXED BY messages_key_waiting WHERE `+keyWaiting+`),
		(SELECT COUNT(*) FROM messages INDEXED BY messages_leases WHERE state = 'inflight'),
		(SELECT COUNT(*) FROM messages INDEXED BY messages_suspended WHERE state = 'suspended')`).
		Scan(&c.Queued, &c.Inflight, &c.Suspended)
	if err != nil {
		return c, classify("count live messages", err)
	}
	return c, nil
}
