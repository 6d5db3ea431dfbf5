package postgres

import (
	"context"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

const bulkColumns = `id, kind, filter, route, who, count, done, created_at, updated_at, cursor, max_seq, stopped`

// StartBulk records a bulk operation bounded by the newest message now.
func (s *Store) StartBulk(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error) {
	return sqlstore.StartBulk(op, func(fn func(pgx.Tx) error) error {
		return classify("start bulk operation", pgx.BeginFunc(ctx, s.pool, fn))
	}, func(tx pgx.Tx, filter string) error {
		_, err := tx.Exec(ctx, `INSERT INTO bulk_ops (id, kind, filter, route, who, max_seq, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, (SELECT COALESCE(MAX(seq), 0) FROM messages), $6, $6) ON CONFLICT (id) DO NOTHING`,
			op.ID, string(op.Kind), filter, nullString(op.Route), op.Who, op.CreatedAt)
		return classify("start bulk operation", err)
	}, func(tx pgx.Tx) (courier.BulkOp, error) {
		stored, err := scanBulk(tx.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1`, op.ID))
		return stored, classify("read bulk operation", err)
	})
}

// RunBulk does the next batch of an operation. The operation's row is
// locked for the batch, so nodes that resume the same operation take turns
// and never do a batch twice.
func (s *Store) RunBulk(ctx context.Context, id string, limit int, now time.Time) (courier.BulkOp, error) {
	var out courier.BulkOp
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var maxSeq, cursor int64
		err := tx.QueryRow(ctx, `SELECT max_seq, cursor FROM bulk_ops WHERE id = $1 FOR UPDATE`, id).Scan(&maxSeq, &cursor)
		if err != nil {
			return one("read bulk operation", err, sqlstore.BulkNotFound(id))
		}
		op, err := scanBulk(tx.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1`, id))
		if err != nil {
			return classify("read bulk operation", err)
		}
		out = op
		if op.Done {
			return nil
		}
		var n int
		var finished bool
		if op.Replay != nil {
			n, finished, err = replayBatch(ctx, tx, op.Replay, &cursor, maxSeq, limit, now)
		} else {
			n, finished, err = bulkBatch(ctx, tx, op, &cursor, maxSeq, limit, now)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE bulk_ops SET cursor = $1, count = count + $2, done = $3, updated_at = $4 WHERE id = $5`,
			cursor, n, finished, now, id); err != nil {
			return classify("record bulk progress", err)
		}
		out.Count += n
		out.Done, out.Position = finished, cursor
		out.UpdatedAt = now
		return nil
	})
	if err != nil {
		return courier.BulkOp{}, classify("bulk operation", err)
	}
	s.dueNow("") // resubmitted messages, or the next of a discarded one's key, may be due
	return out, nil
}

// bulkBatch resubmits or discards the next batch of the messages op's
// filter matches, after cursor (moved on to the last one looked at),
// under the locks of their ordering keys.
func bulkBatch(ctx context.Context, tx pgx.Tx, op courier.BulkOp, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error) {
	w := sqlstore.Where{Numbered: true}
	w.BulkBatch(op, *cursor, maxSeq)
	rows, err := tx.Query(ctx, `SELECT seq, id, subscription, ordering_key FROM messages`+w.SQL()+` ORDER BY seq LIMIT `+w.Arg(limit), w.Args...)
	var lockKeys []string
	keys, err := collect(nil, rows, err, "select for bulk operation", func(row scanner) (string, error) {
		var id, sub string
		var orderingKey pgtype.Text
		err := row.Scan(cursor, &id, &sub, &orderingKey)
		if orderingKey.Valid {
			lockKeys = append(lockKeys, orderingKey.String)
		}
		return courier.DeliveryKey(id, sub), err
	})
	if err != nil {
		return 0, false, err
	}
	if len(lockKeys) > 0 {
		if _, err := tx.Exec(ctx, lockKeysSQL, lockKeys); err != nil {
			return 0, false, classify("lock ordering keys", err)
		}
	}
	n, err = sqlstore.BulkBatch(op, keys, now,
		func(key string, decide sqlstore.Decide) error { _, err := act(ctx, tx, key, decide); return err },
		func(a courier.Action) error { return insertAction(ctx, tx, a) })
	return n, len(keys) < limit, err
}

// Bulk returns one operation.
func (s *Store) Bulk(ctx context.Context, id string) (courier.BulkOp, error) {
	op, err := scanBulk(s.pool.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1`, id))
	if err != nil {
		return op, one("read bulk operation", err, sqlstore.BulkNotFound(id))
	}
	return op, nil
}

// StopBulk ends an operation not yet done, for the reason given. The
// update waits for a batch under way (its row lock), which it follows.
func (s *Store) StopBulk(ctx context.Context, id, reason string, now time.Time) (courier.BulkOp, error) {
	var out courier.BulkOp
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE bulk_ops SET done = true, stopped = $1, updated_at = $2 WHERE id = $3 AND NOT done`,
			reason, now, id); err != nil {
			return classify("stop bulk operation", err)
		}
		op, err := scanBulk(tx.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1`, id))
		if err != nil {
			return one("read bulk operation", err, sqlstore.BulkNotFound(id))
		}
		out = op
		return nil
	})
	return out, err
}

// PendingBulks returns the operations not yet done.
func (s *Store) PendingBulks(ctx context.Context) ([]courier.BulkOp, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE NOT done ORDER BY created_at`)
	return collect(nil, rows, err, "pending bulk operations", scanBulk)
}

func scanBulk(row scanner) (courier.BulkOp, error) {
	var op courier.BulkOp
	var kind string
	var filter []byte
	var route pgtype.Text
	if err := row.Scan(&op.ID, &kind, &filter, &route, &op.Who, &op.Count, &op.Done, &op.CreatedAt, &op.UpdatedAt, &op.Position, &op.End, &op.Stopped); err != nil {
		return op, err
	}
	if err := sqlstore.DecodeSettings(filter, &op); err != nil {
		return op, fmt.Errorf("operation %s: %w", op.ID, err)
	}
	op.Kind, op.Route = courier.ActionKind(kind), route.String
	op.CreatedAt, op.UpdatedAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	return op, nil
}
