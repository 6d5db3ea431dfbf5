package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

const bulkColumns = `id, kind, filter, route, who, count, done, created_at, updated_at, cursor, max_seq, stopped`

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
		var n int
		var finished bool
		if op.Replay != nil {
			n, finished, err = s.replayBatch(tx, op.Replay, &cursor, maxSeq, limit, now)
		} else {
			n, finished, err = s.bulkBatch(tx, op, &cursor, maxSeq, limit, now)
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(`UPDATE bulk_ops SET cursor = ?, count = count + ?, done = ?, updated_at = ? WHERE id = ?`,
			cursor, n, finished, micros(now), id); err != nil {
			return classify("record bulk progress", err)
		}
		op.Count += n
		op.Done, op.Position = finished, cursor
		op.UpdatedAt = now
		out = op
		return nil
	})
	if err != nil {
		// The write may still be running (its caller gave up waiting):
		// out is not read.
		return courier.BulkOp{}, err
	}
	return out, nil
}

// bulkBatch resubmits or discards the next batch of the messages op's
// filter matches, after cursor (moved on to the last one looked at).
func (s *Store) bulkBatch(tx *sql.Tx, op courier.BulkOp, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error) {
	w := sqlstore.Where{Time: micros}
	w.BulkBatch(op, *cursor, maxSeq)
	rows, err := tx.Query(`SELECT seq, id, subscription FROM messages`+w.SQL()+` ORDER BY seq LIMIT `+w.Arg(limit), w.Args...)
	keys, err := collect(nil, rows, err, "select for bulk operation", func(row scanner) (string, error) {
		var id, sub string
		err := row.Scan(cursor, &id, &sub)
		return courier.DeliveryKey(id, sub), err
	})
	if err != nil {
		return 0, false, err
	}
	n, err = sqlstore.BulkBatch(op, keys, now,
		func(key string, decide sqlstore.Decide) error { _, err := s.act(tx, key, decide); return err },
		func(a courier.Action) error { return insertAction(tx, a) })
	return n, len(keys) < limit, err
}

// replayBatch looks at the next published messages of a replay (their
// first deliveries, which keep the payload), after cursor, and gives the
// replay's subscription a delivery of each it wants (or, with Again,
// delivers the one it has again).
func (s *Store) replayBatch(tx *sql.Tx, r *courier.Replay, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error) {
	rows, err := tx.Query(`SELECT `+messageColumns+` FROM messages
		WHERE seq > ? AND seq <= ? AND shared = 0 AND subscription <> '' AND created_at >= ? AND created_at < ?
		ORDER BY seq LIMIT ?`, *cursor, maxSeq, micros(r.Since), micros(r.Until), limit)
	var seqs []int64
	leads, err := collect(nil, rows, err, "select for replay", func(row scanner) (*courier.Message, error) {
		m, seq, err := scanMessageSeq(row, false)
		seqs = append(seqs, seq)
		return m, err
	})
	if err != nil {
		return 0, false, err
	}
	n, err = sqlstore.ReplayBatch(r, leads, now,
		func(id string) (bool, error) {
			var one int
			err := tx.QueryRow(`SELECT 1 FROM messages WHERE id = ? AND subscription = ?`, id, r.Subscription.Name).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			return err == nil, classify("read a delivery for replay", err)
		},
		func(key string, decide sqlstore.Decide) error { _, err := s.act(tx, key, decide); return err },
		func(i int, d *courier.Message) error {
			if err := courier.AdmitKeyed(keyTx{s, tx}, []*courier.Message{d}); err != nil {
				return err
			}
			_, err := s.execInsert(tx, s.insertStmt, d, seqs[i])
			return err
		})
	if len(seqs) > 0 {
		*cursor = seqs[len(seqs)-1]
	}
	return n, len(leads) < limit, err
}

// Bulk returns one operation.
func (s *Store) Bulk(ctx context.Context, id string) (courier.BulkOp, error) {
	op, err := scanBulk(s.rdb.QueryRowContext(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, id))
	if err != nil {
		return op, one("read bulk operation", err, sqlstore.BulkNotFound(id))
	}
	return op, nil
}

// StopBulk ends an operation not yet done, for the reason given.
func (s *Store) StopBulk(ctx context.Context, id, reason string, now time.Time) (courier.BulkOp, error) {
	var out courier.BulkOp
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`UPDATE bulk_ops SET done = 1, stopped = ?, updated_at = ? WHERE id = ? AND done = 0`,
			reason, micros(now), id); err != nil {
			return classify("stop bulk operation", err)
		}
		op, err := scanBulk(tx.QueryRow(`SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, id))
		if err != nil {
			return one("read bulk operation", err, sqlstore.BulkNotFound(id))
		}
		out = op
		return nil
	})
	if err != nil {
		// The write may still be running (its caller gave up waiting):
		// out is not read.
		return courier.BulkOp{}, err
	}
	return out, nil
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
	if err := row.Scan(&op.ID, &kind, &filter, &route, &op.Who, &op.Count, &op.Done, &created, &updated, &op.Position, &op.End, &op.Stopped); err != nil {
		return op, err
	}
	if err := sqlstore.DecodeSettings([]byte(filter), &op); err != nil {
		return op, fmt.Errorf("operation %s: %w", op.ID, err)
	}
	op.Kind, op.Route = courier.ActionKind(kind), route.String
	op.CreatedAt, op.UpdatedAt = fromMicros(created), fromMicros(updated)
	return op, nil
}
