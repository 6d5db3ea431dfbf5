package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// dueSQL lists the due messages of several routes in one statement: ?1 is
// a JSON array of the routes, ?2 now, ?3 the most any of them may take, ?4
// the set of priorities to look at (a prioritySet). For each route it
// answers the seqs of its due messages, highest priority first and the
// longest due first within a priority, comma-separated. Each arm of the
// union is a range of the messages_queued index holding only due messages
// of one route and one priority, so nothing of other routes, of the future
// or beyond the limit is read, and a claim over many routes costs one
// statement, not one per route. An arm's test of ?4 depends on no row, so
// SQLite decides it once, before the arm's loop: a priority no message has
// costs no seek.
//
// The limit is written +?3: SQLite recompiles a statement at every new
// binding of a parameter it used in planning (a LIMIT, or a value it
// compared with a partial index's condition), which for this statement
// cost more than running it. A unary plus keeps the parameter out of the
// planning and leaves the plan as it is; so for ?4.
var dueSQL = func() string {
	var arms []string
	for p := courier.MaxPriority; p >= 0; p-- {
		arms = append(arms, fmt.Sprintf(`SELECT * FROM (SELECT seq, priority, next_attempt_at FROM messages INDEXED BY messages_queued
			WHERE (+?4 & %d) != 0 AND `+queuedDue+` AND route = q.value AND priority = %d AND next_attempt_at <= ?2
			ORDER BY next_attempt_at LIMIT +?3)`, 1<<p, p))
	}
	return `SELECT q.key, (SELECT group_concat(seq, ',' ORDER BY priority DESC, next_attempt_at) FROM (
			SELECT * FROM (` + strings.Join(arms, "\nUNION ALL ") + `)
			ORDER BY priority DESC, next_attempt_at LIMIT +?3))
		FROM json_each(?1) AS q`
}()

// leaseSQL leases the messages listed (a JSON array of seqs in ?1) until
// ?2 to the owner ?3 at ?4. A lease keeps an active message of an ordering
// key active: its key's group is as it was.
const leaseSQL = `UPDATE messages SET state = 'inflight', lease_until = ?2, lease_owner = ?3,
	total_attempts = total_attempts + 1, updated_at = ?4
	WHERE seq IN (SELECT value FROM json_each(?1))`

// leasedSQL reads the messages listed (a JSON array of seqs), whole.
const leasedSQL = `SELECT ` + messageColumns + withPayload + ` FROM messages WHERE seq IN (SELECT value FROM json_each(?))`

// applySQL writes a decided change, guarded by the state and the lease
// token (total_attempts) the decision was made on. A queued message without
// a due time keeps the stored one: such a change was decided on a message
// waiting for its key, which waits on, or, if it was let go meanwhile,
// keeps the due time, round and timer that gave it.
const applySQL = `UPDATE messages SET state = ?1, reason = ?2, route = ?3, attempts = ?4, abandoned = ?5,
	escalated = ?6, fallback_from = ?7,
	round_started_at = CASE WHEN ?1 = 'queued' AND ?10 IS NULL AND next_attempt_at IS NOT NULL THEN round_started_at ELSE ?8 END,
	timer_at = CASE WHEN ?1 = 'queued' AND ?10 IS NULL AND next_attempt_at IS NOT NULL THEN timer_at ELSE ?9 END,
	next_attempt_at = CASE WHEN ?1 = 'queued' AND ?10 IS NULL THEN next_attempt_at ELSE ?10 END,
	lease_until = ?11, lease_owner = ?12, endpoint = ?13, last_error = ?14, last_class = ?15, updated_at = ?16,
	finished_at = ?17, order_skipped = ?21, step = ?22, failed_step = ?23, step_responses = ?24,
	resubmit_count = ?25, workflow = ?26
	WHERE id = ?18 AND subscription = ?27 AND state = ?19 AND total_attempts = ?20`

// deliveredSQL writes a Delivery (courier.Change.Delivery): the fields
// every delivery sets, and nothing else, under the same guard as applySQL.
// It binds 6 values where applySQL binds 27, and is most of what the
// outcomes of a busy route are.
const deliveredSQL = `UPDATE messages SET state = 'delivered', reason = NULL, attempts = ?1, abandoned = 0,
	next_attempt_at = NULL, timer_at = NULL, lease_until = NULL, lease_owner = NULL, endpoint = ?2,
	updated_at = ?3, finished_at = ?3
	WHERE id = ?4 AND subscription = ?5 AND state = 'inflight' AND total_attempts = ?6`

const attemptSQL = `INSERT OR IGNORE INTO attempts (message_id, n, endpoint, route, started_at, duration_us,
	outcome, class, status, error, response) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// ClaimDue leases due messages route by route, highest priority first. The
// due messages are found first, then leased, then read whole: an UPDATE
// that returned every column would cost more than the read.
func (s *Store) ClaimDue(ctx context.Context, c courier.Claim) ([]*courier.Message, error) {
	var out []*courier.Message
	// A claim lost in a crash leaves its messages queued, which is what a
	// restart makes of them anyway: no need to wait for the disk.
	err := s.writeNoSync(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		var seqs []int64
		routes := make([]string, 0, len(c.Routes))
		limit := 0
		for _, q := range c.Routes {
			if q.Limit > 0 {
				routes = append(routes, q.Route)
				limit = max(limit, q.Limit)
			}
		}
		if c.Max > 0 {
			limit = min(limit, c.Max)
		}
		if len(routes) == 0 || limit == 0 {
			return nil
		}
		list, _ := json.Marshal(routes)
		rows, err := s.stmt(tx, s.dueStmt).Query(string(list), micros(c.Now), limit, int64(s.priorities.set()))
		if err != nil {
			return classify("claim", err)
		}
		found := make([]string, len(routes))
		for rows.Next() {
			var i int
			var due sql.NullString
			if err := rows.Scan(&i, &due); err != nil {
				rows.Close()
				return classify("claim", err)
			}
			if i >= 0 && i < len(found) {
				found[i] = due.String
			}
		}
		if err := rows.Err(); err != nil {
			return classify("claim", err)
		}
		// Each route up to its own quota, in the order given, all
		// together up to Max.
		i := 0
		for _, q := range c.Routes {
			if q.Limit <= 0 {
				continue
			}
			due := found[i]
			i++
			for n := 0; due != "" && n < q.Limit && (c.Max <= 0 || len(seqs) < c.Max); n++ {
				var field string
				field, due, _ = strings.Cut(due, ",")
				seq, err := strconv.ParseInt(field, 10, 64)
				if err != nil {
					return classify(fmt.Sprintf("claim: a due seq %q", field), err)
				}
				seqs = append(seqs, seq)
			}
		}
		if len(seqs) == 0 {
			return nil
		}
		list, _ = json.Marshal(seqs)
		if _, err := s.stmt(tx, s.leaseStmt).Exec(string(list), micros(c.LeaseUntil), c.Owner, micros(c.Now)); err != nil {
			return classify("claim", err)
		}
		rows, err = s.stmt(tx, s.leasedStmt).Query(string(list))
		if err != nil {
			return classify("claim", err)
		}
		defer rows.Close()
		for rows.Next() {
			m, _, err := scanMessageSeq(rows, true)
			if err != nil {
				return classify("claim", err)
			}
			out = append(out, m)
		}
		if err := rows.Err(); err != nil {
			return classify("claim", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sqlstore.SortClaimed(out)
	return out, nil
}

// Apply writes decided changes, each guarded by its state and token.
func (s *Store) Apply(ctx context.Context, changes []courier.Change) ([]bool, error) {
	applied := make([]bool, len(changes))
	err := s.write(ctx, func(tx *sql.Tx) error {
		for i, c := range changes {
			var ok bool
			var err error
			if c.Delivery() {
				ok, err = s.delivered(tx, c)
			} else {
				ok, err = s.update(tx, c)
			}
			if err != nil {
				return err
			}
			applied[i] = ok
			if !ok {
				continue
			}
			m := c.Message
			if a := c.Attempt; a != nil {
				if _, err := s.stmt(tx, s.attemptStmt).Exec(m.Key(), int64(a.N), a.Endpoint, a.Route, micros(a.StartedAt), a.Duration.Microseconds(),
					string(a.Outcome), nullString(string(a.Class)), int64(a.Status), nullString(a.Error), nullString(a.Response)); err != nil {
					return classify("record attempt of "+m.Key(), err)
				}
			}
			for _, n := range c.Notices {
				// A notice whose id exists was sent by this same decision before.
				if _, err := s.execInsert(tx, s.insertStmt, n, 0); err != nil {
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

// delivered writes a Delivery and reports whether it applied.
func (s *Store) delivered(tx *sql.Tx, c courier.Change) (bool, error) {
	m := c.Message
	res, err := s.stmt(tx, s.deliveredStmt).Exec(int64(m.Attempts), nullString(m.Endpoint), micros(m.FinishedAt), m.ID, m.Subscription, int64(c.Token))
	if err != nil {
		return false, classify("apply "+m.ID, err)
	}
	n, _ := res.RowsAffected()
	if n > 0 {
		s.cur.usage.Add(m.ID, m.Size, c.From, courier.StateDelivered)
	}
	return n > 0, nil
}

// update writes one decided change, guarded by its state and token, and
// keeps the order of its key: it reports whether the change applied.
func (s *Store) update(tx *sql.Tx, c courier.Change) (bool, error) {
	m := c.Message
	var seq int64
	var priorRoute, priorState string
	if m.OrderingKey != "" {
		if err := s.stmt(tx, s.priorStmt).QueryRow(m.ID, m.Subscription).Scan(&seq, &priorRoute, &priorState); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return false, nil
			}
			return false, classify("apply "+m.ID, err)
		}
	}
	responses, err := encodeStepResponses(m.StepResponses)
	if err != nil {
		return false, err
	}
	// Integers go as int64, which the driver takes as they are.
	res, err := s.stmt(tx, s.applyStmt).Exec(string(m.State), nullString(string(m.Reason)), m.Route, int64(m.Attempts), int64(m.Abandoned),
		int64(m.Escalated), nullString(m.FallbackFrom), micros(m.RoundStartedAt), micros(m.TimerAt), micros(m.NextAttemptAt),
		micros(m.LeaseUntil), nullString(m.LeaseOwner), nullString(m.Endpoint), nullString(m.LastError),
		nullString(string(m.LastClass)), micros(m.UpdatedAt), micros(m.FinishedAt),
		m.ID, string(c.From), int64(c.Token), m.OrderSkipped, int64(m.Step), int64(m.FailedStep), responses,
		int64(m.ResubmitCount), nullString(m.Workflow), m.Subscription)
	if err != nil {
		return false, classify("apply "+m.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	s.cur.usage.Add(m.ID, m.Size, c.From, m.State)
	if m.OrderingKey != "" {
		if err := courier.Reorder(keyTx{s, tx}, m, courier.KeyPrior{Seq: seq, Route: priorRoute, State: courier.State(priorState)}); err != nil {
			return false, err
		}
	}
	return true, nil
}

// ExpiredLeases returns inflight messages whose lease ended before the time.
// (LIMIT +?: see dueSQL.)
func (s *Store) ExpiredLeases(ctx context.Context, before time.Time, limit int) ([]*courier.Message, error) {
	return s.query(ctx, "expired leases", `SELECT `+messageColumns+` FROM messages INDEXED BY messages_leases
		WHERE state = 'inflight' AND lease_until < ? ORDER BY lease_until LIMIT +?`, micros(before), limit)
}

// DueTimers returns queued messages whose timer has come. (LIMIT +?: see
// dueSQL.)
func (s *Store) DueTimers(ctx context.Context, now time.Time, limit int) ([]*courier.Message, error) {
	return s.query(ctx, "due timers", `SELECT `+messageColumns+` FROM messages INDEXED BY messages_timer
		WHERE timer_at <= ? AND state = 'queued' ORDER BY timer_at LIMIT +?`, micros(now), limit)
}

func (s *Store) query(ctx context.Context, what, q string, args ...any) ([]*courier.Message, error) {
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	return collect(nil, rows, err, what, scanMessage)
}

// dueRoutesSQL lists the routes with claimable messages, each with its
// earliest due time. It skips from route to route through messages_queued
// (one seek each, whatever a route holds) and finds each route's earliest
// due time with one seek per priority.
var dueRoutesSQL = func() string {
	var arms []string
	for p := 9; p >= 0; p-- {
		arms = append(arms, fmt.Sprintf(`COALESCE((SELECT MIN(next_attempt_at) FROM messages INDEXED BY messages_queued
			WHERE `+queuedDue+` AND route = r.route AND priority = %d), 9223372036854775807)`, p))
	}
	return `WITH RECURSIVE r(route) AS (
		SELECT (SELECT route FROM messages INDEXED BY messages_queued WHERE ` + queuedDue + ` ORDER BY route LIMIT 1)
		UNION ALL
		SELECT (SELECT m.route FROM messages AS m INDEXED BY messages_queued
			WHERE m.state = 'queued' AND m.next_attempt_at IS NOT NULL AND m.route > r.route ORDER BY m.route LIMIT 1)
		FROM r WHERE r.route IS NOT NULL
	)
	SELECT route, MIN(` + strings.Join(arms, ",\n") + `) FROM r WHERE route IS NOT NULL`
}()

// DueRoutes lists the routes with claimable messages and when each is due.
func (s *Store) DueRoutes(ctx context.Context) ([]courier.RouteDue, error) {
	rows, err := s.rdb.QueryContext(ctx, dueRoutesSQL)
	return collect(nil, rows, err, "due routes", func(row scanner) (courier.RouteDue, error) {
		var d courier.RouteDue
		var at int64
		err := row.Scan(&d.Route, &at)
		d.At = fromMicros(at)
		return d, err
	})
}
