package postgres

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
)

// messageFields are read by scanMessage, in this order.
var messageFields = []string{"seq", "id", "subscription", "type", "route", "size", "content_type", "headers", "ordering_key", "priority",
	"deliver_after", "expires_at", "hash", "state", "reason", "attempts", "total_attempts", "abandoned", "resubmit_count",
	"round_started_at", "escalated", "fallback_from", "timer_at", "next_attempt_at",
	"lease_until", "lease_owner", "endpoint", "last_error", "last_class", "created_at", "updated_at", "finished_at", "sender", "order_skipped",
	"workflow", "step", "failed_step", "step_responses", "recipient", "sequence", "previous_id", "trace_parent", "blob", "digest",
	"erased_at", "erased_by", "erased_reason"}

// columns lists messageFields, each prefixed with the table alias if one is given.
func columns(alias string) string {
	if alias == "" {
		return strings.Join(messageFields, ", ")
	}
	return alias + "." + strings.Join(messageFields, ", "+alias+".")
}

var messageColumns = columns("")

// payloadOf is the seq under which the payload of row m (an alias) is
// kept in bodies: its own, or its lead's for a delivery that shares it
// (migration 0009). The lead is only looked up for a shared row.
func payloadOf(m string) string {
	return `CASE WHEN ` + m + `.shared THEN (SELECT l.seq FROM messages l WHERE l.id = ` + m + `.id AND NOT l.shared) ELSE ` + m + `.seq END`
}

// leadKey is the second column of the unique index messages_key
// (migration 0017): ” for a message's lead, the row that keeps the
// payload, and the subscription for a delivery that shares it. A conflict
// target names the index by it, so it is written exactly as there.
const leadKey = `(CASE WHEN shared THEN subscription ELSE '' END)`

// ingestSQL inserts messages and their payloads in one statement, from one
// array per column, and returns the ordinals (from 1) of the leads it
// created. A message sent to a route is its own lead; a published one is
// a run of rows, its deliveries, whose first is the lead, which keeps the
// payload, and whose others are shared. A lead whose id has a lead already
// is left alone (ON CONFLICT DO NOTHING on messages_key of migration 0017,
// which also waits for a concurrent insert of the same id and then leaves
// it alone too): of two items with the same id the first is stored, and a
// published message and one sent to a route never share an id. An id
// without a lead has no rows, so the one index decides, and the insert
// checks no other for conflicts. The shared rows are inserted only for the
// leads that were, so that a run is stored whole or not at all. Every row
// takes its seq in input order first (from messages_seq_seq, the sequence
// of the identity column), so that the order of the messages holds across
// the two inserts. The priorities of the messages go into
// table priorities in the same statement, which claims read for the
// priorities to look at, the messages created into the catalog of types
// (migration 0010), and the live rows created into their tenants' use
// (countUsage).
const ingestSQL = `WITH input AS (
	SELECT nextval('messages_seq_seq') AS seq, t.* FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::text[], $6::text[], $7::text[],
		$8::smallint[], $9::timestamptz[], $10::timestamptz[], $11::text[], $12::text[], $13::text[], $14::text[],
		$15::timestamptz[], $16::timestamptz[], $17::timestamptz[], $18::timestamptz[], $19::timestamptz[],
		$20::timestamptz[], $21::bytea[], $22::text[], $23::boolean[], $24::text[], $25::int[], $26::int[], $27::text[], $28::text[],
		$29::text[], $30::boolean[], $31::int[], $32::text[], $33::text[], $34::text[])
	WITH ORDINALITY AS t(id, type, route, size, content_type, headers, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, payload, sender, order_skipped, workflow, step, failed_step, step_responses, recipient,
		subscription, shared, lead, trace_parent, blob, digest, ord)
	ORDER BY t.ord
), leads AS (
	INSERT INTO messages (seq, id, subscription, type, route, size, content_type, headers, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, sender, order_skipped, workflow, step, failed_step, step_responses, recipient, trace_parent, blob, digest)
	OVERRIDING SYSTEM VALUE
	SELECT seq, id, subscription, type, route, size, content_type, headers::jsonb, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, sender, order_skipped, workflow, step, failed_step, step_responses, recipient, trace_parent, blob, digest
	FROM input WHERE NOT shared ORDER BY ord
	ON CONFLICT (id, ` + leadKey + `) DO NOTHING
	RETURNING seq
), created AS (
	SELECT input.ord, input.seq, input.payload FROM leads JOIN input ON input.seq = leads.seq
), deliveries AS (
	INSERT INTO messages (seq, id, subscription, shared, type, route, size, content_type, headers, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, sender, order_skipped, workflow, step, failed_step, step_responses, recipient, trace_parent, blob, digest)
	OVERRIDING SYSTEM VALUE
	SELECT seq, id, subscription, true, type, route, size, content_type, headers::jsonb, ordering_key, priority, deliver_after,
		expires_at, hash, state, reason, last_error, next_attempt_at, created_at, updated_at, finished_at,
		round_started_at, timer_at, sender, order_skipped, workflow, step, failed_step, step_responses, recipient, trace_parent, blob, digest
	FROM input WHERE shared AND lead IN (SELECT ord FROM created)
), priorities_used AS (
	INSERT INTO priorities (priority) SELECT DISTINCT priority FROM input ON CONFLICT DO NOTHING
), payloads AS (
	INSERT INTO bodies (seq, payload) SELECT seq, payload FROM created
), usage_rows AS (
	SELECT id, size, 1 AS delta FROM input WHERE state IN ` + liveStates + `
		AND (seq IN (SELECT seq FROM created) OR (shared AND lead IN (SELECT ord FROM created)))
), ` + countUsage + `, types_seen AS (
	INSERT INTO types (type, shard, count, first_seen, last_seen)
	SELECT input.type, pg_backend_pid() % 16, count(*), min(input.created_at), max(input.created_at)
	FROM created JOIN input ON input.seq = created.seq GROUP BY input.type
	ON CONFLICT (type, shard) DO UPDATE SET count = types.count + excluded.count,
		first_seen = least(types.first_seen, excluded.first_seen), last_seen = greatest(types.last_seen, excluded.last_seen)
)
SELECT ord FROM created`

// ingestBatch is what one ingest statement stores: messages, and for each
// the index of the first message of its run (sqlstore.Run) in msgs. Runs
// are found in each caller's messages apart, so that a group of callers
// never makes one run of two publishes.
type ingestBatch struct {
	msgs []*courier.Message
	lead []int
}

// add appends a caller's messages.
func (b *ingestBatch) add(msgs []*courier.Message) {
	for i := 0; i < len(msgs); {
		run := sqlstore.Run(msgs[i:])
		first := len(b.msgs)
		for range run {
			b.lead = append(b.lead, first)
		}
		b.msgs = append(b.msgs, run...)
		i += len(run)
	}
}

// ingestArgs turns a batch into the column arrays of ingestSQL.
func ingestArgs(b ingestBatch) ([]any, error) {
	n := len(b.msgs)
	var (
		ids, types, routes, contentTypes, hashes, states = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		subs                                             = make([]string, n)
		sizes, leads                                     = make([]int32, n), make([]int32, n)
		prios                                            = make([]int16, n)
		headers, keys, reasons, lastErrors, senders      = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		workflows, responses, recipients, traces         = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		blobs, digests                                   = make([]*string, n), make([]*string, n)
		steps, failedSteps                               = make([]int32, n), make([]int32, n)
		deliverAfter, expires, next, finished, timers    = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		created, updated, round                          = make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
		payloads                                         = make([][]byte, n)
		skipped, shared                                  = make([]bool, n), make([]bool, n)
	)
	for i, m := range b.msgs {
		h, err := encodeHeaders(m.Headers)
		if err != nil {
			return nil, err
		}
		if responses[i], err = encodeStepResponses(m.StepResponses); err != nil {
			return nil, err
		}
		ids[i], types[i], routes[i], contentTypes[i], hashes[i], states[i] = m.ID, m.Type, m.Route, m.ContentType, m.Hash, string(m.State)
		sizes[i], prios[i] = int32(len(m.Payload)), int16(m.Priority)
		if m.Blob != "" {
			sizes[i] = int32(m.Size)
		}
		blobs[i], digests[i] = nullString(m.Blob), nullString(m.Digest)
		headers[i], keys[i], reasons[i], lastErrors[i] = h, nullString(m.OrderingKey), nullString(string(m.Reason)), nullString(m.LastError)
		deliverAfter[i], expires[i], next[i], finished[i], timers[i] = ts(m.DeliverAfter), ts(m.ExpiresAt), ts(m.NextAttemptAt), ts(m.FinishedAt), ts(m.TimerAt)
		created[i], updated[i], round[i] = m.CreatedAt, m.UpdatedAt, sqlstore.OrDefault(m.RoundStartedAt, m.CreatedAt)
		senders[i], skipped[i] = nullString(m.Sender), m.OrderSkipped
		workflows[i], steps[i], failedSteps[i] = nullString(m.Workflow), int32(m.Step), int32(m.FailedStep)
		recipients[i], subs[i], traces[i] = nullString(m.Recipient), m.Subscription, nullString(m.TraceParent)
		leads[i], shared[i] = int32(b.lead[i]+1), b.lead[i] != i
		if !shared[i] {
			payloads[i] = sqlstore.NonNil(m.Payload) // a shared row's is its lead's
		}
	}
	return []any{ids, types, routes, sizes, contentTypes, headers, keys, prios, deliverAfter, expires, hashes,
		states, reasons, lastErrors, next, created, updated, finished, round, timers, payloads, senders, skipped,
		workflows, steps, failedSteps, responses, recipients, subs, shared, leads, traces, blobs, digests}, nil
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
	if len(orderingKeys(msgs)) == 0 {
		// Its group tells the other nodes of the due routes.
		return s.groupIngest(ctx, msgs)
	}
	return s.ingestAlone(ctx, msgs)
}

// ingestAlone stores msgs in a transaction of their own, under the locks
// of their capped tenants and of their ordering keys, and checks the caps
// after them, exactly: an ingest with ordering keys, or one that a group
// could not tell would fit its tenant's caps.
func (s *Store) ingestAlone(ctx context.Context, msgs []*courier.Message) ([]courier.IngestResult, error) {
	var results []courier.IngestResult
	var due []string
	tenants, quotas := s.quotas.Of(msgs)
	keys := orderingKeys(msgs)
	write := func(tx pgx.Tx) error {
		if len(tenants) > 0 {
			// Ingests of a capped tenant take turns on every node: the
			// use read below, in a statement after the lock is held, has
			// every earlier ingest of it.
			if _, err := tx.Exec(ctx, lockTenantsSQL, tenants); err != nil {
				return classify("lock tenants", err)
			}
		}
		if len(keys) > 0 {
			if _, err := tx.Exec(ctx, lockKeysSQL, keys); err != nil {
				return classify("lock ordering keys", err)
			}
		}
		// Whether each waits for its key is decided before it is
		// stored, so that the sender is told what is stored.
		if err := courier.AdmitKeyed(keyTx{ctx, tx}, msgs); err != nil {
			return err
		}
		var b ingestBatch
		b.add(msgs)
		var err error
		if results, due, err = ingest(ctx, tx, b); err != nil {
			return err
		}
		if err := number(ctx, tx, msgs, results); err != nil {
			return err
		}
		if quotas != nil {
			if err := sqlstore.CheckQuotas(quotas, msgs, results, func(tenants []string) (map[string]courier.TenantUsage, error) {
				return tenantUsage(ctx, tx, tenants)
			}); err != nil {
				return err
			}
		}
		return settleIngested(ctx, tx, msgs, results, &due)
	}
	err := s.acknowledged(ctx, "ingest", func(conn *pgxpool.Conn) error { return pgx.BeginFunc(ctx, conn, write) })
	if err != nil {
		return nil, err
	}
	s.dueNow(due...)
	return results, nil
}

// readSequencesSQL reads where the numbering of keys on routes stands
// (migration 0012): $1 the routes, $2 the keys, pairwise.
const readSequencesSQL = `SELECT s.route, s.ordering_key, s.last, s.last_id
	FROM unnest($1::text[], $2::text[]) AS k(route, ordering_key)
	JOIN sequences s ON s.route = k.route AND s.ordering_key = k.ordering_key`

// writeSequencesSQL writes the numbers given to messages ($1 ids, $2
// subscriptions, $3 numbers, $4 previous ids) and where the numbering of
// their keys stands after them ($5 routes, $6 keys, $7 last numbers, $8
// their ids), in one statement.
const writeSequencesSQL = `WITH numbered AS (
	UPDATE messages m SET sequence = n.sequence, previous_id = n.previous_id
	FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[]) AS n(id, subscription, sequence, previous_id)
	WHERE m.id = n.id AND m.subscription = n.subscription
)
INSERT INTO sequences (route, ordering_key, last, last_id)
SELECT * FROM unnest($5::text[], $6::text[], $7::bigint[], $8::text[])
ON CONFLICT (route, ordering_key) DO UPDATE SET last = excluded.last, last_id = excluded.last_id`

// number gives the created messages that join their keys' order their
// Sequence, in input order, after the last number of their key on their
// route. The caller holds the locks of the keys, so that ingests on other
// connections and nodes number a key's messages one after another; only
// created messages are numbered, so that one ingested again (or whose id
// was taken meanwhile) takes no number.
func number(ctx context.Context, tx pgx.Tx, msgs []*courier.Message, results []courier.IngestResult) error {
	type group struct{ route, key string }
	heads := map[group]courier.SequenceHead{}
	var order []group
	var numbered []*courier.Message
	for i, m := range msgs {
		if results[i].Status != courier.IngestCreated || !courier.JoinsKey(m) {
			continue
		}
		numbered = append(numbered, m)
		if gk := (group{m.Route, m.OrderingKey}); len(order) == 0 || order[len(order)-1] != gk {
			if _, ok := heads[gk]; !ok {
				heads[gk] = courier.SequenceHead{}
				order = append(order, gk)
			}
		}
	}
	if len(numbered) == 0 {
		return nil
	}
	routes, keys := make([]string, len(order)), make([]string, len(order))
	for i, gk := range order {
		routes[i], keys[i] = gk.route, gk.key
	}
	rows, err := tx.Query(ctx, readSequencesSQL, routes, keys)
	if err != nil {
		return classify("read sequences", err)
	}
	var gk group
	var h courier.SequenceHead
	if _, err := pgx.ForEachRow(rows, []any{&gk.route, &gk.key, &h.Last, &h.ID}, func() error {
		heads[gk] = h
		return nil
	}); err != nil {
		return classify("read sequences", err)
	}
	ids, subs, seqs, prevs := make([]string, len(numbered)), make([]string, len(numbered)), make([]int64, len(numbered)), make([]*string, len(numbered))
	for i, m := range numbered {
		gk := group{m.Route, m.OrderingKey}
		heads[gk] = heads[gk].Number(m)
		ids[i], subs[i], seqs[i], prevs[i] = m.ID, m.Subscription, m.Sequence, nullString(m.PreviousID)
	}
	lasts, lastIDs := make([]int64, len(order)), make([]string, len(order))
	for i, gk := range order {
		lasts[i], lastIDs[i] = heads[gk].Last, heads[gk].ID
	}
	if _, err := tx.Exec(ctx, writeSequencesSQL, ids, subs, seqs, prevs, routes, keys, lasts, lastIDs); err != nil {
		return classify("write sequences", err)
	}
	return nil
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
		seq, err := courier.SettleKey(keyTx{ctx, tx}, m.Route, m.OrderingKey, m.UpdatedAt)
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
		if err := tx.QueryRow(ctx, `SELECT next_attempt_at FROM messages WHERE id = $1 AND subscription = $2`,
			m.ID, m.Subscription).Scan(&next); err != nil {
			return classify("read back "+m.Key(), err)
		}
		if next != nil {
			m.NextAttemptAt = *next
		}
	}
	return nil
}

// ingest inserts a batch through q and works out each message's result:
// every message of a run whose lead was created is created; every one of
// a run whose id exists is reported as the stored lead compares. due lists
// the routes of the created messages that are queued and due now.
func ingest(ctx context.Context, q querier, b ingestBatch) (results []courier.IngestResult, due []string, err error) {
	msgs := b.msgs
	if len(msgs) == 0 {
		return []courier.IngestResult{}, nil, nil
	}
	args, err := ingestArgs(b)
	if err != nil {
		return nil, nil, err
	}
	rows, err := q.Query(ctx, ingestSQL, args...)
	if err != nil {
		return nil, nil, classify("ingest", err)
	}
	created, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, nil, classify("ingest", err)
	}
	fresh := make([]bool, len(msgs))
	for _, ord := range created {
		fresh[ord-1] = true
	}
	results = make([]courier.IngestResult, len(msgs))
	var others []string
	now := time.Now()
	for i, m := range msgs {
		if !fresh[b.lead[i]] {
			if b.lead[i] == i {
				others = append(others, m.ID)
			}
			continue
		}
		results[i].Status = courier.IngestCreated
		if m.State == courier.StateQueued && !m.NextAttemptAt.After(now) && (len(due) == 0 || due[len(due)-1] != m.Route) {
			due = append(due, m.Route)
		}
	}
	if len(others) == 0 {
		return results, due, nil
	}
	rows, err = q.Query(ctx, `SELECT `+messageColumns+` FROM messages WHERE id = ANY($1) AND NOT shared`, others)
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
			return nil, nil, courier.Unavailable("the store", fmt.Errorf("ingest: message %s was neither created nor found", m.Key()))
		}
		results[i] = sqlstore.Existing(old, m)
	}
	return results, due, nil
}

// Message returns one message or delivery, by its key, with its payload.
func (s *Store) Message(ctx context.Context, key string) (*courier.Message, error) {
	id, sub := courier.ParseKey(key)
	m, _, err := scanMessage(s.pool.QueryRow(ctx, `SELECT `+columns("m")+`, b.payload
		FROM messages m LEFT JOIN bodies b ON b.seq = `+payloadOf("m")+`
		WHERE m.id = $1 AND m.subscription = $2`, id, sub), true)
	if err != nil {
		return nil, one("read message "+key, err, sqlstore.MessageNotFound(key))
	}
	return m, nil
}

// Deliveries returns every row of a message, by subscription name (in
// byte order, as names are compared in Go), with the payload.
func (s *Store) Deliveries(ctx context.Context, id string) ([]*courier.Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+columns("m")+`, b.payload
		FROM messages m LEFT JOIN bodies b ON b.seq = `+payloadOf("m")+`
		WHERE m.id = $1 ORDER BY m.subscription COLLATE "C"`, id)
	out, err := collect(nil, rows, err, "read message "+id, func(row scanner) (*courier.Message, error) {
		m, _, err := scanMessage(row, true)
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
	page, err := sqlstore.ListMessages(sqlstore.Where{Numbered: true}, messageColumns, f, s.readRows(ctx),
		func(row scanner) (*courier.Message, int64, error) { return scanMessage(row, false) })
	return page, classify("list messages", err)
}

// Attempts returns the attempts of a message or delivery, oldest first.
func (s *Store) Attempts(ctx context.Context, key string) ([]courier.Attempt, error) {
	out, err := sqlstore.Attempts(key, sqlstore.Where{Numbered: true},
		func() error { _, err := s.Message(ctx, key); return err }, s.readRows(ctx), sqlstore.ScanAttempt)
	return out, classify("list attempts", err)
}

// Discard moves a queued or suspended message or delivery to discarded.
func (s *Store) Discard(ctx context.Context, key string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Discard(key, a)
	return s.transition(ctx, key, a, decide)
}

// Erase erases the payload of message id and discards its deliveries that
// are live (sqlstore.Erase), in one transaction under the locks of their
// ordering keys and their rows. A large object of the store's goes in the
// same transaction; a blob of another area right after it.
func (s *Store) Erase(ctx context.Context, id string, a courier.Action) ([]*courier.Message, error) {
	var out []*courier.Message
	var blob string
	_, inTx := s.blobs.(largeObjects)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		out, blob, err = sqlstore.Erase(eraseTx{ctx, tx}, id, a)
		if err != nil {
			return err
		}
		if oid, ok := parseOID(blob); ok && inTx {
			return unlinkObjects(ctx, tx, []uint32{oid})
		}
		return nil
	})
	if err != nil {
		return nil, classify("erase", err)
	}
	if !inTx {
		sqlstore.RemoveErasedBlob(ctx, s.blobs, s.logger, id, blob)
	}
	for _, m := range out {
		if m.OrderingKey != "" {
			s.dueNow(m.Route) // the next message of its key may be due now
		}
	}
	return out, nil
}

// eraseTx is the sqlstore.EraseTx of a transaction.
type eraseTx struct {
	ctx context.Context
	tx  pgx.Tx
}

var _ sqlstore.EraseTx = eraseTx{}

// Deliveries takes the locks of the rows' ordering keys before their own.
func (e eraseTx) Deliveries(id string) ([]*courier.Message, error) {
	if _, err := e.tx.Exec(e.ctx, `SELECT courier_lock_keys(array_agg(ordering_key)) FROM messages WHERE id = $1`, id); err != nil {
		return nil, classify("lock the ordering keys of "+id, err)
	}
	rows, err := e.tx.Query(e.ctx, `SELECT `+messageColumns+` FROM messages WHERE id = $1 ORDER BY subscription COLLATE "C" FOR UPDATE`, id)
	return collectMessages(rows, err, "read message "+id)
}

func (e eraseTx) Discard(d, next *courier.Message) error {
	_, err := act(e.ctx, e.tx, d.Key(), func(*courier.Message) (*courier.Message, error) { return next, nil })
	return err
}

func (e eraseTx) RecordAction(a courier.Action) error { return insertAction(e.ctx, e.tx, a) }

func (e eraseTx) ErasePayload(id string, a courier.Action) error {
	if _, err := e.tx.Exec(e.ctx, `UPDATE bodies SET payload = ''::bytea WHERE seq IN (SELECT seq FROM messages WHERE id = $1 AND NOT shared)`, id); err != nil {
		return classify("erase the payload of "+id, err)
	}
	_, err := e.tx.Exec(e.ctx, `UPDATE messages SET blob = NULL, digest = NULL, step_responses = NULL, erased_at = $2, erased_by = $3, erased_reason = $4 WHERE id = $1`,
		id, a.At, a.Who, nullString(a.Detail))
	return classify("erase the payload of "+id, err)
}

// Resubmit moves a suspended message or delivery back to queued, due at a.At.
func (s *Store) Resubmit(ctx context.Context, key, route string, a courier.Action) (*courier.Message, error) {
	a, decide := sqlstore.Resubmit(key, route, a)
	m, err := s.transition(ctx, key, a, decide)
	if err == nil {
		s.dueNow(m.Route)
	}
	return m, err
}

// transition changes a message or delivery as decide says and records the
// operator action, in one transaction under the lock of its ordering key.
func (s *Store) transition(ctx context.Context, key string, a courier.Action, decide sqlstore.Decide) (*courier.Message, error) {
	var m *courier.Message
	id, sub := courier.ParseKey(key)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT courier_lock_keys(array_agg(ordering_key)) FROM messages
			WHERE id = $1 AND subscription = $2`, id, sub); err != nil {
			return classify("lock the ordering key of "+key, err)
		}
		var err error
		if m, err = act(ctx, tx, key, decide); err != nil {
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

// act reads a message or delivery (locking its row), decides its change
// and writes it, keeping the order of its key; the caller holds the key's
// lock.
func act(ctx context.Context, tx pgx.Tx, key string, decide sqlstore.Decide) (*courier.Message, error) {
	id, sub := courier.ParseKey(key)
	m, seq, err := scanMessage(tx.QueryRow(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE id = $1 AND subscription = $2 FOR UPDATE`, id, sub), false)
	if err != nil {
		return nil, one("read message "+key, err, sqlstore.MessageNotFound(key))
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
		return nil, classify("change message "+key, err)
	}
	ords, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, classify("change message "+key, err)
	}
	if len(ords) != 1 {
		// The row is locked and was read as it is: the change must apply.
		return nil, courier.Internal(fmt.Errorf("change message %s: %d rows changed", key, len(ords)))
	}
	if err := courier.Reorder(keyTx{ctx, tx}, next, courier.KeyPrior{Seq: seq, Route: m.Route, State: m.State}); err != nil {
		return nil, err
	}
	return next, nil
}

// lockTenantsSQL takes the transaction-scoped locks of tenants ($1, in
// order), of class tenantLockClass of the two-key space.
const lockTenantsSQL = `SELECT pg_advisory_xact_lock(` + tenantLockClass + `, hashtext(t))
	FROM unnest($1::text[]) WITH ORDINALITY AS u(t, ord) ORDER BY ord`

// tenantLockClass is the advisory lock class of tenants' ingests.
const tenantLockClass = "1668248443"

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

// Purge deletes up to limit terminal messages and deliveries that finished
// before the cutoff, with their payloads, attempts and actions (kept under
// the row's key: the id, or the id, '/' and the subscription; not the
// changes of a topology object of that name). The lead of a published
// message, which keeps the payload, is taken only once no delivery that
// shares it is left, so the payload goes with the last; the deliveries are
// looked up by the lead's id (a NOT EXISTS there is planned as a hash of
// every shared row). Nodes purging at the same time skip each other's rows.
func (s *Store) Purge(ctx context.Context, p courier.Purge, limit int) (int, error) {
	w := sqlstore.Where{Numbered: true}
	w.Raw(`state IN ('delivered', 'discarded')`)
	w.Add("finished_at < ?", p.Before)
	w.Raw(`(m.shared OR m.subscription = '' OR (SELECT o.seq FROM messages o WHERE o.id = m.id AND o.shared LIMIT 1) IS NULL)`)
	w.Purge(p)
	tag, err := s.pool.Exec(ctx, `WITH gone AS (
			SELECT seq, CASE WHEN subscription = '' THEN id ELSE id || '/' || subscription END AS key
			FROM messages m`+w.SQL()+`
			LIMIT `+w.Arg(limit)+` FOR UPDATE SKIP LOCKED
		), a AS (DELETE FROM attempts USING gone WHERE attempts.message_id = gone.key
		), b AS (DELETE FROM actions USING gone WHERE actions.subject = gone.key AND actions.object = ''
		), c AS (DELETE FROM bodies USING gone WHERE bodies.seq = gone.seq) -- none for a shared row
		DELETE FROM messages USING gone WHERE messages.seq = gone.seq`, w.Args...)
	if err != nil {
		return 0, classify("purge", err)
	}
	if p.Tenant != "" {
		return int(tag.RowsAffected()), nil // the events are no tenant's: the purge of all takes them
	}
	// Operational events go with the messages of their time.
	if _, err := s.pool.Exec(ctx, `DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE at < $1 ORDER BY seq LIMIT $2)`,
		p.Before, limit); err != nil {
		return 0, classify("purge events", err)
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

// rowScan holds what a message's row is scanned into, apart from the
// fields that go straight into the message. Scanned into locals, each of
// them escaped to the heap on its own, through the list of destinations;
// one rowScan, taken from a pool, spares a row some twenty allocations
// (a claim scans every message it leases).
type rowScan struct {
	seq                                                                      int64
	prio                                                                     int16
	headers, stepResponses                                                   []byte
	orderingKey, reason, endpoint, lastError, lastClass, fallbackFrom        pgtype.Text
	leaseOwner, sender, workflow, recipient, previousID, traceParent, digest pgtype.Text
	blob, erasedBy, erasedReason                                             pgtype.Text
	erasedAt                                                                 pgtype.Timestamptz
	sequence                                                                 pgtype.Int8
	deliverAfter, expiresAt, nextAttempt, leaseUntil, finished, timerAt      pgtype.Timestamptz
	state                                                                    string
	dest                                                                     []any
}

var rowScans = sync.Pool{New: func() any { return new(rowScan) }}

// scanMessage reads messageColumns, and the payload after them when payload
// is set.
func scanMessage(row scanner, payload bool) (*courier.Message, int64, error) {
	m := new(courier.Message)
	r := rowScans.Get().(*rowScan)
	defer rowScans.Put(r)
	r.dest = append(r.dest[:0], &r.seq, &m.ID, &m.Subscription, &m.Type, &m.Route, &m.Size, &m.ContentType, &r.headers, &r.orderingKey,
		&r.prio, &r.deliverAfter, &r.expiresAt, &m.Hash, &r.state, &r.reason, &m.Attempts, &m.TotalAttempts,
		&m.Abandoned, &m.ResubmitCount, &m.RoundStartedAt, &m.Escalated, &r.fallbackFrom, &r.timerAt, &r.nextAttempt,
		&r.leaseUntil, &r.leaseOwner, &r.endpoint, &r.lastError, &r.lastClass, &m.CreatedAt, &m.UpdatedAt, &r.finished, &r.sender,
		&m.OrderSkipped, &r.workflow, &m.Step, &m.FailedStep, &r.stepResponses, &r.recipient, &r.sequence, &r.previousID, &r.traceParent, &r.blob, &r.digest,
		&r.erasedAt, &r.erasedBy, &r.erasedReason)
	if payload {
		r.dest = append(r.dest, &m.Payload)
	}
	err := row.Scan(r.dest...)
	clear(r.dest) // the pool must not keep the message alive
	if err != nil {
		return nil, 0, err
	}
	if m.Headers, err = sqlstore.DecodeHeaders(r.headers); err != nil {
		return nil, 0, fmt.Errorf("message %s: %w", m.Key(), err)
	}
	if m.StepResponses, err = sqlstore.DecodeStepResponses(r.stepResponses); err != nil {
		return nil, 0, fmt.Errorf("message %s: %w", m.Key(), err)
	}
	m.Priority, m.Sender, m.Workflow, m.Recipient = int(r.prio), r.sender.String, r.workflow.String, r.recipient.String
	m.Sequence, m.PreviousID, m.TraceParent = r.sequence.Int64, r.previousID.String, r.traceParent.String
	m.Blob, m.Digest = r.blob.String, r.digest.String
	m.OrderingKey, m.FallbackFrom, m.LeaseOwner = r.orderingKey.String, r.fallbackFrom.String, r.leaseOwner.String
	m.State, m.Reason = courier.State(r.state), courier.Reason(r.reason.String)
	m.Endpoint, m.LastError, m.LastClass = r.endpoint.String, r.lastError.String, courier.ErrorClass(r.lastClass.String)
	m.DeliverAfter, m.ExpiresAt, m.TimerAt = fromTS(r.deliverAfter), fromTS(r.expiresAt), fromTS(r.timerAt)
	m.NextAttemptAt, m.LeaseUntil, m.FinishedAt = fromTS(r.nextAttempt), fromTS(r.leaseUntil), fromTS(r.finished)
	m.RoundStartedAt, m.CreatedAt, m.UpdatedAt = m.RoundStartedAt.UTC(), m.CreatedAt.UTC(), m.UpdatedAt.UTC()
	if r.erasedAt.Valid {
		m.Erased = &courier.Erasure{At: r.erasedAt.Time.UTC(), By: r.erasedBy.String, Reason: r.erasedReason.String}
	}
	return m, r.seq, nil
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
	text, err := sqlstore.EncodeStepResponses(r)
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
