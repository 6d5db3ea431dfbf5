package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// messageColumns are read by scanMessage, in this order.
const messageColumns = `seq, id, subscription, type, route, size, content_type, headers, ordering_key, priority,
	deliver_after, expires_at, hash, state, reason, attempts, total_attempts, abandoned, resubmit_count,
	round_started_at, escalated, fallback_from, timer_at, next_attempt_at,
	lease_until, lease_owner, endpoint, last_error, last_class, created_at, updated_at, finished_at, sender, order_skipped,
	workflow, step, failed_step, step_responses, recipient, sequence, previous_id, trace_parent, blob, digest,
	erased_at, erased_by, erased_reason`

// withPayload adds the payload to messageColumns, for a read of whole
// messages: a shared row's is its lead's (migration 0009).
const withPayload = `, (SELECT payload FROM bodies WHERE bodies.seq = CASE WHEN messages.shared = 0 THEN messages.seq
	ELSE (SELECT l.seq FROM messages AS l WHERE l.id = messages.id AND l.shared = 0) END)`

const insertBody = `INSERT INTO bodies (seq, payload) VALUES (?, ?)`

// countType adds to the catalog of types (migration 0010): ?1 the type,
// ?2 how many messages of it came, ?3 and ?4 when the first and the last.
const countType = `INSERT INTO types (type, count, first_seen, last_seen) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (type) DO UPDATE SET count = count + excluded.count, last_seen = max(last_seen, excluded.last_seen)`

// insertMessage inserts a message or a delivery, or nothing when its key
// exists: a notice sent before, a delivery stored before.
const insertMessage = `INSERT INTO messages (` + insertColumns + `) VALUES (` + insertValues + `)
	ON CONFLICT (id, subscription) DO NOTHING`

// insertNew inserts a message, or the first delivery of a published one,
// only when no row has its id (?1): the look for the id and the insert in
// one statement.
const insertNew = `INSERT INTO messages (` + insertColumns + `) SELECT ` + insertValues + `
	WHERE NOT EXISTS (SELECT 1 FROM messages WHERE id = ?1)`

const (
	insertColumns = `id, subscription, shared, type, route, size, content_type, headers,
	ordering_key, priority, deliver_after, expires_at, hash, state, reason, last_error, next_attempt_at,
	created_at, updated_at, finished_at, round_started_at, timer_at, sender, order_skipped,
	workflow, step, failed_step, step_responses, recipient, sequence, previous_id, trace_parent, blob, digest`
	insertValues = `?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?`
)

// Where the numbering of a key on a route stands (migration 0012): read
// with ?1 the route and ?2 the key, and written with ?3 the last number
// and ?4 its message's id.
const (
	readSequence  = `SELECT last, last_id FROM sequences WHERE route = ?1 AND ordering_key = ?2`
	writeSequence = `INSERT INTO sequences (route, ordering_key, last, last_id) VALUES (?1, ?2, ?3, ?4)
	ON CONFLICT (route, ordering_key) DO UPDATE SET last = excluded.last, last_id = excluded.last_id`
)

// Ingest stores the messages in one transaction shared with every other
// write waiting at the same time. The one writer makes the check for an
// id and the insert under it one: an id is a message sent to a route or a
// published one, never both.
func (s *Store) Ingest(ctx context.Context, msgs []*courier.Message) ([]courier.IngestResult, error) {
	results := make([]courier.IngestResult, len(msgs))
	_, quotas := s.quotas.Of(msgs)
	err := s.write(ctx, func(tx *sql.Tx) error {
		heads := sequenceHeads{}
		for i := 0; i < len(msgs); {
			run := sqlstore.Run(msgs[i:])
			stored, err := s.ingestRun(tx, heads, run)
			if err != nil {
				return err
			}
			for k, m := range run {
				if stored != nil {
					results[i+k] = sqlstore.Existing(stored, m)
				} else {
					results[i+k] = courier.IngestResult{Status: courier.IngestCreated}
				}
			}
			if stored == nil {
				s.cur.types.Add(run[0])
			}
			i += len(run)
		}
		if quotas != nil {
			// The one writer makes the count and the check one: what
			// was just stored is counted, and a refusal rolls it back.
			if err := sqlstore.CheckQuotas(quotas, msgs, results, func(tenants []string) (map[string]courier.TenantUsage, error) {
				return s.tenantUsage(tx, tenants)
			}); err != nil {
				return err
			}
		}
		return s.writeSequences(tx, heads)
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// ingestRun stores run, a message or the deliveries of a published one,
// unless its id is taken; then it returns the message stored under it. A
// run that joins an ordering key is looked for first: whether a message
// waits for its key, and its number in the key's order, are decided before
// it is stored and only when it is new. Any other run's first row is
// inserted on the condition that its id is free, the look and the insert
// in one statement.
func (s *Store) ingestRun(tx *sql.Tx, heads sequenceHeads, run []*courier.Message) (*courier.Message, error) {
	keyed := slices.ContainsFunc(run, courier.JoinsKey)
	if keyed {
		if stored, err := s.lead(tx, run[0].ID); err != nil || stored != nil {
			return stored, err
		}
	}
	var first int64
	for k, m := range run {
		// Whether it waits for its key: decided before it is stored, so
		// that the sender is told what is stored.
		if courier.JoinsKey(m) {
			if err := courier.AdmitKeyed(keyTx{s, tx}, []*courier.Message{m}); err != nil {
				return nil, err
			}
		}
		if err := s.number(tx, heads, m); err != nil {
			return nil, err
		}
		insert := s.insertStmt
		if k == 0 && !keyed {
			insert = s.insertNewStmt
		}
		seq, err := s.execInsert(tx, insert, m, first)
		if err != nil {
			return nil, err
		}
		if seq == 0 && insert == s.insertNewStmt {
			if stored, err := s.lead(tx, m.ID); err != nil || stored != nil {
				return stored, err
			}
		}
		if seq == 0 {
			// Looked for under the one writer just before.
			return nil, courier.Internal(fmt.Errorf("ingest: message %s exists after all", m.Key()))
		}
		if k == 0 {
			first = seq
		}
	}
	return nil, nil
}

// lead returns the message stored under id (a published one's first row),
// or nil when there is none.
func (s *Store) lead(tx *sql.Tx, id string) (*courier.Message, error) {
	stored, err := scanMessage(s.stmt(tx, s.leadStmt).QueryRow(id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, classify("read existing message "+id, err)
	}
	return stored, nil
}

// sequenceHeads are where the numberings of the keys an ingest numbers
// stand, by route and key, read once and written back once.
type sequenceHeads map[[2]string]courier.SequenceHead

// number gives m its Sequence, when it joins its key's order: the one
// writer makes the read of the key's numbering and its write
// (writeSequences) one. Only created messages come here (an id that
// exists was looked for first), so a message ingested again takes no
// number.
func (s *Store) number(tx *sql.Tx, heads sequenceHeads, m *courier.Message) error {
	if !courier.JoinsKey(m) {
		return nil
	}
	k := [2]string{m.Route, m.OrderingKey}
	h, ok := heads[k]
	if !ok {
		err := s.stmt(tx, s.seqReadStmt).QueryRow(m.Route, m.OrderingKey).Scan(&h.Last, &h.ID)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return classify(fmt.Sprintf("read the sequence of key %s on %s", m.OrderingKey, m.Route), err)
		}
	}
	heads[k] = h.Number(m)
	return nil
}

// writeSequences writes back where the numberings of an ingest stand.
func (s *Store) writeSequences(tx *sql.Tx, heads sequenceHeads) error {
	for k, h := range heads {
		if _, err := s.stmt(tx, s.seqWriteStmt).Exec(k[0], k[1], h.Last, h.ID); err != nil {
			return classify(fmt.Sprintf("write the sequence of key %s on %s", k[1], k[0]), err)
		}
	}
	return nil
}

// Message returns one message or delivery, by its key.
func (s *Store) Message(ctx context.Context, key string) (*courier.Message, error) {
	id, sub := courier.ParseKey(key)
	m, _, err := scanMessageSeq(s.rdb.QueryRowContext(ctx, `SELECT `+messageColumns+withPayload+`
		FROM messages WHERE id = ? AND subscription = ?`, id, sub), true)
	if err != nil {
		return nil, one("read message "+key, err, sqlstore.MessageNotFound(key))
	}
	return m, nil
}

// Deliveries returns every row of a message, by subscription.
func (s *Store) Deliveries(ctx context.Context, id string) ([]*courier.Message, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+messageColumns+withPayload+`
		FROM messages WHERE id = ? ORDER BY subscription`, id)
	out, err := collect(nil, rows, err, "read message "+id, func(row scanner) (*courier.Message, error) {
		m, _, err := scanMessageSeq(row, true)
		return m, err
	})
	if err == nil && len(out) == 0 {
		err = sqlstore.MessageNotFound(id)
	}
	return out, err
}

// Messages lists messages newest first; the cursor is the ingest sequence
// number of the last message of the previous page.
func (s *Store) Messages(ctx context.Context, f courier.MessageFilter) (courier.MessagePage, error) {
	page, err := sqlstore.ListMessages(sqlstore.Where{Time: micros}, messageColumns, f, s.readRows(ctx),
		func(row scanner) (*courier.Message, int64, error) { return scanMessageSeq(row, false) })
	return page, classify("list messages", err)
}

// Attempts returns the attempts of a message or delivery, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]courier.Attempt, error) {
	out, err := sqlstore.Attempts(key, sqlstore.Where{Time: micros},
		func() error { _, err := s.Message(ctx, key); return err }, s.readRows(ctx), sqlstore.ScanAttempt)
	return out, classify("list attempts", err)
}

// Discard moves a queued or suspended message or delivery to discarded.
func (s *Store) Discard(ctx context.Context, key string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Discard(key, a)
	return s.transition(ctx, key, a, decide)
}

// Erase erases the payload of message id and discards its deliveries that
// are live (sqlstore.Erase), in one transaction; a blob goes right after
// it.
func (s *Store) Erase(ctx context.Context, id string, a courier.Action) ([]*courier.Message, error) {
	var out []*courier.Message
	var blob string
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		out, blob, err = sqlstore.Erase(eraseTx{s, tx}, id, a)
		return err
	})
	if err != nil {
		return nil, err
	}
	sqlstore.RemoveErasedBlob(ctx, s.blobs, s.logger, id, blob)
	return out, nil
}

// eraseTx is the sqlstore.EraseTx of a write transaction.
type eraseTx struct {
	s  *Store
	tx *sql.Tx
}

var _ sqlstore.EraseTx = eraseTx{}

func (e eraseTx) Deliveries(id string) ([]*courier.Message, error) {
	rows, err := e.tx.Query(`SELECT `+messageColumns+` FROM messages WHERE id = ? ORDER BY subscription`, id)
	return collect(nil, rows, err, "read message "+id, scanMessage)
}

func (e eraseTx) Discard(d, next *courier.Message) error {
	_, err := e.s.update(e.tx, courier.Change{Message: next, From: d.State, Token: d.TotalAttempts})
	return err
}

func (e eraseTx) RecordAction(a courier.Action) error { return insertAction(e.tx, a) }

func (e eraseTx) ErasePayload(id string, a courier.Action) error {
	if _, err := e.tx.Exec(`UPDATE bodies SET payload = x'' WHERE seq IN (SELECT seq FROM messages WHERE id = ? AND shared = 0)`, id); err != nil {
		return classify("erase the payload of "+id, err)
	}
	_, err := e.tx.Exec(`UPDATE messages SET blob = NULL, digest = NULL, step_responses = NULL, erased_at = ?, erased_by = ?, erased_reason = ? WHERE id = ?`,
		micros(a.At), a.Who, nullString(a.Detail), id)
	return classify("erase the payload of "+id, err)
}

// Resend puts a finished message or delivery back in the queue, due now.
func (s *Store) Resend(ctx context.Context, key string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Resend(key, a)
	return s.transition(ctx, key, a, decide)
}

// Resubmit moves a suspended message or delivery back to queued, due now.
func (s *Store) Resubmit(ctx context.Context, key, route string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Resubmit(key, route, a)
	return s.transition(ctx, key, a, decide)
}

// transition reads a message, changes it as decide says and records the
// operator action, in one transaction.
func (s *Store) transition(ctx context.Context, key string, a courier.Action, decide sqlstore.Decide) (*courier.Message, error) {
	var out *courier.Message
	err := s.write(ctx, func(tx *sql.Tx) error {
		m, err := s.act(tx, key, decide)
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
func (s *Store) act(tx *sql.Tx, key string, decide sqlstore.Decide) (*courier.Message, error) {
	id, sub := courier.ParseKey(key)
	m, _, err := scanMessageSeq(s.stmt(tx, s.selectStmt).QueryRow(id, sub), false)
	if err != nil {
		return nil, one("read message "+key, err, sqlstore.MessageNotFound(key))
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
	if err != nil {
		return nil, one("read the holder of key "+key, err,
			courier.Errorf(courier.CodeNotFound, "no message holds ordering key %q on route %q", key, route))
	}
	return m, nil
}

// deleteMessage deletes the message or delivery seq, by its key, with its
// attempts, its actions (not the changes of a topology object that has its
// name) and its payload's row (none for a shared one).
func deleteMessage(tx *sql.Tx, seq int64, key string) error {
	for _, q := range []struct {
		sql string
		arg any
	}{
		{`DELETE FROM attempts WHERE message_id = ?`, key},
		{`DELETE FROM actions WHERE subject = ? AND object = ''`, key},
		{`DELETE FROM messages WHERE seq = ?`, seq},
		{`DELETE FROM bodies WHERE seq = ?`, seq},
	} {
		if _, err := tx.Exec(q.sql, q.arg); err != nil {
			return err
		}
	}
	return nil
}

// Purge deletes up to limit terminal messages and deliveries that finished
// before the cutoff, with their attempts and actions. The lead of a
// published message (the row its payload is kept with) goes last, with the
// payload.
func (s *Store) Purge(ctx context.Context, p courier.Purge, limit int) (int, error) {
	w := sqlstore.Where{Time: micros}
	w.Raw(`state IN ('delivered', 'discarded')`)
	w.Add("finished_at < ?", micros(p.Before))
	w.Raw(`(shared = 1 OR subscription = '' OR NOT EXISTS (SELECT 1 FROM messages AS o WHERE o.id = messages.id AND o.shared = 1))`)
	w.Purge(p)
	query := `SELECT seq, id, subscription, shared FROM messages INDEXED BY messages_finished` + w.SQL() + ` LIMIT ` + w.Arg(limit)
	type purgeable struct {
		seq    int64
		key    string
		shared bool
	}
	var n int
	err := s.write(ctx, func(tx *sql.Tx) error {
		rows, err := tx.Query(query, w.Args...)
		gone, err := collect(nil, rows, err, "select purgeable", func(row scanner) (purgeable, error) {
			var p purgeable
			var id, sub string
			err := row.Scan(&p.seq, &id, &sub, &p.shared)
			p.key = courier.DeliveryKey(id, sub)
			return p, err
		})
		if err != nil {
			return err
		}
		for _, p := range gone {
			if err := deleteMessage(tx, p.seq, p.key); err != nil {
				return classify("purge "+p.key, err)
			}
		}
		n = len(gone)
		if p.Tenant != "" {
			return nil // the events are no tenant's: the purge of all takes them
		}
		// Operational events go with the messages of their time.
		if _, err := tx.Exec(`DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE at < ? ORDER BY seq LIMIT ?)`,
			micros(p.Before), limit); err != nil {
			return classify("purge events", err)
		}
		return nil
	})
	if err != nil {
		// n is not read: a caller that gave up may leave the write running.
		return 0, err
	}
	return n, nil
}

// Types lists the types taken in, by name.
func (s *Store) Types(ctx context.Context) ([]courier.TypeSeen, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT type, count, first_seen, last_seen FROM types ORDER BY type`)
	return collect([]courier.TypeSeen{}, rows, err, "list types", func(row scanner) (courier.TypeSeen, error) {
		var t courier.TypeSeen
		var first, last int64
		err := row.Scan(&t.Type, &t.Count, &first, &last)
		t.FirstSeen, t.LastSeen = fromMicros(first), fromMicros(last)
		return t, err
	})
}

// CountSuspended counts a sender's suspended messages, up to limit, on the
// partial index of suspended messages by sender.
func (s *Store) CountSuspended(ctx context.Context, sender string, limit int) (int, error) {
	var n int
	err := s.rdb.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM messages INDEXED BY messages_suspended_sender
		WHERE sender = ? AND state = 'suspended' AND sender IS NOT NULL LIMIT ?)`, sender, limit).Scan(&n)
	if err != nil {
		return 0, classify("count suspended messages of "+sender, err)
	}
	return n, nil
}

// scanner is a row to read, of a query of rows or of one row.
type scanner = sqlstore.Scanner

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

	sequence any

	headers, orderingKey, reason, endpoint, lastError, lastClass, fallbackFrom, leaseOwner, sender, workflow,
	recipient, previousID, traceParent, blob, digest, erasedBy, erasedReason sql.NullString

	erasedAt any

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
	r.dest = append(r.dest[:0], &r.seq, &m.ID, &m.Subscription, &m.Type, &m.Route, &r.size, &m.ContentType, &r.headers, &r.orderingKey,
		&r.priority, &r.deliverAfter, &r.expiresAt, &m.Hash, &r.state, &r.reason, &r.attempts, &r.totalAttempts,
		&r.abandoned, &r.resubmits, &r.roundStarted, &r.escalated, &r.fallbackFrom, &r.timerAt, &r.nextAttempt,
		&r.leaseUntil, &r.leaseOwner, &r.endpoint, &r.lastError, &r.lastClass, &r.created, &r.updated, &r.finished, &r.sender,
		&r.orderSkipped, &r.workflow, &r.step, &r.failedStep, &r.stepResponses, &r.recipient, &r.sequence, &r.previousID, &r.traceParent, &r.blob, &r.digest,
		&r.erasedAt, &r.erasedBy, &r.erasedReason)
	if payload {
		r.dest = append(r.dest, &m.Payload)
	}
	err := row.Scan(r.dest...)
	clear(r.dest) // the pool must not keep the message alive
	if err != nil {
		return nil, 0, err
	}
	if m.Headers, err = sqlstore.DecodeHeaders([]byte(r.headers.String)); err != nil {
		return nil, 0, fmt.Errorf("message %s: %w", m.ID, err)
	}
	if m.StepResponses, err = sqlstore.DecodeStepResponses(r.stepResponses); err != nil {
		return nil, 0, fmt.Errorf("message %s: step responses: %w", m.ID, err)
	}
	m.Size, m.Priority = int(asInt(r.size)), int(asInt(r.priority))
	m.Attempts, m.TotalAttempts, m.Abandoned = int(asInt(r.attempts)), int(asInt(r.totalAttempts)), int(asInt(r.abandoned))
	m.ResubmitCount, m.Escalated = int(asInt(r.resubmits)), int(asInt(r.escalated))
	m.Step, m.FailedStep, m.OrderSkipped = int(asInt(r.step)), int(asInt(r.failedStep)), asInt(r.orderSkipped) != 0
	m.Workflow = r.workflow.String
	m.Recipient = r.recipient.String
	m.TraceParent = r.traceParent.String
	m.Blob, m.Digest = r.blob.String, r.digest.String
	m.Sequence, m.PreviousID = asInt(r.sequence), r.previousID.String
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
	if r.erasedAt != nil {
		m.Erased = &courier.Erasure{At: fromAnyMicros(r.erasedAt), By: r.erasedBy.String, Reason: r.erasedReason.String}
	}
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

// encodeHeaders is sqlstore.EncodeHeaders, NULL for none.
func encodeHeaders(h map[string]string) (any, error) {
	text, err := sqlstore.EncodeHeaders(h)
	return nullString(text), err
}

// encodeStepResponses is courier.EncodeStepResponses, NULL for none.
func encodeStepResponses(r map[int]string) (any, error) {
	text, err := sqlstore.EncodeStepResponses(r)
	return nullString(text), err
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

// nullInt stores 0 as NULL.
func nullInt(n int64) any {
	if n == 0 {
		return nil
	}
	return n
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// execInsert inserts a message, or a delivery of a published one, in tx
// with insert (insertMessage or insertNew, prepared) and returns its seq, or
// 0 when it inserted nothing. A delivery after the first (lead, its seq
// given) shares the lead's payload.
func (s *Store) execInsert(tx *sql.Tx, insert *sql.Stmt, m *courier.Message, lead int64) (int64, error) {
	headers, err := encodeHeaders(m.Headers)
	if err != nil {
		return 0, err
	}
	responses, err := encodeStepResponses(m.StepResponses)
	if err != nil {
		return 0, err
	}
	size := len(m.Payload)
	if m.Payload == nil {
		size = m.Size // a delivery that reads its lead's payload, or a blob
	}
	res, err := s.stmt(tx, insert).Exec(m.ID, m.Subscription, lead != 0, m.Type, m.Route, size, m.ContentType, headers,
		nullString(m.OrderingKey), m.Priority, micros(m.DeliverAfter), micros(m.ExpiresAt),
		m.Hash, string(m.State), nullString(string(m.Reason)), nullString(m.LastError),
		micros(m.NextAttemptAt), micros(m.CreatedAt), micros(m.UpdatedAt), micros(m.FinishedAt),
		micros(sqlstore.OrDefault(m.RoundStartedAt, m.CreatedAt)), micros(m.TimerAt), nullString(m.Sender), m.OrderSkipped,
		nullString(m.Workflow), m.Step, m.FailedStep, responses, nullString(m.Recipient), nullInt(m.Sequence), nullString(m.PreviousID),
		nullString(m.TraceParent), nullString(m.Blob), nullString(m.Digest))
	if err != nil {
		return 0, classify("insert message "+m.Key(), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return 0, nil
	}
	s.cur.usage.Add(m.ID, size, "", m.State)
	seq, err := res.LastInsertId()
	if err == nil {
		err = s.priorities.note(tx, m.Priority)
	}
	if err == nil && lead == 0 {
		_, err = s.stmt(tx, s.bodyStmt).Exec(seq, sqlstore.NonNil(m.Payload))
	}
	if err != nil {
		return 0, classify("insert payload of "+m.ID, err)
	}
	return seq, nil
}
