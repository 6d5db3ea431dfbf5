package sqlite

import (
	"context"
	"database/sql"

	courier "github.com/courier-gw/courier"
)

// RecordAction records an action that changes nothing else.
func (s *Store) RecordAction(ctx context.Context, a courier.Action) error {
	return s.write(ctx, func(tx *sql.Tx) error { return insertAction(tx, a) })
}
