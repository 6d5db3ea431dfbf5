package postgres

import (
	"context"
	"sort"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

// claimSQL leases due messages of several routes in one statement: $1 the
// routes and $2 their quotas, in the order to serve them, $3 now, $4 the
// total limit, $5 the lease's end and $6 its owner. For each route and each
// priority it reads one range of the messages_queued index (due messages
// only, oldest first) and locks what it reads with SKIP LOCKED, so that
// nodes claiming at once take disjoint messages and never wait for each
// other; then it keeps each route's quota, highest priority first, and the
// total limit, in route order.
var claimSQL = `WITH quota AS (
	SELECT * FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS q(route, lim, ord)
), candidate AS (
	SELECT quota.ord, quota.lim, p.prio, d.seq, d.next_attempt_at
	FROM quota CROSS JOIN generate_series(9, 0, -1) AS p(prio)
	CROSS JOIN LATERAL (
		SELECT seq, next_attempt_at FROM messages
		WHERE state = 'queued' AND route = quota.route AND priority = p.prio AND next_attempt_at <= $3
		ORDER BY next_attempt_at LIMIT quota.lim
		FOR UPDATE SKIP LOCKED
	) d
), ranked AS (
	SELECT seq, ord, prio, next_attempt_at, lim,
		row_number() OVER (PARTITION BY ord ORDER BY prio DESC, next_attempt_at) AS rn
	FROM candidate
), chosen AS (
	SELECT seq FROM ranked WHERE rn <= lim ORDER BY ord, rn LIMIT $4
)
UPDATE messages m SET state = 'inflight', lease_until = $5, lease_owner = $6,
	total_attempts = m.total_attempts + 1, updated_at = $3
FROM chosen WHERE m.seq = chosen.seq
RETURNING ` + columns("m") + `, (SELECT payload FROM bodies b WHERE b.seq = m.seq)`

// ClaimDue leases due messages route by route, highest priority first.
func (s *Store) ClaimDue(ctx context.Context, c courier.Claim) ([]*courier.Message, error) {
	routes := make([]string, 0, len(c.Routes))
	limits := make([]int32, 0, len(c.Routes))
	total := 0
	for _, q := range c.Routes {
		if q.Limit > 0 {
			routes, limits = append(routes, q.Route), append(limits, int32(q.Limit))
			total += q.Limit
		}
	}
	if c.Max > 0 {
		total = min(total, c.Max)
	}
	if total == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, claimSQL, routes, limits, c.Now, total, c.LeaseUntil, c.Owner)
	if err != nil {
		return nil, unavailable("claim", err)
	}
	defer rows.Close()
	var out []*courier.Message
	for rows.Next() {
		m, _, err := scanMessage(rows, true)
		if err != nil {
			return nil, unavailable("claim", err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, unavailable("claim", err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return out[i].NextAttemptAt.Before(out[j].NextAttemptAt)
	})
	return out, nil
}

// applySQL writes a decided change, guarded by the state and lease token
// (total_attempts) it was decided on, and records its attempt (when $21 is
// set) only if the change applied. It returns the rows changed: 0 or 1.
const applySQL = `WITH changed AS (
	UPDATE messages SET state = $1, reason = $2, route = $3, attempts = $4, abandoned = $5,
		escalated = $6, fallback_from = $7, round_started_at = $8, timer_at = $9, next_attempt_at = $10,
		lease_until = $11, lease_owner = $12, endpoint = $13, last_error = $14, last_class = $15,
		updated_at = $16, finished_at = $17
	WHERE id = $18 AND state = $19 AND total_attempts = $20
	RETURNING id
), attempt AS (
	INSERT INTO attempts (message_id, n, endpoint, route, started_at, duration_us, outcome, class, status, error, response)
	SELECT id, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31 FROM changed WHERE $21::boolean
	ON CONFLICT DO NOTHING
)
SELECT count(*) FROM changed`

// Apply writes decided changes, each guarded by its state and token, in one
// transaction: one round trip for the changes, one for their notices.
func (s *Store) Apply(ctx context.Context, changes []courier.Change) ([]bool, error) {
	applied := make([]bool, len(changes))
	if len(changes) == 0 {
		return applied, nil
	}
	due := false
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) (err error) {
		var b pgx.Batch
		for _, c := range changes {
			m := c.Message
			a := c.Attempt
			if a == nil {
				a = &courier.Attempt{}
			}
			b.Queue(applySQL, string(m.State), nullString(string(m.Reason)), m.Route, m.Attempts, m.Abandoned,
				m.Escalated, nullString(m.FallbackFrom), m.RoundStartedAt, ts(m.TimerAt), ts(m.NextAttemptAt),
				ts(m.LeaseUntil), nullString(m.LeaseOwner), nullString(m.Endpoint), nullString(m.LastError),
				nullString(string(m.LastClass)), m.UpdatedAt, ts(m.FinishedAt),
				m.ID, string(c.From), c.Token,
				c.Attempt != nil, a.N, a.Endpoint, a.Route, a.StartedAt, a.Duration.Microseconds(),
				string(a.Outcome), nullString(string(a.Class)), a.Status, nullString(a.Error), nullString(a.Response))
		}
		results := tx.SendBatch(ctx, &b)
		for i := range changes {
			var n int
			if err := results.QueryRow().Scan(&n); err != nil {
				results.Close()
				return unavailable("apply "+changes[i].Message.ID, err)
			}
			applied[i] = n == 1
		}
		if err := results.Close(); err != nil {
			return unavailable("apply", err)
		}
		var notices []*courier.Message
		for i, c := range changes {
			if applied[i] {
				notices = append(notices, c.Notices...)
			}
		}
		// A notice whose id exists was sent by this same decision before.
		_, due, err = ingest(ctx, tx, notices)
		return err
	})
	if err != nil {
		return nil, unavailable("apply", err)
	}
	if due {
		s.dueNow()
	}
	return applied, nil
}

// ExpiredLeases returns inflight messages whose lease ended before the time.
func (s *Store) ExpiredLeases(ctx context.Context, before time.Time, limit int) ([]*courier.Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE state = 'inflight' AND lease_until < $1 ORDER BY lease_until LIMIT $2`, before, limit)
	return collectMessages(rows, err, "expired leases")
}

// DueTimers returns queued messages whose timer has come.
func (s *Store) DueTimers(ctx context.Context, now time.Time, limit int) ([]*courier.Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE timer_at <= $1 AND state = 'queued' ORDER BY timer_at LIMIT $2`, now, limit)
	return collectMessages(rows, err, "due timers")
}
