package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

// claimSQL leases the due messages of one route, highest priority first and
// the longest due first within a priority: ?1 is the route, ?2 now, ?3 the
// limit, ?4 the lease's end, ?5 its owner. Each arm of the union is a range
// of the messages_queued index holding only due messages of one priority,
// so nothing of other routes, of the future or beyond the limit is read.
var claimSQL = func() string {
	var arms []string
	for p := 9; p >= 0; p-- {
		arms = append(arms, fmt.Sprintf(`SELECT * FROM (SELECT seq, priority, next_attempt_at FROM messages INDEXED BY messages_queued
			WHERE state = 'queued' AND route = ?1 AND priority = %d AND next_attempt_at <= ?2
			ORDER BY next_attempt_at LIMIT ?3)`, p))
	}
	return `UPDATE messages SET state = 'inflight', lease_until = ?4, lease_owner = ?5,
	total_attempts = total_attempts + 1, updated_at = ?2
	WHERE seq IN (SELECT seq FROM (` + strings.Join(arms, "\nUNION ALL ") + `)
		ORDER BY priority DESC, next_attempt_at LIMIT ?3)
	RETURNING ` + messageColumns
}()

// applySQL writes a decided change, guarded by the state and the lease
// token (total_attempts) the decision was made on.
const applySQL = `UPDATE messages SET state = ?, reason = ?, route = ?, attempts = ?, abandoned = ?,
	escalated = ?, fallback_from = ?, round_started_at = ?, timer_at = ?, next_attempt_at = ?,
	lease_until = ?, lease_owner = ?, endpoint = ?, last_error = ?, last_class = ?, updated_at = ?, finished_at = ?
	WHERE id = ? AND state = ? AND total_attempts = ?`

const attemptSQL = `INSERT OR IGNORE INTO attempts (message_id, n, endpoint, route, started_at, duration_us,
	outcome, class, status, error, response) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// ClaimDue leases due messages route by route, highest priority first.
func (s *Store) ClaimDue(ctx context.Context, c courier.Claim) ([]*courier.Message, error) {
	var out []*courier.Message
	// A claim lost in a crash leaves its messages queued, which is what a
	// restart makes of them anyway: no need to wait for the disk.
	err := s.writeNoSync(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		stmt, body := tx.Stmt(s.claimStmt), tx.Stmt(s.payloadStmt)
		for _, q := range c.Routes {
			limit := q.Limit
			if c.Max > 0 {
				limit = min(limit, c.Max-len(out))
			}
			if limit <= 0 {
				continue
			}
			rows, err := stmt.Query(q.Route, micros(c.Now), limit, micros(c.LeaseUntil), c.Owner)
			if err != nil {
				return courier.Unavailable("the store", fmt.Errorf("claim: %w", err))
			}
			first := len(out)
			var seqs []int64
			for rows.Next() {
				m, seq, err := scanMessageSeq(rows, false)
				if err != nil {
					rows.Close()
					return courier.Unavailable("the store", fmt.Errorf("claim: %w", err))
				}
				out, seqs = append(out, m), append(seqs, seq)
			}
			if err := rows.Err(); err != nil {
				return courier.Unavailable("the store", fmt.Errorf("claim: %w", err))
			}
			if err := fillPayloads(body, seqs, out[first:]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].NextAttemptAt.Before(out[j].NextAttemptAt)
	})
	return out, nil
}

// Apply writes decided changes, each guarded by its state and token.
func (s *Store) Apply(ctx context.Context, changes []courier.Change) ([]bool, error) {
	applied := make([]bool, len(changes))
	err := s.write(ctx, func(tx *sql.Tx) error {
		update, attempt := tx.Stmt(s.applyStmt), tx.Stmt(s.attemptStmt)
		insert, body := tx.Stmt(s.insertStmt), tx.Stmt(s.bodyStmt)
		for i, c := range changes {
			m := c.Message
			res, err := update.Exec(string(m.State), nullString(string(m.Reason)), m.Route, m.Attempts, m.Abandoned,
				m.Escalated, nullString(m.FallbackFrom), micros(m.RoundStartedAt), micros(m.TimerAt), micros(m.NextAttemptAt),
				micros(m.LeaseUntil), nullString(m.LeaseOwner), nullString(m.Endpoint), nullString(m.LastError),
				nullString(string(m.LastClass)), micros(m.UpdatedAt), micros(m.FinishedAt),
				m.ID, string(c.From), c.Token)
			if err != nil {
				return courier.Unavailable("the store", fmt.Errorf("apply %s: %w", m.ID, err))
			}
			if n, _ := res.RowsAffected(); n == 0 {
				applied[i] = false
				continue
			}
			applied[i] = true
			if a := c.Attempt; a != nil {
				if _, err := attempt.Exec(m.ID, a.N, a.Endpoint, a.Route, micros(a.StartedAt), a.Duration.Microseconds(),
					string(a.Outcome), nullString(string(a.Class)), a.Status, nullString(a.Error), nullString(a.Response)); err != nil {
					return courier.Unavailable("the store", fmt.Errorf("record attempt of %s: %w", m.ID, err))
				}
			}
			for _, n := range c.Notices {
				// A notice whose id exists was sent by this same decision before.
				if _, err := execInsert(insert, body, n); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return applied, nil
}

// ExpiredLeases returns inflight messages whose lease ended before the time.
func (s *Store) ExpiredLeases(ctx context.Context, before time.Time, limit int) ([]*courier.Message, error) {
	return s.query(ctx, "expired leases", `SELECT `+messageColumns+` FROM messages INDEXED BY messages_leases
		WHERE state = 'inflight' AND lease_until < ? ORDER BY lease_until LIMIT ?`, micros(before), limit)
}

// DueTimers returns queued messages whose timer has come.
func (s *Store) DueTimers(ctx context.Context, now time.Time, limit int) ([]*courier.Message, error) {
	return s.query(ctx, "due timers", `SELECT `+messageColumns+` FROM messages INDEXED BY messages_timer
		WHERE timer_at <= ? AND state = 'queued' ORDER BY timer_at LIMIT ?`, micros(now), limit)
}

func (s *Store) query(ctx context.Context, what, q string, args ...any) ([]*courier.Message, error) {
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("%s: %w", what, err))
	}
	defer rows.Close()
	var out []*courier.Message
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, courier.Unavailable("the store", fmt.Errorf("%s: %w", what, err))
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("%s: %w", what, err))
	}
	return out, nil
}

// fillPayloads reads the payloads of claimed messages (msgs[i] has seqs[i])
// in one query.
func fillPayloads(stmt *sql.Stmt, seqs []int64, msgs []*courier.Message) error {
	if len(seqs) == 0 {
		return nil
	}
	list, _ := json.Marshal(seqs)
	at := make(map[int64]*courier.Message, len(seqs))
	for i, seq := range seqs {
		at[seq] = msgs[i]
	}
	rows, err := stmt.Query(string(list))
	if err != nil {
		return courier.Unavailable("the store", fmt.Errorf("claim: payloads: %w", err))
	}
	defer rows.Close()
	for rows.Next() {
		var seq int64
		var payload []byte
		if err := rows.Scan(&seq, &payload); err != nil {
			return courier.Unavailable("the store", fmt.Errorf("claim: payloads: %w", err))
		}
		if m := at[seq]; m != nil {
			m.Payload = payload
		}
	}
	return rows.Err()
}
