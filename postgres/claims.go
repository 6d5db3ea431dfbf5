package postgres

import (
	"context"

	courier "github.com/courier-gw/courier"
)

// RecordAction records an action that changes nothing else.
func (s *Store) RecordAction(ctx context.Context, a courier.Action) error {
	if _, err := s.pool.Exec(ctx, insertActionSQL, actionArgs(a)...); err != nil {
		return classify("record action", err)
	}
	return nil
}
