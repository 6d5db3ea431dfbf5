package sqlite

import (
	"context"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	// Headers are decoded on every claim, inside the writer's transaction.
	json "github.com/goccy/go-json"
)

// messageColumns are read by scanMessage, in this order.
const messageColumns = `seq, id, type, route, size, content_type, headers, ordering_key, priority,
	deliver_after, expires_at, hash, state, reason, attempts, total_attempts, abandoned, resubmit_count,
	round_started_at, escalated, fallback_from, timer_at, next_attempt_at,
	lease_until, lease_owner, endpoint, last_error, last_class, created_at, updated_at, finished_at, sender, order_skipped,
	workflow, step, failed_step, step_responses, recipient`

// withPayload adds the payload to messageColumns, for a read of whole messages.
const withPayload = `, (SELECT payload FROM bodies WHERE bodies.seq = messages.seq)`

const insertBody = `INSERT INTO bodies (seq, payload) VALUES (?, ?)`

const insertMessage = `INSERT INTO messages (id, type, route, size, content_type, headers,
	ordering_key, priority, deliver_after, expires_at, hash, state, reason, last_error, next_attempt_at,
	created_at, updated_at, finished_at, round_started_at, timer_at, sender, order_skipped,
	workflow, step, failed_step, step_responses, recipient)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (id) DO NOTHING`

// Ingest stores the messages in one transaction shared with every other
// write waiting at the same time.
func (s *Store) Ingest(ctx context.Context, msgs []*courier.Message) ([]courier.IngestResult, error) {
	results := make([]courier.IngestResult, len(msgs))
	err := s.write(ctx, func(tx *sql.Tx) error {
		insert, body := tx.Stmt(s.insertStmt), tx.Stmt(s.bodyStmt)
		for i, m := range msgs {
			// Whether it waits for its key: decided before it is stored,
			// so that the sender is told what is stored.
			due := m.NextAttemptAt
			if err := s.admit(tx, m); err != nil {
				return err
			}
			created, err := s.execInsert(tx, insert, body, m)
			if err != nil {
				return err
			}
			if created {
				results[i] = courier.IngestResult{Status: courier.IngestCreated}
				continue
			}
			m.NextAttemptAt = due
			stored, err := scanMessage(tx.Stmt(s.selectStmt).QueryRow(m.ID))
			if err != nil {
				return courier.Unavailable("the store", fmt.Errorf("read existing message %s: %w", m.ID, err))
			}
			status := courier.IngestExists
			if stored.Hash != m.Hash {
				status = courier.IngestConflict
			}
			results[i] = courier.IngestResult{Status: status, Message: stored}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// Message returns one message.
func (s *Store) Message(ctx context.Context, id string) (*courier.Message, error) {
	m, _, err := scanMessageSeq(s.rdb.QueryRowContext(ctx, `SELECT `+messageColumns+withPayload+` FROM messages WHERE id = ?`, id), true)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, courier.Errorf(courier.CodeNotFound, "message %q not found", id)
	}
	if err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("read message %s: %w", id, err))
	}
	return m, nil
}

// Messages lists messages newest first; the cursor is the ingest sequence
// number of the last message of the previous page.
func (s *Store) Messages(ctx context.Context, f courier.MessageFilter) (courier.MessagePage, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = courier.DefaultListLimit
	}
	if limit > courier.MaxListLimit {
		limit = courier.MaxListLimit
	}
	where, args := filterWhere(f)
	if f.Cursor != "" {
		seq, err := decodeCursor(f.Cursor)
		if err != nil {
			return courier.MessagePage{}, err
		}
		where, args = append(where, "seq < ?"), append(args, seq)
	}
	q := `SELECT ` + messageColumns + ` FROM messages`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY seq DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.rdb.QueryContext(ctx, q, args...)
	if err != nil {
		return courier.MessagePage{}, courier.Unavailable("the store", fmt.Errorf("list messages: %w", err))
	}
	defer rows.Close()
	var page courier.MessagePage
	var lastSeq int64
	for rows.Next() {
		if len(page.Messages) == limit {
			page.Next = encodeCursor(lastSeq)
			break
		}
		m, seq, err := scanMessageSeq(rows, false)
		if err != nil {
			return courier.MessagePage{}, courier.Unavailable("the store", fmt.Errorf("list messages: %w", err))
		}
		page.Messages = append(page.Messages, m)
		lastSeq = seq
	}
	if err := rows.Err(); err != nil {
		return courier.MessagePage{}, courier.Unavailable("the store", fmt.Errorf("list messages: %w", err))
	}
	return page, nil
}

// Attempts returns the attempts of a message, oldest first.
func (s *Store) Attempts(ctx context.Context, id string) ([]courier.Attempt, error) {
	if _, err := s.Message(ctx, id); err != nil {
		return nil, err
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT n, endpoint, route, started_at, duration_us, outcome,
		class, status, error, response FROM attempts WHERE message_id = ? ORDER BY n`, id)
	if err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("list attempts: %w", err))
	}
	defer rows.Close()
	attempts := []courier.Attempt{}
	for rows.Next() {
		a := courier.Attempt{MessageID: id}
		var started, durationUS int64
		var class, errText, response sql.NullString
		if err := rows.Scan(&a.N, &a.Endpoint, &a.Route, &started, &durationUS, &a.Outcome,
			&class, &a.Status, &errText, &response); err != nil {
			return nil, courier.Unavailable("the store", fmt.Errorf("list attempts: %w", err))
		}
		a.StartedAt = fromMicros(started)
		a.Duration = time.Duration(durationUS) * time.Microsecond
		a.Class = courier.ErrorClass(class.String)
		a.Error = errText.String
		a.Response = response.String
		attempts = append(attempts, a)
	}
	if err := rows.Err(); err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("list attempts: %w", err))
	}
	return attempts, nil
}

// Discard moves a queued or suspended message to discarded.
func (s *Store) Discard(ctx context.Context, id string, a courier.Action) (*courier.Message, error) {
	a.Kind, a.Subject = courier.ActionDiscard, id
	return s.transition(ctx, id, a, func(m *courier.Message) (*courier.Message, error) { return courier.Discard(m, a.At) })
}

// Resubmit moves a suspended message back to queued, due now.
func (s *Store) Resubmit(ctx context.Context, id, route string, a courier.Action) (*courier.Message, error) {
	a.Kind, a.Subject, a.Detail = courier.ActionResubmit, id, ""
	if route != "" {
		a.Detail = "route=" + route
	}
	return s.transition(ctx, id, a, func(m *courier.Message) (*courier.Message, error) { return courier.Resubmit(m, route, a.At) })
}

// transition reads a message, changes it as decide says and records the
// operator action, in one transaction.
func (s *Store) transition(ctx context.Context, id string, a courier.Action, decide func(*courier.Message) (*courier.Message, error)) (*courier.Message, error) {
	var out *courier.Message
	err := s.write(ctx, func(tx *sql.Tx) error {
		m, err := s.act(tx, id, decide)
		if err != nil {
			return err
		}
		out = m
		return insertAction(tx, a)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// act reads a message, decides its change and writes it, keeping the order
// of its key. The single writer makes the read and the write one.
func (s *Store) act(tx *sql.Tx, id string, decide func(*courier.Message) (*courier.Message, error)) (*courier.Message, error) {
	m, _, err := scanMessageSeq(tx.Stmt(s.selectStmt).QueryRow(id), false)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, courier.Errorf(courier.CodeNotFound, "message %q not found", id)
	}
	if err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("read message %s: %w", id, err))
	}
	next, err := decide(m)
	if err != nil {
		return nil, err
	}
	if _, err := s.update(tx, courier.Change{Message: next, From: m.State, Token: m.TotalAttempts}); err != nil {
		return nil, err
	}
	return next, nil
}

func insertAction(tx *sql.Tx, a courier.Action) error {
	_, err := tx.Exec(`INSERT INTO actions (at, who, kind, subject, detail) VALUES (?, ?, ?, ?, ?)`,
		micros(a.At), a.Who, string(a.Kind), a.Subject, nullString(a.Detail))
	if err != nil {
		return courier.Unavailable("the store", fmt.Errorf("record action: %w", err))
	}
	return nil
}

// queuedDue is the predicate of the messages_queued index (migration 0003):
// the queued messages that have a due time, which claims take when it
// comes. A queued message without one waits for its ordering key.
const queuedDue = `state = 'queued' AND next_attempt_at IS NOT NULL`

// The members of a key's group (migration 0003) by kind: the active one
// (claimable or in flight), the suspended ones and the waiting ones; the
// predicates of their partial indexes.
const (
	keyActive = `ordering_key IS NOT NULL AND order_skipped = 0
		AND (state = 'inflight' OR (` + queuedDue + `))`
	keySuspended = `ordering_key IS NOT NULL AND order_skipped = 0 AND state = 'suspended'`
	keyWaiting   = `ordering_key IS NOT NULL AND order_skipped = 0 AND state = 'queued' AND next_attempt_at IS NULL`
)

// KeyHolder returns the member of a key's group that its waiting members
// wait for: the active one, else the oldest suspended one (which is older
// than every waiting one).
func (s *Store) KeyHolder(ctx context.Context, route, key string) (*courier.Message, error) {
	m, err := scanMessage(s.rdb.QueryRowContext(ctx, `SELECT `+messageColumns+` FROM messages WHERE seq = COALESCE(
		(SELECT seq FROM messages INDEXED BY messages_key_active
			WHERE route = ?1 AND ordering_key = ?2 AND `+keyActive+` LIMIT 1),
		(SELECT seq FROM messages INDEXED BY messages_key_suspended
			WHERE route = ?1 AND ordering_key = ?2 AND `+keySuspended+` ORDER BY seq LIMIT 1))`, route, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, courier.Errorf(courier.CodeNotFound, "no message holds ordering key %q on route %q", key, route)
	}
	if err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("read the holder of key %s: %w", key, err))
	}
	return m, nil
}

// Actions returns the operator actions on a subject, oldest first.
func (s *Store) Actions(ctx context.Context, subject string) ([]courier.Action, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT at, who, kind, detail FROM actions WHERE subject = ? ORDER BY seq`, subject)
	if err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("list actions: %w", err))
	}
	defer rows.Close()
	actions := []courier.Action{}
	for rows.Next() {
		a := courier.Action{Subject: subject}
		var at int64
		var detail sql.NullString
		if err := rows.Scan(&at, &a.Who, &a.Kind, &detail); err != nil {
			return nil, courier.Unavailable("the store", fmt.Errorf("list actions: %w", err))
		}
		a.At, a.Detail = fromMicros(at), detail.String
		actions = append(actions, a)
	}
	if err := rows.Err(); err != nil {
		return nil, courier.Unavailable("the store", fmt.Errorf("list actions: %w", err))
	}
	return actions, nil
}

// Purge deletes up to limit terminal messages that finished before the
// cutoff, with their attempts and actions.
func (s *Store) Purge(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.Query(`SELECT seq, id FROM messages INDEXED BY messages_finished
			WHERE state IN ('delivered', 'discarded') AND finished_at < ? LIMIT ?`, micros(before), limit)
		if err != nil {
			return courier.Unavailable("the store", fmt.Errorf("select purgeable: %w", err))
		}
		var seqs []int64
		var ids []string
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				rows.Close()
				return courier.Unavailable("the store", fmt.Errorf("select purgeable: %w", err))
			}
			seqs, ids = append(seqs, seq), append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return courier.Unavailable("the store", fmt.Errorf("select purgeable: %w", err))
		}
		for i := range seqs {
			for _, q := range []struct {
				sql string
				arg any
			}{
				{`DELETE FROM attempts WHERE message_id = ?`, ids[i]},
				{`DELETE FROM actions WHERE subject = ?`, ids[i]},
				{`DELETE FROM messages WHERE seq = ?`, seqs[i]},
				{`DELETE FROM bodies WHERE seq = ?`, seqs[i]},
			} {
				if _, err := tx.Exec(q.sql, q.arg); err != nil {
					return courier.Unavailable("the store", fmt.Errorf("purge %s: %w", ids[i], err))
				}
			}
		}
		n = len(seqs)
		return nil
	})
	return n, err
}

// CountSuspended counts a sender's suspended messages, up to limit, on the
// partial index of suspended messages by sender.
func (s *Store) CountSuspended(ctx context.Context, sender string, limit int) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM messages INDEXED BY messages_suspended_sender
		WHERE sender = ? AND state = 'suspended' AND sender IS NOT NULL LIMIT ?)`, sender, limit).Scan(&n)
	if err != nil {
		return 0, courier.Unavailable("the store", fmt.Errorf("count suspended messages of %s: %w", sender, err))
	}
	return n, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanMessage(row scanner) (*courier.Message, error) {
	m, _, err := scanMessageSeq(row, false)
	return m, err
}

// rowScan holds what a message's row is scanned into, apart from the
// strings that go straight into the message. Integers are scanned into any
// and taken out by type: database/sql sets an int, or an int64, by
// reflection, and an int through a string at that, which for a message's
// dozen integers costs more than the rest of the row. One rowScan, taken
// from a pool, spares a row some thirty allocations.
type rowScan struct {
	seq, size, priority, deliverAfter, expiresAt, attempts, totalAttempts, abandoned, resubmits, roundStarted,
	escalated, timerAt, nextAttempt, leaseUntil, created, updated, finished, orderSkipped, step, failedStep any

	headers, orderingKey, reason, endpoint, lastError, lastClass, fallbackFrom, leaseOwner, sender, workflow,
	recipient sql.NullString

	stepResponses []byte
	state         string
	dest          []any
}

var rowScans = sync.Pool{New: func() any { return new(rowScan) }}

// scanMessageSeq reads messageColumns, and the payload after them when
// payload is set.
func scanMessageSeq(row scanner, payload bool) (*courier.Message, int64, error) {
	m := new(courier.Message)
	r := rowScans.Get().(*rowScan)
	defer rowScans.Put(r)
	r.dest = append(r.dest[:0], &r.seq, &m.ID, &m.Type, &m.Route, &r.size, &m.ContentType, &r.headers, &r.orderingKey,
		&r.priority, &r.deliverAfter, &r.expiresAt, &m.Hash, &r.state, &r.reason, &r.attempts, &r.totalAttempts,
		&r.abandoned, &r.resubmits, &r.roundStarted, &r.escalated, &r.fallbackFrom, &r.timerAt, &r.nextAttempt,
		&r.leaseUntil, &r.leaseOwner, &r.endpoint, &r.lastError, &r.lastClass, &r.created, &r.updated, &r.finished, &r.sender,
		&r.orderSkipped, &r.workflow, &r.step, &r.failedStep, &r.stepResponses, &r.recipient)
	if payload {
		r.dest = append(r.dest, &m.Payload)
	}
	err := row.Scan(r.dest...)
	clear(r.dest) // the pool must not keep the message alive
	if err != nil {
		return nil, 0, err
	}
	if r.headers.Valid {
		if err := json.Unmarshal([]byte(r.headers.String), &m.Headers); err != nil {
			return nil, 0, fmt.Errorf("message %s: headers: %w", m.ID, err)
		}
	}
	if m.StepResponses, err = courier.DecodeStepResponses(r.stepResponses); err != nil {
		return nil, 0, fmt.Errorf("message %s: step responses: %w", m.ID, err)
	}
	m.Size, m.Priority = int(asInt(r.size)), int(asInt(r.priority))
	m.Attempts, m.TotalAttempts, m.Abandoned = int(asInt(r.attempts)), int(asInt(r.totalAttempts)), int(asInt(r.abandoned))
	m.ResubmitCount, m.Escalated = int(asInt(r.resubmits)), int(asInt(r.escalated))
	m.Step, m.FailedStep, m.OrderSkipped = int(asInt(r.step)), int(asInt(r.failedStep)), asInt(r.orderSkipped) != 0
	m.Workflow = r.workflow.String
	m.Recipient = r.recipient.String
	m.OrderingKey = r.orderingKey.String
	m.Sender = r.sender.String
	m.FallbackFrom = r.fallbackFrom.String
	m.LeaseOwner = r.leaseOwner.String
	m.RoundStartedAt = fromMicros(asInt(r.roundStarted))
	m.TimerAt = fromAnyMicros(r.timerAt)
	m.State = courier.State(r.state)
	m.Reason = courier.Reason(r.reason.String)
	m.Endpoint = r.endpoint.String
	m.LastError = r.lastError.String
	m.LastClass = courier.ErrorClass(r.lastClass.String)
	m.DeliverAfter = fromAnyMicros(r.deliverAfter)
	m.ExpiresAt = fromAnyMicros(r.expiresAt)
	m.NextAttemptAt = fromAnyMicros(r.nextAttempt)
	m.LeaseUntil = fromAnyMicros(r.leaseUntil)
	m.FinishedAt = fromAnyMicros(r.finished)
	m.CreatedAt = fromMicros(asInt(r.created))
	m.UpdatedAt = fromMicros(asInt(r.updated))
	return m, asInt(r.seq), nil
}

// asInt is an INTEGER column scanned into any: the driver gives int64, and
// nil for NULL, which is 0.
func asInt(v any) int64 {
	i, _ := v.(int64)
	return i
}

// fromAnyMicros is fromMicros of an INTEGER column scanned into any; NULL
// is the zero time.
func fromAnyMicros(v any) time.Time {
	if i, ok := v.(int64); ok {
		return fromMicros(i)
	}
	return time.Time{}
}

func encodeHeaders(h map[string]string) (any, error) {
	if len(h) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("encode headers: %w", err)
	}
	return string(b), nil
}

// encodeStepResponses is courier.EncodeStepResponses, NULL for none.
func encodeStepResponses(r map[int]string) (any, error) {
	text, err := courier.EncodeStepResponses(r)
	return nullString(text), err
}

func encodeCursor(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(seq, 10)))
}

func decodeCursor(c string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		var seq int64
		if seq, err = strconv.ParseInt(string(b), 10, 64); err == nil && seq > 0 {
			return seq, nil
		}
	}
	return 0, courier.Errorf(courier.CodeInvalidArgument, "cursor %q is not valid", c)
}

// micros stores a time as unix microseconds; the zero time as NULL.
func micros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

func fromNullMicros(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return fromMicros(v.Int64)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// orNow returns t, or def when t is zero.
func orNow(t, def time.Time) time.Time {
	if t.IsZero() {
		return def
	}
	return t
}

// execInsert inserts a message and its payload in tx unless its id
// exists, and reports whether it did.
func (s *Store) execInsert(tx *sql.Tx, insert, body *sql.Stmt, m *courier.Message) (bool, error) {
	if err := s.priorities.note(tx, m.Priority); err != nil {
		return false, err
	}
	headers, err := encodeHeaders(m.Headers)
	if err != nil {
		return false, err
	}
	responses, err := encodeStepResponses(m.StepResponses)
	if err != nil {
		return false, err
	}
	res, err := insert.Exec(m.ID, m.Type, m.Route, len(m.Payload), m.ContentType, headers,
		nullString(m.OrderingKey), m.Priority, micros(m.DeliverAfter), micros(m.ExpiresAt),
		m.Hash, string(m.State), nullString(string(m.Reason)), nullString(m.LastError),
		micros(m.NextAttemptAt), micros(m.CreatedAt), micros(m.UpdatedAt), micros(m.FinishedAt),
		micros(orNow(m.RoundStartedAt, m.CreatedAt)), micros(m.TimerAt), nullString(m.Sender), m.OrderSkipped,
		nullString(m.Workflow), m.Step, m.FailedStep, responses, nullString(m.Recipient))
	if err != nil {
		return false, courier.Unavailable("the store", fmt.Errorf("insert message %s: %w", m.ID, err))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return false, nil
	}
	seq, err := res.LastInsertId()
	if err == nil {
		_, err = body.Exec(seq, nonNil(m.Payload))
	}
	if err != nil {
		return false, courier.Unavailable("the store", fmt.Errorf("insert payload of %s: %w", m.ID, err))
	}
	return true, nil
}

// filterWhere turns a filter's fields (all but cursor and limit) into SQL
// conditions and their arguments.
func filterWhere(f courier.MessageFilter) (where []string, args []any) {
	add := func(cond string, arg any) {
		where = append(where, cond)
		args = append(args, arg)
	}
	if f.State != "" {
		add("state = ?", string(f.State))
	}
	if f.Type != "" {
		add("type = ?", f.Type)
	}
	if f.Route != "" {
		add("route = ?", f.Route)
	}
	if f.Endpoint != "" {
		add("endpoint = ?", f.Endpoint)
	}
	if f.Reason != "" {
		add("reason = ?", string(f.Reason))
	}
	if f.Sender != "" {
		add("sender = ?", f.Sender)
	}
	if !f.CreatedAfter.IsZero() {
		add("created_at >= ?", micros(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		add("created_at < ?", micros(f.CreatedBefore))
	}
	return where, args
}
