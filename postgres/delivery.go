package postgres

import (
	"context"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
)

// claimSQL leases due messages of several routes in one statement: $1 the
// routes and $2 their quotas, in the order to serve them, $3 now, $4 the
// total limit, $5 the lease's end and $6 its owner. For each route and each
// priority that stored messages have (table priorities) it reads one range
// of the messages_queued index (due messages only, oldest first) and locks
// what it reads with SKIP LOCKED, so that nodes claiming at once take
// disjoint messages and never wait for each other; then it keeps each
// route's quota, highest priority first, and the total limit, in route
// order. The lease finds each chosen row by its place in the table (ctid),
// not by a second search of the seqs' index: a row this statement has
// locked stays where it is until the statement ends. (Should a row have
// been changed by another transaction between the claim's snapshot and
// its lock, the lock takes the latest version; if its place were then
// not the one read, the lease would find no row there and the message
// would stay queued for the next claim, never be leased twice.)
var claimSQL = `WITH quota AS (
	SELECT * FROM unnest($1::text[], $2::int[]) WITH ORDINALITY AS q(route, lim, ord)
), candidate AS (
	SELECT quota.ord, quota.lim, p.prio, d.tid, d.next_attempt_at
	FROM quota CROSS JOIN unnest(ARRAY(SELECT priority FROM priorities)) AS p(prio)
	CROSS JOIN LATERAL (
		SELECT ctid AS tid, next_attempt_at FROM messages
		WHERE ` + queuedDue + ` AND route = quota.route AND priority = p.prio
			AND next_attempt_at <= $3
		ORDER BY next_attempt_at LIMIT quota.lim
		FOR UPDATE SKIP LOCKED
	) d
), ranked AS (
	SELECT tid, ord, prio, next_attempt_at, lim,
		row_number() OVER (PARTITION BY ord ORDER BY prio DESC, next_attempt_at) AS rn
	FROM candidate
), chosen AS (
	SELECT tid FROM ranked WHERE rn <= lim ORDER BY ord, rn LIMIT $4
)
UPDATE messages m SET state = 'inflight', lease_until = $5, lease_owner = $6,
	total_attempts = m.total_attempts + 1, updated_at = $3
FROM chosen WHERE m.ctid = chosen.tid
RETURNING ` + columns("m") + `, (SELECT payload FROM bodies b WHERE b.seq = ` + payloadOf("m") + `)`

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
	var out []*courier.Message
	err := pgx.BeginTxFunc(ctx, s.pool, claimPlan, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, claimSQL, routes, limits, c.Now, total, c.LeaseUntil, c.Owner)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			m, _, err := scanMessage(rows, true)
			if err != nil {
				return err
			}
			out = append(out, m)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, classify("claim", err)
	}
	sqlstore.SortClaimed(out)
	return out, nil
}

// claimPlan begins the transaction of a claim, whose statement is planned
// once per connection instead of at every claim. Left to choose,
// PostgreSQL planned each claim anew (its parameters are arrays, whose
// lengths only a custom plan knows): in a drain, 2.8 µs of planning per
// claimed message beside 17 µs of execution (pg_stat_statements), of the
// database's 43–47 µs of CPU per delivered message. The plan is made at a
// connection's first claim, maybe in a table of a few messages, and
// serves the connection until the table's statistics change; so it is
// made without reading any table whole, or it would lease the messages of
// the grown table by reading all of them (TestClaimFindsMessagesByIndex).
// Both settings are sent in the round trip of BEGIN and end with the
// transaction.
var claimPlan = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL enable_seqscan = off"}

// guardedWithAttempt ends applySQL and deliveredSQL alike: the change of
// each row of input i, to the message of its id and subscription, is
// guarded by the state and lease token it was decided on; its attempt
// (when has_attempt) is recorded, under the row's key, only if it
// applied; what the changes that applied did to their tenants' use is
// counted (countUsage); and the ordinals of those that applied are
// returned.
const guardedWithAttempt = `
	WHERE m.id = i.id AND m.subscription = i.subscription AND m.state = i.from_state AND m.total_attempts = i.token
	RETURNING i.ord, m.id, m.size, (m.state IN ` + liveStates + `)::int - (i.from_state IN ` + liveStates + `)::int AS delta
), usage_rows AS (SELECT id, size, delta FROM changed
), ` + countUsage + `, attempt AS (
	INSERT INTO attempts (message_id, n, endpoint, route, started_at, duration_us, outcome, class, status, error, response)
	SELECT i.key, i.n, i.a_endpoint, i.a_route, i.started_at, i.duration_us, i.outcome, i.class, i.status, i.error, i.response
	FROM changed JOIN input i ON i.ord = changed.ord WHERE i.has_attempt
	ON CONFLICT DO NOTHING
)
SELECT ord FROM changed`

// applySQL writes decided changes in one statement, from one array per
// column: each change, to the row of its id and subscription, is guarded
// by the state and lease token (total_attempts) it was decided on, and its
// attempt (when has_attempt) is recorded, under the row's key, only if the
// change applied. It returns the ordinals (from 1) of the changes that
// applied. A queued message without a due time keeps the stored one: such
// a change was decided on a message waiting for its key, which waits on,
// or, if it was let go meanwhile, keeps the due time, round and timer that
// gave it.
const applySQL = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::int[], $6::int[], $7::text[],
		$8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $11::timestamptz[], $12::text[], $13::text[],
		$14::text[], $15::text[], $16::timestamptz[], $17::timestamptz[], $18::text[], $19::text[], $20::int[],
		$21::boolean[], $22::boolean[], $23::int[], $24::text[], $25::text[], $26::timestamptz[], $27::bigint[],
		$28::text[], $29::text[], $30::int[], $31::text[], $32::text[], $33::int[], $34::int[], $35::text[],
		$36::int[], $37::text[], $38::text[], $39::text[])
	WITH ORDINALITY AS t(state, reason, route, attempts, abandoned, escalated, fallback_from,
		round_started_at, timer_at, next_attempt_at, lease_until, lease_owner, endpoint,
		last_error, last_class, updated_at, finished_at, id, from_state, token,
		order_skipped, has_attempt, n, a_endpoint, a_route, started_at, duration_us,
		outcome, class, status, error, response, step, failed_step, step_responses, resubmit_count, workflow,
		subscription, key, ord)
), changed AS (
	UPDATE messages m SET state = i.state, reason = i.reason, route = i.route, attempts = i.attempts,
		abandoned = i.abandoned, escalated = i.escalated, fallback_from = i.fallback_from,
		round_started_at = CASE WHEN i.state = 'queued' AND i.next_attempt_at IS NULL AND m.next_attempt_at IS NOT NULL
			THEN m.round_started_at ELSE i.round_started_at END,
		timer_at = CASE WHEN i.state = 'queued' AND i.next_attempt_at IS NULL AND m.next_attempt_at IS NOT NULL
			THEN m.timer_at ELSE i.timer_at END,
		next_attempt_at = CASE WHEN i.state = 'queued' AND i.next_attempt_at IS NULL THEN m.next_attempt_at ELSE i.next_attempt_at END,
		order_skipped = i.order_skipped, lease_until = i.lease_until, lease_owner = i.lease_owner,
		endpoint = i.endpoint, last_error = i.last_error, last_class = i.last_class,
		updated_at = i.updated_at, finished_at = i.finished_at,
		step = i.step, failed_step = i.failed_step, step_responses = i.step_responses,
		resubmit_count = i.resubmit_count, workflow = i.workflow
	FROM input i` + guardedWithAttempt

// deliveredSQL writes Deliveries (courier.Change.Delivery) as applySQL
// would, from 19 arrays where applySQL takes 39: of the message, the
// fields every delivery sets and nothing else, under the same guard; the
// attempt (when has_attempt) as given, if the change applied. It returns
// the ordinals (from 1) of the changes that applied. The state of the
// guard (always inflight) comes in an array, as in applySQL: written as a
// constant, it matched the partial index of leases, and the planner read
// every message in flight for each batch instead of finding the batch's
// by their ids (TestApplyFindsMessagesByIndex).
const deliveredSQL = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::text[], $6::timestamptz[],
		$7::boolean[], $8::text[], $9::int[], $10::text[], $11::text[], $12::timestamptz[], $13::bigint[],
		$14::text[], $15::text[], $16::int[], $17::text[], $18::text[], $19::text[])
	WITH ORDINALITY AS t(id, subscription, token, attempts, endpoint, at,
		has_attempt, key, n, a_endpoint, a_route, started_at, duration_us, outcome, class, status, error, response,
		from_state, ord)
), changed AS (
	UPDATE messages m SET state = 'delivered', reason = NULL, attempts = i.attempts, abandoned = 0,
		next_attempt_at = NULL, timer_at = NULL, lease_until = NULL, lease_owner = NULL, endpoint = i.endpoint,
		updated_at = i.at, finished_at = i.at
	FROM input i` + guardedWithAttempt

// deliveredArgs turns Deliveries into the arrays of deliveredSQL.
func deliveredArgs(changes []courier.Change) []any {
	n := len(changes)
	var (
		ids, subs, endpoints, froms = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		tokens, attempts            = make([]int32, n), make([]int32, n)
		at                          = make([]time.Time, n)
		a                           = newAttemptColumns(n)
	)
	for i, c := range changes {
		m := c.Message
		ids[i], subs[i], endpoints[i], froms[i] = m.ID, m.Subscription, m.Endpoint, string(c.From)
		tokens[i], attempts[i], at[i] = int32(c.Token), int32(m.Attempts), m.FinishedAt
		a.set(i, c)
	}
	return []any{ids, subs, tokens, attempts, endpoints, at, a.has, a.keys, a.ns, a.endpoints, a.routes, a.started,
		a.durations, a.outcomes, a.classes, a.statuses, a.errs, a.responses, froms}
}

// attemptColumns are the arrays of the attempts that applySQL and
// deliveredSQL record (guardedWithAttempt), one element per change.
type attemptColumns struct {
	has                         []bool
	keys                        []string // the message's Key
	ns, statuses                []int32
	endpoints, routes, outcomes []string
	classes, errs, responses    []*string
	started                     []time.Time
	durations                   []int64
}

func newAttemptColumns(n int) attemptColumns {
	return attemptColumns{has: make([]bool, n), keys: make([]string, n), ns: make([]int32, n), statuses: make([]int32, n),
		endpoints: make([]string, n), routes: make([]string, n), outcomes: make([]string, n),
		classes: make([]*string, n), errs: make([]*string, n), responses: make([]*string, n),
		started: make([]time.Time, n), durations: make([]int64, n)}
}

// set fills element i with the attempt of c, if it has one.
func (a *attemptColumns) set(i int, c courier.Change) {
	a.keys[i] = c.Message.Key()
	at := c.Attempt
	if at == nil {
		a.started[i] = c.Message.UpdatedAt // unused, but the column is not null
		return
	}
	a.has[i], a.ns[i], a.statuses[i] = true, int32(at.N), int32(at.Status)
	a.endpoints[i], a.routes[i], a.outcomes[i] = at.Endpoint, at.Route, string(at.Outcome)
	a.classes[i], a.errs[i], a.responses[i] = nullString(string(at.Class)), nullString(at.Error), nullString(at.Response)
	a.started[i], a.durations[i] = at.StartedAt, at.Duration.Microseconds()
}

// byIndex begins a transaction whose statements find the messages they
// change through an index, never by reading the whole table. Left to
// itself, the planner joined a batch of a few hundred outcomes to 30,000
// messages in a table that autovacuum had not analysed yet (it took them
// for 8,000) by hashing the whole table, so that every batch read every
// message (TestApplyFindsMessagesByIndex). The setting is sent in the same
// round trip as BEGIN (the simple protocol takes both) and ends with the
// transaction.
var byIndex = pgx.TxOptions{BeginQuery: "BEGIN; SET LOCAL enable_seqscan = off"}

// applyArgs turns changes into the column arrays of applySQL.
func applyArgs(changes []courier.Change) ([]any, error) {
	n := len(changes)
	var (
		states, routes, ids, froms                  = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		reasons, fallbacks, owners, endpoints, errs = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		classes                                     = make([]*string, n)
		attempts, abandoned, escalated, tokens      = make([]int32, n), make([]int32, n), make([]int32, n), make([]int32, n)
		rounds, updated                             = make([]time.Time, n), make([]time.Time, n)
		timers, nexts, leases, finished             = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		skipped                                     = make([]bool, n)
		steps, failedSteps                          = make([]int32, n), make([]int32, n)
		stepResponses                               = make([]*string, n)
		resubmits                                   = make([]int32, n)
		workflows                                   = make([]*string, n)
		subs                                        = make([]string, n)
		a                                           = newAttemptColumns(n)
	)
	for i, c := range changes {
		m := c.Message
		states[i], routes[i], ids[i], froms[i] = string(m.State), m.Route, m.ID, string(c.From)
		reasons[i], fallbacks[i], owners[i] = nullString(string(m.Reason)), nullString(m.FallbackFrom), nullString(m.LeaseOwner)
		endpoints[i], errs[i], classes[i] = nullString(m.Endpoint), nullString(m.LastError), nullString(string(m.LastClass))
		attempts[i], abandoned[i], escalated[i], tokens[i] = int32(m.Attempts), int32(m.Abandoned), int32(m.Escalated), int32(c.Token)
		rounds[i], updated[i] = m.RoundStartedAt, m.UpdatedAt
		timers[i], nexts[i], leases[i], finished[i] = ts(m.TimerAt), ts(m.NextAttemptAt), ts(m.LeaseUntil), ts(m.FinishedAt)
		skipped[i] = m.OrderSkipped
		steps[i], failedSteps[i] = int32(m.Step), int32(m.FailedStep)
		resubmits[i], workflows[i] = int32(m.ResubmitCount), nullString(m.Workflow)
		subs[i] = m.Subscription
		var err error
		if stepResponses[i], err = encodeStepResponses(m.StepResponses); err != nil {
			return nil, err
		}
		a.set(i, c)
	}
	return []any{states, reasons, routes, attempts, abandoned, escalated, fallbacks, rounds, timers, nexts, leases,
		owners, endpoints, errs, classes, updated, finished, ids, froms, tokens, skipped, a.has, a.ns, a.endpoints, a.routes,
		a.started, a.durations, a.outcomes, a.classes, a.statuses, a.errs, a.responses, steps, failedSteps, stepResponses,
		resubmits, workflows, subs, a.keys}, nil
}

// Apply writes decided changes, each guarded by its state and token, in one
// transaction: one statement for the changes (after the locks of their
// ordering keys, if they have any), then their keys' groups settled, and
// one statement for their notices. Where the keyed messages stood before
// is read before the locks are taken, so that they are held a statement
// less: only a change that applies under its guard is settled, and a
// writer that moved its message meanwhile would have made the guard fail.
func (s *Store) Apply(ctx context.Context, changes []courier.Change) ([]bool, error) {
	applied := make([]bool, len(changes))
	if len(changes) == 0 {
		return applied, nil
	}
	msgs := make([]*courier.Message, len(changes))
	for i, c := range changes {
		msgs[i] = c.Message
	}
	keys := orderingKeys(msgs)
	var due []string
	var locked time.Time
	err := pgx.BeginTxFunc(ctx, s.pool, byIndex, func(tx pgx.Tx) (err error) {
		var priors map[string]courier.KeyPrior
		if len(keys) > 0 {
			if priors, err = readPriors(ctx, tx, changes); err != nil {
				return err
			}
			// The keys' groups are read and changed under their locks,
			// taken all first, in order, so that two writers never
			// deadlock.
			if _, err := tx.Exec(ctx, lockKeysSQL, keys); err != nil {
				return classify("lock ordering keys", err)
			}
			locked = time.Now()
			// A change of a key's holder may have made the next one due.
			for _, m := range msgs {
				if m.OrderingKey != "" {
					due = append(due, m.Route)
				}
			}
		}
		// Deliveries by deliveredSQL, the rest by applySQL; each statement
		// answers the ordinals, among its own, of what applied.
		var whole, plain []courier.Change
		var wholeAt, plainAt []int
		for i, c := range changes {
			if c.Delivery() {
				plain, plainAt = append(plain, c), append(plainAt, i)
			} else {
				whole, wholeAt = append(whole, c), append(wholeAt, i)
			}
		}
		run := func(q string, args []any, at []int) error {
			rows, err := tx.Query(ctx, q, args...)
			if err != nil {
				return classify("apply", err)
			}
			ords, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return classify("apply", err)
			}
			for _, ord := range ords {
				applied[at[ord-1]] = true
			}
			return nil
		}
		if len(whole) > 0 {
			args, err := applyArgs(whole)
			if err != nil {
				return err
			}
			if err := run(applySQL, args, wholeAt); err != nil {
				return err
			}
		}
		if len(plain) > 0 {
			if err := run(deliveredSQL, deliveredArgs(plain), plainAt); err != nil {
				return err
			}
		}
		// A key that one change left on its route, as an outcome does, is
		// settled with the others of the batch in two statements; a key
		// that more than one change touches, or that changes route or
		// leaves the suspended, is reordered on its own.
		changed := map[string]int{}
		for i, c := range changes {
			if _, ok := priors[c.Message.Key()]; ok && applied[i] {
				changed[c.Message.OrderingKey]++
			}
		}
		var settle []keySettle
		for i, c := range changes {
			p, ok := priors[c.Message.Key()]
			if !ok || !applied[i] {
				continue
			}
			m := c.Message
			if changed[m.OrderingKey] == 1 && p.State != courier.StateSuspended && p.Route == m.Route {
				settle = append(settle, keySettle{route: p.Route, key: m.OrderingKey, now: m.UpdatedAt})
				continue
			}
			if err := courier.Reorder(keyTx{ctx, tx}, m, p); err != nil {
				return err
			}
		}
		if err := settleKeys(ctx, tx, settle); err != nil {
			return err
		}
		var notices []*courier.Message
		for i, c := range changes {
			if applied[i] {
				notices = append(notices, c.Notices...)
			}
		}
		// A notice whose id exists was sent by this same decision before.
		var b ingestBatch
		b.add(notices)
		_, noticesDue, err := ingest(ctx, tx, b)
		due = append(due, noticesDue...)
		return err
	})
	if s.keysHeld != nil && !locked.IsZero() {
		s.keysHeld(time.Since(locked))
	}
	if err != nil {
		return nil, classify("apply", err)
	}
	s.dueNow(due...)
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

// dueRoutesSQL lists the routes with claimable messages, each with its
// earliest due time: it skips from route to route through messages_queued
// (one index descent each, whatever a route holds) and finds each route's
// earliest due time with one descent per priority in use.
const dueRoutesSQL = `WITH RECURSIVE r(route) AS (
	(SELECT route FROM messages WHERE ` + queuedDue + ` ORDER BY route LIMIT 1)
	UNION ALL
	SELECT (SELECT m.route FROM messages m WHERE m.state = 'queued' AND m.next_attempt_at IS NOT NULL
		AND m.route > r.route ORDER BY m.route LIMIT 1)
	FROM r WHERE r.route IS NOT NULL
)
SELECT r.route, (SELECT min(d.next_attempt_at) FROM unnest(ARRAY(SELECT priority FROM priorities)) AS p(prio)
	CROSS JOIN LATERAL (SELECT next_attempt_at FROM messages
		WHERE ` + queuedDue + ` AND route = r.route AND priority = p.prio
		ORDER BY next_attempt_at LIMIT 1) d)
FROM r WHERE r.route IS NOT NULL`

// DueRoutes lists the routes with claimable messages and when each is due.
func (s *Store) DueRoutes(ctx context.Context) ([]courier.RouteDue, error) {
	rows, err := s.pool.Query(ctx, dueRoutesSQL)
	if err != nil {
		return nil, classify("due routes", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (courier.RouteDue, error) {
		var d courier.RouteDue
		err := row.Scan(&d.Route, &d.At)
		return d, err
	})
	if err != nil {
		return nil, classify("due routes", err)
	}
	return out, nil
}
