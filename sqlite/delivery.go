package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"time"

	courier "github.com/courier-gw/courier"
)

// claimSQL leases the due messages of one route and priority, the longest
// due first. The subquery is a range of the messages_queued index: due
// messages only, nothing of other routes or the future.
const claimSQL = `UPDATE messages SET state = 'inflight', lease_until = ?, lease_owner = ?,
	total_attempts = total_attempts + 1, updated_at = ?
	WHERE seq IN (SELECT seq FROM messages INDEXED BY messages_queued
		WHERE state = 'queued' AND route = ? AND priority = ? AND next_attempt_at <= ?
		ORDER BY next_attempt_at LIMIT ?)
	RETURNING ` + messageColumns

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
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		stmt := tx.Stmt(s.claimStmt)
		for _, q := range c.Routes {
			left := q.Limit
			for prio := 9; prio >= 0 && left > 0; prio-- {
				rows, err := stmt.Query(micros(c.LeaseUntil), c.Owner, micros(c.Now), q.Route, prio, micros(c.Now), left)
				if err != nil {
					return courier.Unavailable("the store", fmt.Errorf("claim: %w", err))
				}
				for rows.Next() {
					m, err := scanMessage(rows)
					if err != nil {
						rows.Close()
						return courier.Unavailable("the store", fmt.Errorf("claim: %w", err))
					}
					out = append(out, m)
					left--
				}
				if err := rows.Err(); err != nil {
					return courier.Unavailable("the store", fmt.Errorf("claim: %w", err))
				}
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
		update, attempt, insert := tx.Stmt(s.applyStmt), tx.Stmt(s.attemptStmt), tx.Stmt(s.insertStmt)
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
				if _, err := execInsert(insert, n); err != nil {
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
