package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
)

// messageFields are read by scanMessage, in this order.
var messageFields = []string{"seq", "id", "type", "route", "size", "content_type", "headers", "ordering_key", "priority",
	"deliver_after", "expires_at", "hash", "state", "reason", "attempts", "total_attempts", "abandoned", "resubmit_count",
	"round_started_at", "escalated", "fallback_from", "timer_at", "next_attempt_at",
	"lease_until", "lease_owner", "endpoint", "last_error", "last_class", "created_at", "updated_at", "finished_at", "sender", "order_skipped",
	"workflow", "step", "failed_step", "step_responses", "recipient"}

// columns lists messageFields, each prefixed with the table alias if one is given.
func columns(alias string) string {
	if alias == "" {
		return strings.Join(messageFields, ", ")
	}
	return alias + "." + strings.Join(messageFields, ", "+alias+".")
}

var messageColumns = columns("")

// ingestSQL inserts messages and their payloads in one statement, from one
// array per column, and returns the ids it created. Rows are inserted in
// input order, so of two items with the same id the first is stored; an id
// that exists already is left alone (ON CONFLICT DO NOTHING also waits for a
// concurrent insert of the same id, and then leaves it alone too). The
// priorities of the messages go into table priorities in the same
// statement, which claims read for the priorities to look at.
const ingestSQL = `WITH input AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[],
		$8::smallint[], $9::timestamptz[], $10::timestamptz[], $11::text[], $12::text[], $13::text[], $14::text[],
		$15::timestamptz[], $16::timestamptz[], $17::timestamptz[], $18::timestamptz[], $19::timestamptz[],
		$20::timestamptz[], $21::bytea[], $22::text[], $23::boolean[], $24::text[], $25::int[], $26::int[], $27::text[], $28::text[])
	WITH ORDINALITY AS t(id, type, route, size, content_type, headers, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, payload, sender, order_skipped, workflow, step, failed_step, step_responses, recipient, ord)
), created AS (
	INSERT INTO messages (id, type, route, size, content_type, headers, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, sender, order_skipped, workflow, step, failed_step, step_responses, recipient)
	SELECT id, type, route, size, content_type, headers::jsonb, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, sender, order_skipped, workflow, step, failed_step, step_responses, recipient
	FROM input ORDER BY ord
	ON CONFLICT (id) DO NOTHING
	RETURNING seq, id
), priorities_used AS (
	INSERT INTO priorities (priority) SELECT DISTINCT priority FROM input ON CONFLICT DO NOTHING
), payloads AS (
	INSERT INTO bodies (seq, payload)
	SELECT DISTINCT ON (input.id) created.seq, input.payload
	FROM created JOIN input ON input.id = created.id ORDER BY input.id, input.ord
)
SELECT id FROM created`

// ingestArgs turns messages into the column arrays of ingestSQL.
func ingestArgs(msgs []*courier.Message) ([]any, error) {
	n := len(msgs)
	var (
		ids, types, routes, contentTypes, hashes, states = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		sizes                                            = make([]int32, n)
		prios                                            = make([]int16, n)
		headers, keys, reasons, lastErrors, senders      = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		workflows, responses, recipients                 = make([]*string, n), make([]*string, n), make([]*string, n)
		steps, failedSteps                               = make([]int32, n), make([]int32, n)
		deliverAfter, expires, next, finished, timers    = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		created, updated, round                          = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		payloads                                         = make([][]byte, n)
		skipped                                          = make([]bool, n)
	)
	for i, m := range msgs {
		h, err := encodeHeaders(m.Headers)
		if err != nil {
			return nil, err
		}
		if responses[i], err = encodeStepResponses(m.StepResponses); err != nil {
			return nil, err
		}
		ids[i], types[i], routes[i], contentTypes[i], hashes[i], states[i] = m.ID, m.Type, m.Route, m.ContentType, m.Hash, string(m.State)
		sizes[i], prios[i] = int32(len(m.Payload)), int16(m.Priority)
		headers[i], keys[i], reasons[i], lastErrors[i] = h, nullString(m.OrderingKey), nullString(string(m.Reason)), nullString(m.LastError)
		deliverAfter[i], expires[i], next[i], finished[i], timers[i] = ts(m.DeliverAfter), ts(m.ExpiresAt), ts(m.NextAttemptAt), ts(m.FinishedAt), ts(m.TimerAt)
		created[i], updated[i], round[i] = m.CreatedAt, m.UpdatedAt, sqlstore.OrDefault(m.RoundStartedAt, m.CreatedAt)
		payloads[i], senders[i], skipped[i] = sqlstore.NonNil(m.Payload), nullString(m.Sender), m.OrderSkipped
		workflows[i], steps[i], failedSteps[i] = nullString(m.Workflow), int32(m.Step), int32(m.FailedStep)
		recipients[i] = nullString(m.Recipient)
	}
	return []any{ids, types, routes, sizes, contentTypes, headers, keys, prios, deliverAfter, expires, hashes,
		states, reasons, lastErrors, next, created, updated, finished, round, timers, payloads, senders, skipped,
		workflows, steps, failedSteps, responses, recipients}, nil
}

// querier is what a pool and a transaction have in common.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Ingest stores the messages in one statement: one commit, however many,
// shared with the ingests of other callers waiting at the time (group.go).
// Messages with ordering keys are ingested under the keys' locks, taken
// first in key order, so that of two nodes ingesting for one key each sees
// the other's messages before it decides whether its own wait.
func (s *Store) Ingest(ctx context.Context, msgs []*courier.Message) ([]courier.IngestResult, error) {
	var results []courier.IngestResult
	var due []string
	var err error
	if keys := orderingKeys(msgs); len(keys) == 0 {
		// Its group tells the other nodes of the due routes.
		results, err = s.groupIngest(ctx, msgs)
	} else {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, lockKeysSQL, keys); err != nil {
				return classify("lock ordering keys", err)
			}
			// Whether each waits for its key is decided before it is
			// stored, so that the sender is told what is stored.
			if err := admit(ctx, tx, msgs); err != nil {
				return err
			}
			if results, due, err = ingest(ctx, tx, msgs); err != nil {
				return err
			}
			return settleIngested(ctx, tx, msgs, results, &due)
		})
		if err != nil {
			err = classify("ingest", err)
		}
	}
	if err != nil {
		return nil, err
	}
	s.dueNow(due...)
	return results, nil
}

// settleIngested lets go the keyed messages that admit made wait behind a
// message that was not stored after all (its id was taken), and tells the
// created ones so: the groups of an ingest are settled after it.
func settleIngested(ctx context.Context, tx pgx.Tx, msgs []*courier.Message, results []courier.IngestResult, due *[]string) error {
	type group struct{ route, key string }
	done := map[group]bool{}
	promoted := false
	for _, m := range msgs {
		gk := group{m.Route, m.OrderingKey}
		if !courier.JoinsKey(m) || done[gk] {
			continue
		}
		done[gk] = true
		seq, _, err := settle(ctx, tx, m.Route, m.OrderingKey, m.UpdatedAt)
		if err != nil {
			return err
		}
		if seq != 0 {
			promoted = true
			*due = append(*due, m.Route)
		}
	}
	if !promoted {
		return nil
	}
	for i, m := range msgs {
		if results[i].Status != courier.IngestCreated || !m.Waiting() {
			continue
		}
		var next *time.Time
		if err := tx.QueryRow(ctx, `SELECT next_attempt_at FROM messages WHERE id = $1`, m.ID).Scan(&next); err != nil {
			return classify("read back "+m.ID, err)
		}
		if next != nil {
			m.NextAttemptAt = *next
		}
	}
	return nil
}

// ingest inserts msgs through q and works out each one's result; due
// lists the routes of the created messages that are queued and due now.
func ingest(ctx context.Context, q querier, msgs []*courier.Message) (results []courier.IngestResult, due []string, err error) {
	if len(msgs) == 0 {
		return []courier.IngestResult{}, nil, nil
	}
	args, err := ingestArgs(msgs)
	if err != nil {
		return nil, nil, err
	}
	rows, err := q.Query(ctx, ingestSQL, args...)
	if err != nil {
		return nil, nil, classify("ingest", err)
	}
	created, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, classify("ingest", err)
	}
	fresh := make(map[string]bool, len(created))
	for _, id := range created {
		fresh[id] = true
	}
	results = make([]courier.IngestResult, len(msgs))
	var others []string
	now := time.Now()
	for i, m := range msgs {
		if fresh[m.ID] {
			fresh[m.ID] = false // a later item with the same id is a repeat of this one
			results[i].Status = courier.IngestCreated
			if m.State == courier.StateQueued && !m.NextAttemptAt.After(now) && (len(due) == 0 || due[len(due)-1] != m.Route) {
				due = append(due, m.Route)
			}
			continue
		}
		others = append(others, m.ID)
	}
	if len(others) == 0 {
		return results, due, nil
	}
	rows, err = q.Query(ctx, `SELECT `+messageColumns+` FROM messages WHERE id = ANY($1)`, others)
	found, err := collectMessages(rows, err, "read existing messages")
	if err != nil {
		return nil, nil, err
	}
	stored := make(map[string]*courier.Message, len(found))
	for _, m := range found {
		stored[m.ID] = m
	}
	for i, m := range msgs {
		if results[i].Status != 0 {
			continue
		}
		old := stored[m.ID]
		if old == nil {
			// The insert met a row that a purge removed before the read:
			// sending it again stores it.
			return nil, nil, courier.Unavailable("the store", fmt.Errorf("ingest: message %s was neither created nor found", m.ID))
		}
		results[i] = sqlstore.Existing(old, m)
	}
	return results, due, nil
}

// Message returns one message with its payload.
func (s *Store) Message(ctx context.Context, id string) (*courier.Message, error) {
	m, _, err := scanMessage(s.pool.QueryRow(ctx, `SELECT `+columns("m")+`, b.payload
		FROM messages m LEFT JOIN bodies b ON b.seq = m.seq WHERE m.id = $1`, id), true)
	if err != nil {
		return nil, one("read message "+id, err, sqlstore.MessageNotFound(id))
	}
	return m, nil
}

// Messages lists messages newest first; the cursor is the ingest sequence
// number of the last message of the previous page.
func (s *Store) Messages(ctx context.Context, f courier.MessageFilter) (courier.MessagePage, error) {
	page, err := sqlstore.ListMessages(sqlstore.Where{Numbered: true}, messageColumns, f,
		func(q string, args ...any) (sqlstore.Rows, error) { return s.pool.Query(ctx, q, args...) },
		func(row scanner) (*courier.Message, int64, error) { return scanMessage(row, false) })
	return page, classify("list messages", err)
}

// Attempts returns the attempts of a message, oldest first.
func (s *Store) Attempts(ctx context.Context, id string) ([]courier.Attempt, error) {
	if _, err := s.Message(ctx, id); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT n, endpoint, route, started_at, duration_us, outcome,
		class, status, error, response FROM attempts WHERE message_id = $1 ORDER BY n`, id)
	return collect([]courier.Attempt{}, rows, err, "list attempts", func(row scanner) (courier.Attempt, error) {
		a := courier.Attempt{MessageID: id}
		var durationUS int64
		var class, errText, response pgtype.Text
		err := row.Scan(&a.N, &a.Endpoint, &a.Route, &a.StartedAt, &durationUS, &a.Outcome, &class, &a.Status, &errText, &response)
		a.StartedAt = a.StartedAt.UTC()
		a.Duration = time.Duration(durationUS) * time.Microsecond
		a.Class, a.Error, a.Response = courier.ErrorClass(class.String), errText.String, response.String
		return a, err
	})
}

// Discard moves a queued or suspended message to discarded.
func (s *Store) Discard(ctx context.Context, id string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Discard(id, a)
	return s.transition(ctx, id, a, decide)
}

// Resubmit moves a suspended message back to queued, due at a.At.
func (s *Store) Resubmit(ctx context.Context, id, route string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Resubmit(id, route, a)
	m, err := s.transition(ctx, id, a, decide)
	if err == nil {
		s.dueNow(m.Route)
	}
	return m, err
}

// transition changes a message as decide says and records the operator
// action, in one transaction under the lock of its ordering key.
func (s *Store) transition(ctx context.Context, id string, a courier.Action, decide sqlstore.Decide) (*courier.Message, error) {
	var m *courier.Message
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT courier_lock_keys(array_agg(ordering_key)) FROM messages WHERE id = $1`, id); err != nil {
			return classify("lock the ordering key of "+id, err)
		}
		var err error
		if m, err = act(ctx, tx, id, decide); err != nil {
			return err
		}
		return insertAction(ctx, tx, a)
	})
	if err != nil {
		return nil, classify(string(a.Kind), err)
	}
	if m.OrderingKey != "" {
		s.dueNow(m.Route) // the next message of its key may be due now
	}
	return m, nil
}

// act reads a message (locking its row), decides its change and writes it,
// keeping the order of its key; the caller holds the key's lock.
func act(ctx context.Context, tx pgx.Tx, id string, decide sqlstore.Decide) (*courier.Message, error) {
	m, seq, err := scanMessage(tx.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages WHERE id = $1 FOR UPDATE`, id), false)
	if err != nil {
		return nil, one("read message "+id, err, sqlstore.MessageNotFound(id))
	}
	next, err := decide(m)
	if err != nil {
		return nil, err
	}
	args, err := applyArgs([]courier.Change{{Message: next, From: m.State, Token: m.TotalAttempts}})
	if err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, applySQL, args...)
	if err != nil {
		return nil, classify("change message "+id, err)
	}
	ords, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, classify("change message "+id, err)
	}
	if len(ords) != 1 {
		// The row is locked and was read as it is: the change must apply.
		return nil, courier.Internal(fmt.Errorf("change message %s: %d rows changed", id, len(ords)))
	}
	if err := reorder(ctx, tx, next, prior{seq: seq, route: m.Route, state: m.State}); err != nil {
		return nil, err
	}
	return next, nil
}

// lockKeysSQL takes the transaction-scoped locks of ordering keys ($1), in
// key order (migration 0002).
const lockKeysSQL = `SELECT courier_lock_keys($1::text[])`

// orderingKeys lists the ordering keys of msgs.
func orderingKeys(msgs []*courier.Message) []string {
	var keys []string
	for _, m := range msgs {
		if m.OrderingKey != "" {
			keys = append(keys, m.OrderingKey)
		}
	}
	return keys
}

// queuedDue is the predicate of the messages_queued index (migration 0002):
// the queued messages that have a due time, which claims take when it
// comes. A queued message without one waits for its ordering key.
const queuedDue = `state = 'queued' AND next_attempt_at IS NOT NULL`

// The members of a key's group (migration 0002) by kind: the active one
// (claimable or in flight), the suspended ones and the waiting ones; the
// predicates of their partial indexes.
const (
	keyActive = `ordering_key IS NOT NULL AND NOT order_skipped
		AND (state = 'inflight' OR (` + queuedDue + `))`
	keySuspended = `ordering_key IS NOT NULL AND NOT order_skipped AND state = 'suspended'`
	keyWaiting   = `ordering_key IS NOT NULL AND NOT order_skipped AND state = 'queued' AND next_attempt_at IS NULL`
)

// KeyHolder returns the member of a key's group that its waiting members
// wait for: the active one, else the oldest suspended one (which is older
// than every waiting one).
func (s *Store) KeyHolder(ctx context.Context, route, key string) (*courier.Message, error) {
	m, _, err := scanMessage(s.pool.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages WHERE seq = COALESCE(
		(SELECT seq FROM messages WHERE route = $1 AND ordering_key = $2 AND `+keyActive+` LIMIT 1),
		(SELECT seq FROM messages WHERE route = $1 AND ordering_key = $2 AND `+keySuspended+` ORDER BY seq LIMIT 1))`,
		route, key), false)
	if err != nil {
		return nil, one("read the holder of key "+key, err,
			courier.Errorf(courier.CodeNotFound, "no message holds ordering key %q on route %q", key, route))
	}
	return m, nil
}

func insertAction(ctx context.Context, tx pgx.Tx, a courier.Action) error {
	if _, err := tx.Exec(ctx, `INSERT INTO actions (at, who, kind, subject, detail) VALUES ($1, $2, $3, $4, $5)`,
		a.At, a.Who, string(a.Kind), a.Subject, nullString(a.Detail)); err != nil {
		return classify("record action", err)
	}
	return nil
}

// Actions returns the operator actions on a subject, oldest first.
func (s *Store) Actions(ctx context.Context, subject string) ([]courier.Action, error) {
	rows, err := s.pool.Query(ctx, `SELECT at, who, kind, detail FROM actions WHERE subject = $1 ORDER BY seq`, subject)
	return collect([]courier.Action{}, rows, err, "list actions", func(row scanner) (courier.Action, error) {
		a := courier.Action{Subject: subject}
		var detail pgtype.Text
		err := row.Scan(&a.At, &a.Who, &a.Kind, &detail)
		a.At, a.Detail = a.At.UTC(), detail.String
		return a, err
	})
}

// Purge deletes up to limit terminal messages that finished before the
// cutoff, with their payloads, attempts and actions. Nodes purging at the
// same time skip each other's rows.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `WITH gone AS (
			SELECT seq, id FROM messages WHERE state IN ('delivered', 'discarded') AND finished_at < $1
			LIMIT $2 FOR UPDATE SKIP LOCKED
		), a AS (DELETE FROM attempts USING gone WHERE attempts.message_id = gone.id
		), b AS (DELETE FROM actions USING gone WHERE actions.subject = gone.id
		), c AS (DELETE FROM bodies USING gone WHERE bodies.seq = gone.seq)
		DELETE FROM messages USING gone WHERE messages.seq = gone.seq`, before, limit)
	if err != nil {
		return 0, classify("purge", err)
	}
	return int(tag.RowsAffected()), nil
}

// CountSuspended counts a sender's suspended messages, up to limit, on the
// partial index of suspended messages by sender.
func (s *Store) CountSuspended(ctx context.Context, sender string, limit int) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM messages
		WHERE sender = $1 AND state = 'suspended' AND sender IS NOT NULL LIMIT $2) AS capped`, sender, limit).Scan(&n); err != nil {
		return 0, classify("count suspended messages of "+sender, err)
	}
	return n, nil
}

// scanMessage reads messageColumns, and the payload after them when payload
// is set.
func scanMessage(row scanner, payload bool) (*courier.Message, int64, error) {
	var m courier.Message
	var seq int64
	var prio int16
	var headers, stepResponses []byte
	var orderingKey, reason, endpoint, lastError, lastClass, fallbackFrom, leaseOwner, sender, workflow, recipient pgtype.Text
	var deliverAfter, expiresAt, nextAttempt, leaseUntil, finished, timerAt pgtype.Timestamptz
	var state string
	dest := []any{&seq, &m.ID, &m.Type, &m.Route, &m.Size, &m.ContentType, &headers, &orderingKey,
		&prio, &deliverAfter, &expiresAt, &m.Hash, &state, &reason, &m.Attempts, &m.TotalAttempts,
		&m.Abandoned, &m.ResubmitCount, &m.RoundStartedAt, &m.Escalated, &fallbackFrom, &timerAt, &nextAttempt,
		&leaseUntil, &leaseOwner, &endpoint, &lastError, &lastClass, &m.CreatedAt, &m.UpdatedAt, &finished, &sender,
		&m.OrderSkipped, &workflow, &m.Step, &m.FailedStep, &stepResponses, &recipient}
	if payload {
		dest = append(dest, &m.Payload)
	}
	if err := row.Scan(dest...); err != nil {
		return nil, 0, err
	}
	var err error
	if m.Headers, err = sqlstore.DecodeHeaders(headers); err != nil {
		return nil, 0, fmt.Errorf("message %s: %w", m.ID, err)
	}
	if m.StepResponses, err = courier.DecodeStepResponses(stepResponses); err != nil {
		return nil, 0, fmt.Errorf("message %s: %w", m.ID, err)
	}
	m.Priority, m.Sender, m.Workflow, m.Recipient = int(prio), sender.String, workflow.String, recipient.String
	m.OrderingKey, m.FallbackFrom, m.LeaseOwner = orderingKey.String, fallbackFrom.String, leaseOwner.String
	m.State, m.Reason = courier.State(state), courier.Reason(reason.String)
	m.Endpoint, m.LastError, m.LastClass = endpoint.String, lastError.String, courier.ErrorClass(lastClass.String)
	m.DeliverAfter, m.ExpiresAt, m.TimerAt = fromTS(deliverAfter), fromTS(expiresAt), fromTS(timerAt)
	m.NextAttemptAt, m.LeaseUntil, m.FinishedAt = fromTS(nextAttempt), fromTS(leaseUntil), fromTS(finished)
	m.RoundStartedAt, m.CreatedAt, m.UpdatedAt = m.RoundStartedAt.UTC(), m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	return &m, seq, nil
}

// collectMessages reads every row of a query of messageColumns.
func collectMessages(rows pgx.Rows, err error, what string) ([]*courier.Message, error) {
	return collect(nil, rows, err, what, func(row scanner) (*courier.Message, error) {
		m, _, err := scanMessage(row, false)
		return m, err
	})
}

// encodeHeaders is sqlstore.EncodeHeaders, NULL for none.
func encodeHeaders(h map[string]string) (*string, error) {
	text, err := sqlstore.EncodeHeaders(h)
	return nullString(text), err
}

// encodeStepResponses is courier.EncodeStepResponses, NULL for none.
func encodeStepResponses(r map[int]string) (*string, error) {
	text, err := courier.EncodeStepResponses(r)
	return nullString(text), err
}

// ts stores a time; the zero time as NULL.
func ts(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func fromTS(v pgtype.Timestamptz) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return v.Time.UTC()
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
