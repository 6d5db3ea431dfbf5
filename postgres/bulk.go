package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

const bulkColumns = `id, kind, filter, route, who, count, done, created_at, updated_at`

// StartBulk records a bulk operation bounded by the newest message now.
func (s *Store) StartBulk(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error) {
	filter, err := json.Marshal(op.Filter)
	if err != nil {
		return courier.BulkOp{}, fmt.Errorf("encode filter: %w", err)
	}
	var out courier.BulkOp
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO bulk_ops (id, kind, filter, route, who, max_seq, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, (SELECT COALESCE(MAX(seq), 0) FROM messages), $6, $6) ON CONFLICT (id) DO NOTHING`,
			op.ID, string(op.Kind), string(filter), nullString(op.Route), op.Who, op.CreatedAt); err != nil {
			return unavailable("start bulk operation", err)
		}
		out, err = scanBulk(tx.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1`, op.ID))
		if err != nil {
			return unavailable("read bulk operation", err)
		}
		if out.Kind != op.Kind || out.Route != op.Route || string(filter) != mustJSON(out.Filter) {
			return courier.Errorf(courier.CodeConflict, "operation %q exists with other settings", op.ID)
		}
		return nil
	})
	if err != nil {
		return courier.BulkOp{}, unavailable("start bulk operation", err)
	}
	return out, nil
}

// RunBulk does the next batch of an operation. The operation's row is
// locked for the batch, so nodes that resume the same operation take turns
// and never do a batch twice.
func (s *Store) RunBulk(ctx context.Context, id string, limit int, now time.Time) (courier.BulkOp, error) {
	var out courier.BulkOp
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var maxSeq, cursor int64
		err := tx.QueryRow(ctx, `SELECT max_seq, cursor FROM bulk_ops WHERE id = $1 FOR UPDATE`, id).Scan(&maxSeq, &cursor)
		if errors.Is(err, pgx.ErrNoRows) {
			return courier.Errorf(courier.CodeNotFound, "operation %q not found", id)
		}
		if err != nil {
			return unavailable("read bulk operation", err)
		}
		op, err := scanBulk(tx.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1`, id))
		if err != nil {
			return unavailable("read bulk operation", err)
		}
		out = op
		if op.Done {
			return nil
		}
		f := op.Filter
		f.State = ""
		var w where
		w.filter(f)
		states := make([]string, 0, 2)
		for _, st := range op.BulkStates() {
			states = append(states, string(st))
		}
		w.add("state = ANY(?)", states)
		w.add("seq > ?", cursor)
		w.add("seq <= ?", maxSeq)
		rows, err := tx.Query(ctx, `SELECT seq, id, ordering_key FROM messages`+w.sql()+` ORDER BY seq LIMIT `+w.arg(limit), w.args...)
		if err != nil {
			return unavailable("select for bulk operation", err)
		}
		var ids, keys []string
		for rows.Next() {
			var mid string
			var key pgtype.Text
			if err := rows.Scan(&cursor, &mid, &key); err != nil {
				rows.Close()
				return unavailable("select for bulk operation", err)
			}
			ids = append(ids, mid)
			if key.Valid {
				keys = append(keys, key.String)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return unavailable("select for bulk operation", err)
		}
		if len(keys) > 0 {
			if _, err := tx.Exec(ctx, lockKeysSQL, keys); err != nil {
				return unavailable("lock ordering keys", err)
			}
		}
		n := 0
		for _, mid := range ids {
			a := courier.Action{At: now, Who: op.Who, Kind: op.Kind, Subject: mid, Detail: "bulk operation " + op.ID}
			decide := func(m *courier.Message) (*courier.Message, error) { return courier.Discard(m, now) }
			if op.Kind == courier.ActionResubmit {
				decide = func(m *courier.Message) (*courier.Message, error) { return courier.Resubmit(m, op.Route, now) }
				if op.Route != "" {
					a.Detail += ", route=" + op.Route
				}
			}
			if _, err := act(ctx, tx, mid, decide); err != nil {
				if courier.ErrorCode(err) == courier.CodeConflict {
					continue // not (or no longer) for this action: left as it is
				}
				return err
			}
			n++
			if err := insertAction(ctx, tx, a); err != nil {
				return err
			}
		}
		finished := len(ids) < limit
		if _, err := tx.Exec(ctx, `UPDATE bulk_ops SET cursor = $1, count = count + $2, done = $3, updated_at = $4 WHERE id = $5`,
			cursor, n, finished, now, id); err != nil {
			return unavailable("record bulk progress", err)
		}
		out.Count += n
		out.Done = finished
		out.UpdatedAt = now
		return nil
	})
	if err != nil {
		return courier.BulkOp{}, unavailable("bulk operation", err)
	}
	s.dueNow("") // resubmitted messages, or the next of a discarded one's key, may be due
	return out, nil
}

// Bulk returns one operation.
func (s *Store) Bulk(ctx context.Context, id string) (courier.BulkOp, error) {
	op, err := scanBulk(s.pool.QueryRow(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return op, courier.Errorf(courier.CodeNotFound, "operation %q not found", id)
	}
	if err != nil {
		return op, unavailable("read bulk operation", err)
	}
	return op, nil
}

// PendingBulks returns the operations not yet done.
func (s *Store) PendingBulks(ctx context.Context) ([]courier.BulkOp, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE NOT done ORDER BY created_at`)
	if err != nil {
		return nil, unavailable("pending bulk operations", err)
	}
	defer rows.Close()
	var out []courier.BulkOp
	for rows.Next() {
		op, err := scanBulk(rows)
		if err != nil {
			return nil, unavailable("pending bulk operations", err)
		}
		out = append(out, op)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("pending bulk operations", err)
	}
	return out, nil
}

func scanBulk(row pgx.Row) (courier.BulkOp, error) {
	var op courier.BulkOp
	var kind string
	var filter []byte
	var route pgtype.Text
	if err := row.Scan(&op.ID, &kind, &filter, &route, &op.Who, &op.Count, &op.Done, &op.CreatedAt, &op.UpdatedAt); err != nil {
		return op, err
	}
	if err := json.Unmarshal(filter, &op.Filter); err != nil {
		return op, fmt.Errorf("operation %s: filter: %w", op.ID, err)
	}
	op.Kind, op.Route = courier.ActionKind(kind), route.String
	op.CreatedAt, op.UpdatedAt = op.CreatedAt.UTC(), op.UpdatedAt.UTC()
	return op, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
