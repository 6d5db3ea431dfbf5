package postgres

import (
	"context"
	"fmt"
	"slices"
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

// RunBulk does the next batch of an operation (sqlstore.RunBulk), under
// the lock of the operation's row.
func (s *Store) RunBulk(ctx context.Context, id string, limit int, now time.Time) (courier.BulkOp, error) {
	out, err := sqlstore.RunBulk(ctx, s, func(fn func(sqlstore.BulkTx) error) error {
		return classify("bulk operation", pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error { return fn(bulkTx{ctx, tx}) }))
	}, id, limit, now)
	if err == nil && out.Kind != courier.ActionEraseTenant {
		s.dueNow("") // resubmitted messages, or the next of a discarded one's key, may be due
	}
	return out, err
}

// bulkTx is the sqlstore.BulkTx of a transaction.
type bulkTx struct {
	ctx context.Context
	tx  pgx.Tx
}

var _ sqlstore.BulkTx = bulkTx{}

func (b bulkTx) LockBulk(id string) (courier.BulkOp, error) {
	op, err := scanBulk(b.tx.QueryRow(b.ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return op, one("read bulk operation", err, sqlstore.BulkNotFound(id))
	}
	return op, nil
}

func (b bulkTx) RecordProgress(id string, n int, cursor, maxSeq int64, done bool, now time.Time) error {
	_, err := b.tx.Exec(b.ctx, `UPDATE bulk_ops SET cursor = $1, max_seq = $2, count = count + $3, done = $4, updated_at = $5 WHERE id = $6`,
		cursor, maxSeq, n, done, now, id)
	return classify("record bulk progress", err)
}

// eraseSQL deletes the tenant's messages and deliveries the CTE erased
// picks (seq, id, subscription, state, size), whatever their state, with
// their attempts, actions and payloads (a blob goes at the sweep, once no
// row names it), takes those that were live off the tenant's use, and
// returns how many it deleted and the last seq. The rows are locked first:
// an outcome or claim under way is waited for, and one after finds its
// message gone and changes nothing.
const eraseSQL = `, gone AS (
		SELECT seq, id, state, size, CASE WHEN subscription = '' THEN id ELSE id || '/' || subscription END AS key
		FROM messages WHERE seq IN (SELECT seq FROM erased) FOR UPDATE
	), gone_attempts AS (DELETE FROM attempts USING gone WHERE attempts.message_id = gone.key
	), gone_actions AS (DELETE FROM actions USING gone WHERE actions.subject = gone.key AND actions.object = ''
	), gone_bodies AS (DELETE FROM bodies USING gone WHERE bodies.seq = gone.seq
	), usage_rows AS (SELECT id, -1 AS delta, size FROM gone WHERE state IN ` + liveStates + `
	), ` + countUsage + `, gone_messages AS (DELETE FROM messages USING gone WHERE messages.seq = gone.seq RETURNING messages.seq)
	SELECT count(*), coalesce(max(seq), 0) FROM gone_messages`

// EraseBatch deletes the tenant's messages with eraseSQL. One before the
// cursor is one whose transaction committed after the cursor passed its
// seq.
func (b bulkTx) EraseBatch(tenant string, cursor *int64, limit int) (int, error) {
	from := *cursor
	erase := func(after bool, n int) (int, int64, error) {
		w := sqlstore.Where{Numbered: true}
		w.Tenant(tenant, true)
		order := ""
		if after {
			w.Add("seq > ?", from)
			order = " ORDER BY seq"
		} else {
			w.Add("seq <= ?", from)
		}
		var deleted int
		var last int64
		err := b.tx.QueryRow(b.ctx, `WITH erased AS (SELECT seq FROM messages`+w.SQL()+order+` LIMIT `+w.Arg(n)+`)`+eraseSQL,
			w.Args...).Scan(&deleted, &last)
		return deleted, last, classify("erase messages of tenant "+tenant, err)
	}
	n, last, err := erase(true, limit)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		*cursor = last
	}
	if n < limit {
		behind, _, err := erase(false, limit-n)
		if err != nil {
			return 0, err
		}
		n += behind
	}
	return n, nil
}

// EraseRest removes, besides what sqlstore.EraseRest names, this store's
// ingest buckets of the tenant and the politeness limits of its endpoints.
func (b bulkTx) EraseRest(tenant string) error {
	byName := append(slices.Clone(sqlstore.ErasedByName), sqlstore.Keyed{Table: "endpoint_pace", Column: "endpoint"},
		sqlstore.Keyed{Table: "endpoint_holds", Column: "endpoint"})
	for _, st := range sqlstore.EraseRest(tenant, true, byName, []string{"tenant_usage", "tenant_tokens"}) {
		if _, err := b.tx.Exec(b.ctx, st.SQL, st.Args...); err != nil {
			return classify("erase the rest of tenant "+tenant, err)
		}
	}
	rows, err := b.tx.Query(b.ctx, `SELECT `+bulkColumns+` FROM bulk_ops`)
	ops, err := collect(nil, rows, err, "read bulk operations", scanBulk)
	if err != nil {
		return err
	}
	if ids := sqlstore.ErasedBulks(ops, tenant); len(ids) > 0 {
		if _, err := b.tx.Exec(b.ctx, `DELETE FROM bulk_ops WHERE id = ANY($1)`, ids); err != nil {
			return classify("erase the bulk operations of tenant "+tenant, err)
		}
	}
	return nil
}

// FilterBatch does its batch under the locks of the messages' ordering
// keys.
func (b bulkTx) FilterBatch(op courier.BulkOp, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error) {
	w := sqlstore.Where{Numbered: true}
	w.BulkBatch(op, *cursor, maxSeq)
	rows, err := b.tx.Query(b.ctx, `SELECT seq, id, subscription, ordering_key FROM messages`+w.SQL()+` ORDER BY seq LIMIT `+w.Arg(limit), w.Args...)
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
		if _, err := b.tx.Exec(b.ctx, lockKeysSQL, lockKeys); err != nil {
			return 0, false, classify("lock ordering keys", err)
		}
	}
	n, err = sqlstore.BulkBatch(op, keys, now,
		func(key string, decide sqlstore.Decide) error { _, err := act(b.ctx, b.tx, key, decide); return err },
		func(a courier.Action) error { return insertAction(b.ctx, b.tx, a) })
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
