package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

const bulkColumns = `id, kind, filter, route, who, count, done, created_at, updated_at`

// StartBulk records a bulk operation bounded by the newest message now.
func (s *Store) StartBulk(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error) {
	filter, err := json.Marshal(op.Filter)
	if err != nil {
		return courier.BulkOp{}, fmt.Errorf("encode filter: %w", err)
	}
	var out courier.BulkOp
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`INSERT INTO bulk_ops (id, kind, filter, route, who, max_seq, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, (SELECT COALESCE(MAX(seq), 0) FROM messages), ?, ?) ON CONFLICT (id) DO NOTHING`,
			op.ID, string(op.Kind), string(filter), nullString(op.Route), op.Who, micros(op.CreatedAt), micros(op.CreatedAt))
		if err != nil {
			return courier.Unavailable("the store", fmt.Errorf("start bulk operation: %w", err))
		}
		out, err = scanBulk(tx.QueryRow(`SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, op.ID))
		if err != nil {
			return courier.Unavailable("the store", fmt.Errorf("read bulk operation: %w", err))
		}
		if out.Kind != op.Kind || out.Route != op.Route || string(filter) != mustJSON(out.Filter) {
			return courier.Errorf(courier.CodeConflict, "operation %q exists with other settings", op.ID)
		}
		return nil
	})
	return out, err
}

// RunBulk does the next batch of an operation.
func (s *Store) RunBulk(ctx context.Context, id string, limit int, now time.Time) (courier.BulkOp, error) {
	var out courier.BulkOp
	err := s.write(ctx, func(tx *sql.Tx) error {
		var filterJSON string
		var maxSeq, cursor int64
		var done bool
		err := tx.QueryRow(`SELECT filter, max_seq, cursor, done FROM bulk_ops WHERE id = ?`, id).Scan(&filterJSON, &maxSeq, &cursor, &done)
		if errors.Is(err, sql.ErrNoRows) {
			return courier.Errorf(courier.CodeNotFound, "operation %q not found", id)
		}
		if err != nil {
			return courier.Unavailable("the store", fmt.Errorf("read bulk operation: %w", err))
		}
		op, err := scanBulk(tx.QueryRow(`SELECT `+bulkColumns+` FROM bulk_ops WHERE id = ?`, id))
		if err != nil {
			return courier.Unavailable("the store", fmt.Errorf("read bulk operation: %w", err))
		}
		if done {
			out = op
			return nil
		}
		f := op.Filter
		f.State = ""
		where, args := filterWhere(f)
		states := op.BulkStates()
		marks := strings.TrimSuffix(strings.Repeat("?,", len(states)), ",")
		where = append(where, "state IN ("+marks+")", "seq > ?", "seq <= ?")
		for _, st := range states {
			args = append(args, string(st))
		}
		args = append(args, cursor, maxSeq, limit)
		rows, err := tx.Query(`SELECT seq, id FROM messages WHERE `+strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`, args...)
		if err != nil {
			return courier.Unavailable("the store", fmt.Errorf("select for bulk operation: %w", err))
		}
		var ids []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&cursor, &id); err != nil {
				rows.Close()
				return courier.Unavailable("the store", fmt.Errorf("select for bulk operation: %w", err))
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return courier.Unavailable("the store", fmt.Errorf("select for bulk operation: %w", err))
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
			if _, err := s.act(tx, mid, decide); err != nil {
				if courier.ErrorCode(err) == courier.CodeConflict {
					continue // not (or no longer) for this action: left as it is
				}
				return err
			}
			n++
			if err := insertAction(tx, a); err != nil {
				return err
			}
		}
		finished := len(ids) < limit
		if _, err := tx.Exec(`UPDATE bulk_ops SET cursor = ?, count = count + ?, done = ?, updated_at = ? WHERE id = ?`,
			cursor, n, finished, micros(now), id); err != nil {
			return courier.Unavailable("the store", fmt.Errorf("record bulk progress: %w", err))
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
	if errors.Is(err, sql.ErrNoRows) {
		return op, courier.Errorf(courier.CodeNotFound, "operation %q not found", id)
	}
	if err != nil {
		return op, courier.Unavailable("the store", fmt.Errorf("read bulk operation: %w", err))
	}
	return op, nil
}

// PendingBulks returns the operations not yet done.
func (s *Store) PendingBulks(ctx context.Context) ([]courier.BulkOp, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+bulkColumns+` FROM bulk_ops WHERE done = 0 ORDER BY created_at`)
	if err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("pending bulk operations: %w", err))
	}
	defer rows.Close()
	var out []courier.BulkOp
	for rows.Next() {
		op, err := scanBulk(rows)
		if err != nil {
			return nil, courier.Unavailable("the store", fmt.Errorf("pending bulk operations: %w", err))
		}
		out = append(out, op)
	}
	return out, rows.Err()
}

func scanBulk(row scanner) (courier.BulkOp, error) {
	var op courier.BulkOp
	var kind, filter string
	var route sql.NullString
	var created, updated int64
	if err := row.Scan(&op.ID, &kind, &filter, &route, &op.Who, &op.Count, &op.Done, &created, &updated); err != nil {
		return op, err
	}
	if err := json.Unmarshal([]byte(filter), &op.Filter); err != nil {
		return op, fmt.Errorf("operation %s: filter: %w", op.ID, err)
	}
	op.Kind, op.Route = courier.ActionKind(kind), route.String
	op.CreatedAt, op.UpdatedAt = fromMicros(created), fromMicros(updated)
	return op, nil
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
