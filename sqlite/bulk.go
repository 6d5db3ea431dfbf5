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

// RunBulk does the next batch of an operation (sqlstore.RunBulk); the one
// writer runs one batch at a time.
func (s *Store) RunBulk(ctx context.Context, id string, limit int, now time.Time) (courier.BulkOp, error) {
	return sqlstore.RunBulk(ctx, s, func(fn func(sqlstore.BulkTx) error) error {
		return s.write(ctx, func(tx *sql.Tx) error { return fn(bulkTx{s, tx}) })
	}, id, limit, now)
}

// bulkTx is the sqlstore.BulkTx of a write transaction.
type bulkTx struct {
	s  *Store
	tx *sql.Tx
}

var _ sqlstore.BulkTx = bulkTx{}

func (b bulkTx) LockBulk(id string) (courier.BulkOp, error) {
	op, err := scanBulk(b.tx.QueryRow(`SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, id))
	if err != nil {
		return op, one("read bulk operation", err, sqlstore.BulkNotFound(id))
	}
	return op, nil
}

func (b bulkTx) RecordProgress(id string, n int, cursor, maxSeq int64, done bool, now time.Time) error {
	_, err := b.tx.Exec(`UPDATE bulk_ops SET cursor = ?, max_seq = ?, count = count + ?, done = ?, updated_at = ? WHERE id = ?`,
		cursor, maxSeq, n, done, micros(now), id)
	return classify("record bulk progress", err)
}

// EraseBatch deletes the tenant's messages one by one, and takes those that
// were live off the tenant's use. One before the cursor is a row whose seq
// SQLite gave again after the last row was deleted.
func (b bulkTx) EraseBatch(tenant string, cursor *int64, limit int) (int, error) {
	type erased struct {
		seq     int64
		key, id string
		state   courier.State
		size    int
	}
	from := *cursor
	pick := func(after bool, n int) ([]erased, error) {
		w := sqlstore.Where{Time: micros}
		w.Tenant(tenant, true)
		if after {
			w.Add("seq > ?", from)
		} else {
			w.Add("seq <= ?", from)
		}
		rows, err := b.tx.Query(`SELECT seq, id, subscription, state, size FROM messages`+w.SQL()+` ORDER BY seq LIMIT `+w.Arg(n), w.Args...)
		return collect(nil, rows, err, "select for erasure", func(row scanner) (erased, error) {
			var e erased
			var sub, state string
			err := row.Scan(&e.seq, &e.id, &sub, &state, &e.size)
			e.key, e.state = courier.DeliveryKey(e.id, sub), courier.State(state)
			return e, err
		})
	}
	gone, err := pick(true, limit)
	if err != nil {
		return 0, err
	}
	if len(gone) > 0 {
		*cursor = gone[len(gone)-1].seq
	}
	if len(gone) < limit {
		behind, err := pick(false, limit-len(gone))
		if err != nil {
			return 0, err
		}
		gone = append(gone, behind...)
	}
	for _, e := range gone {
		if err := deleteMessage(b.tx, e.seq, e.key); err != nil {
			return 0, classify("erase "+e.key, err)
		}
		b.s.cur.usage.Add(e.id, e.size, e.state, courier.StateDiscarded) // no longer counted when it was live
	}
	return len(gone), nil
}

func (b bulkTx) EraseRest(tenant string) error {
	for _, st := range sqlstore.EraseRest(tenant, false, sqlstore.ErasedByName, []string{"tenant_usage"}) {
		if _, err := b.tx.Exec(st.SQL, st.Args...); err != nil {
			return classify("erase the rest of tenant "+tenant, err)
		}
	}
	rows, err := b.tx.Query(`SELECT ` + bulkColumns + ` FROM bulk_ops`)
	ops, err := collect(nil, rows, err, "read bulk operations", scanBulk)
	if err != nil {
		return err
	}
	for _, id := range sqlstore.ErasedBulks(ops, tenant) {
		if _, err := b.tx.Exec(`DELETE FROM bulk_ops WHERE id = ?`, id); err != nil {
			return classify("erase bulk operation "+id, err)
		}
	}
	return nil
}

func (b bulkTx) FilterBatch(op courier.BulkOp, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error) {
	w := sqlstore.Where{Time: micros}
	w.BulkBatch(op, *cursor, maxSeq)
	rows, err := b.tx.Query(`SELECT seq, id, subscription FROM messages`+w.SQL()+` ORDER BY seq LIMIT `+w.Arg(limit), w.Args...)
	keys, err := collect(nil, rows, err, "select for bulk operation", func(row scanner) (string, error) {
		var id, sub string
		err := row.Scan(cursor, &id, &sub)
		return courier.DeliveryKey(id, sub), err
	})
	if err != nil {
		return 0, false, err
	}
	n, err = sqlstore.BulkBatch(op, keys, now,
		func(key string, decide sqlstore.Decide) error { _, err := b.s.act(b.tx, key, decide); return err },
		func(a courier.Action) error { return insertAction(b.tx, a) })
	return n, len(keys) < limit, err
}

func (b bulkTx) ReplayBatch(r *courier.Replay, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error) {
	rows, err := b.tx.Query(`SELECT `+messageColumns+` FROM messages
		WHERE seq > ? AND seq <= ? AND shared = 0 AND subscription <> '' AND created_at >= ? AND created_at < ?
		ORDER BY seq LIMIT ?`, *cursor, maxSeq, micros(r.Since), micros(r.Until), limit)
	leads, seqs, err := sqlstore.CollectNumbered(rows, err, func(row scanner) (*courier.Message, int64, error) {
		return scanMessageSeq(row, false)
	})
	if err != nil {
		return 0, false, classify("select for replay", err)
	}
	n, err = sqlstore.ReplayBatch(r, leads, now,
		func(id string) (bool, error) {
			var one int
			err := b.tx.QueryRow(`SELECT 1 FROM messages WHERE id = ? AND subscription = ?`, id, r.Subscription.Name).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			return err == nil, classify("read a delivery for replay", err)
		},
		func(key string, decide sqlstore.Decide) error { _, err := b.s.act(b.tx, key, decide); return err },
		func(i int, d *courier.Message) error {
			if err := courier.AdmitKeyed(keyTx{b.s, b.tx}, []*courier.Message{d}); err != nil {
				return err
			}
			_, err := b.s.execInsert(b.tx, b.s.insertStmt, d, seqs[i])
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
