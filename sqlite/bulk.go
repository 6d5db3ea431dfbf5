package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

const bulkColumns = `id, kind, filter, route, who, count, done, created_at, updated_at`

// StartBulk records a bulk operation bounded by the newest message now.
func (s *Store) StartBulk(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error) {
	return sqlstore.StartBulk(op, func(fn func(*sql.Tx) error) error {
		return s.write(ctx, fn)
	}, func(tx *sql.Tx, filter string) error {
		_, err := tx.Exec(`INSERT INTO bulk_ops (id, kind, filter, route, who, max_seq, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) FROM messages), ?, ?) ON CONFLICT (id) DO NOTHING`,
			op.ID, string(op.Kind), filter, nullString(op.Route), op.Who, micros(op.CreatedAt), micros(op.CreatedAt))
		return classify("start bulk operation", err)
	}, func(tx *sql.Tx) (courier.BulkOp, error) {
		stored, err := scanBulk(tx.QueryRow(`SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, op.ID))
		return stored, classify("read bulk operation", err)
	})
}

// RunBulk does the next batch of an operation.
func (s *Store) RunBulk(ctx context.Context, id string, limit int, now time.Time) (courier.BulkOp, error) {
	var out courier.BulkOp
	err := s.write(ctx, func(tx *sql.Tx) error {
		var filterJSON string
		var maxSeq, cursor int64
		var done bool
		err := tx.QueryRow(`SELECT filter, max_seq, cursor, done FROM bulk_ops WHERE id = ?`, id).Scan(&filterJSON, &maxSeq, &cursor, &done)
		if err != nil {
			return one("read bulk operation", err, sqlstore.BulkNotFound(id))
		}
		op, err := scanBulk(tx.QueryRow(`SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, id))
		if err != nil {
			return classify("read bulk operation", err)
		}
		if done {
			out = op
			return nil
		}
		w := sqlstore.Where{Time: micros}
		w.BulkBatch(op, cursor, maxSeq)
		rows, err := tx.Query(`SELECT seq, id FROM messages`+w.SQL()+` ORDER BY seq LIMIT `+w.Arg(limit), w.Args...)
		ids, err := collect(nil, rows, err, "select for bulk operation", func(row scanner) (string, error) {
			var id string
			err := row.Scan(&cursor, &id)
			return id, err
		})
		if err != nil {
			return err
		}
		n, err := sqlstore.BulkBatch(op, ids, now,
			func(id string, decide sqlstore.Decide) error { _, err := s.act(tx, id, decide); return err },
			func(a courier.Action) error { return insertAction(tx, a) })
		if err != nil {
			return err
		}
		finished := len(ids) < limit
		if _, err := tx.Exec(`UPDATE bulk_ops SET cursor = ?, count = count + ?, done = ?, updated_at = ? WHERE id = ?`,
			cursor, n, finished, micros(now), id); err != nil {
			return classify("record bulk progress", err)
		}
		op.Count += n
		op.Done = finished
		op.UpdatedAt = now
		out = op
		return nil
	})
	return out, err
}

// Bulk returns one operation.
func (s *Store) Bulk(ctx context.Context, id string) (courier.BulkOp, error) {
	op, err := scanBulk(s.rdb.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, id))
	if err != nil {
		return op, one("read bulk operation", err, sqlstore.BulkNotFound(id))
	}
	return op, nil
}

// PendingBulks returns the operations not yet done.
func (s *Store) PendingBulks(ctx context.Context) ([]courier.BulkOp, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE done = 0 ORDER BY created_at`)
	return collect(nil, rows, err, "pending bulk operations", scanBulk)
}

func scanBulk(row scanner) (courier.BulkOp, error) {
	var op courier.BulkOp
	var kind, filter string
	var route sql.NullString
	var created, updated int64
	if err := row.Scan(&op.ID, &kind, &filter, &route, &op.Who, &op.Count, &op.Done, &created, &updated); err != nil {
		return op, err
	}
	f, err := sqlstore.DecodeFilter([]byte(filter))
	if err != nil {
		return op, fmt.Errorf("operation %s: %w", op.ID, err)
	}
	op.Filter, op.Kind, op.Route = f, courier.ActionKind(kind), route.String
	op.CreatedAt, op.UpdatedAt = fromMicros(created), fromMicros(updated)
	return op, nil
}
