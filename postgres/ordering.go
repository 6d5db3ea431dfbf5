package postgres

import (
	"context"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

// The order of keyed messages (docs/design.md §6) is decided by the root
// package (courier.KeyGroup, courier.Reorder); the store reads a key's
// group through the partial indexes of migration 0002 and writes what was
// decided, in a transaction that holds the advisory locks of the keys it
// changes (lockKeysSQL), so that nodes change a key's group one at a time.

// groupSQL reads a key's group leaving out one message: $1 the route, $2
// the key, $3 the seq left out (0: none).
const groupSQL = `SELECT
	EXISTS (SELECT 1 FROM messages WHERE route = $1 AND ordering_key = $2 AND ` + keyActive + ` AND seq <> $3),
	(SELECT min(seq) FROM messages WHERE route = $1 AND ordering_key = $2 AND ` + keySuspended + ` AND seq <> $3),
	(SELECT min(seq) FROM messages WHERE route = $1 AND ordering_key = $2 AND ` + keyWaiting + ` AND seq <> $3)`

// keyTx is the courier.KeyGroups of a transaction.
type keyTx struct {
	ctx context.Context
	tx  pgx.Tx
}

var _ courier.KeyGroups = keyTx{}

func (k keyTx) Group(route, key string, except int64) (courier.KeyGroup, error) {
	var g courier.KeyGroup
	var suspended, waiting *int64
	if err := k.tx.QueryRow(k.ctx, groupSQL, route, key, except).Scan(&g.Active, &suspended, &waiting); err != nil {
		return g, classify(fmt.Sprintf("read ordering key %s on %s", key, route), err)
	}
	if suspended != nil {
		g.OldestSuspended = *suspended
	}
	if waiting != nil {
		g.OldestWaiting = *waiting
	}
	return g, nil
}

func (k keyTx) DeliverAfter(seq int64) (time.Time, error) {
	var after *time.Time
	if err := k.tx.QueryRow(k.ctx, `SELECT deliver_after FROM messages WHERE seq = $1`, seq).Scan(&after); err != nil || after == nil {
		return time.Time{}, classify(fmt.Sprintf("read the deliver_after of message %d", seq), err)
	}
	return *after, nil
}

func (k keyTx) Hold(seq int64) error {
	_, err := k.tx.Exec(k.ctx, `UPDATE messages SET next_attempt_at = NULL WHERE seq = $1 AND state = 'queued'`, seq)
	return classify(fmt.Sprintf("make message %d wait for its key", seq), err)
}

func (k keyTx) Promote(seq int64, p *courier.Message) error {
	_, err := k.tx.Exec(k.ctx, `UPDATE messages SET next_attempt_at = $1, round_started_at = $2, timer_at = $2, updated_at = $2
		WHERE seq = $3 AND state = 'queued' AND next_attempt_at IS NULL`, p.NextAttemptAt, p.RoundStartedAt, seq)
	return classify(fmt.Sprintf("let message %d of its key go", seq), err)
}

// readPriors reads where the keyed messages of changes stand, by key.
func readPriors(ctx context.Context, tx pgx.Tx, changes []courier.Change) (map[string]courier.KeyPrior, error) {
	var ids, subs []string
	for _, c := range changes {
		if c.Message.OrderingKey != "" {
			ids, subs = append(ids, c.Message.ID), append(subs, c.Message.Subscription)
		}
	}
	out := make(map[string]courier.KeyPrior, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT m.id, m.subscription, m.seq, m.route, m.state
		FROM unnest($1::text[], $2::text[]) AS k(id, subscription)
		JOIN messages m ON m.id = k.id AND m.subscription = k.subscription`, ids, subs)
	type keyed struct {
		key string
		courier.KeyPrior
	}
	found, err := collect(nil, rows, err, "read keyed messages", func(row scanner) (keyed, error) {
		var k keyed
		var id, sub, state string
		err := row.Scan(&id, &sub, &k.Seq, &k.Route, &state)
		k.key, k.State = courier.DeliveryKey(id, sub), courier.State(state)
		return k, err
	})
	if err != nil {
		return nil, err
	}
	for _, k := range found {
		out[k.key] = k.KeyPrior
	}
	return out, nil
}

// settleKeysSQL reads the groups of keys ($1 routes, $2 keys, pairwise),
// each with the deliver_after of its oldest waiting member: what
// courier.SettleKey reads of each, for a whole batch in one statement.
const settleKeysSQL = `SELECT k.route, k.key, g.active, g.suspended, g.waiting,
	(SELECT deliver_after FROM messages WHERE seq = g.waiting)
FROM unnest($1::text[], $2::text[]) AS k(route, key)
CROSS JOIN LATERAL (SELECT
	EXISTS (SELECT 1 FROM messages WHERE route = k.route AND ordering_key = k.key AND ` + keyActive + `) AS active,
	(SELECT min(seq) FROM messages WHERE route = k.route AND ordering_key = k.key AND ` + keySuspended + `) AS suspended,
	(SELECT min(seq) FROM messages WHERE route = k.route AND ordering_key = k.key AND ` + keyWaiting + `) AS waiting) g`

// promoteSQL lets waiting members go ($1 seqs, $2 their next attempts, $3
// the starts of their rounds), as keyTx.Promote does one.
const promoteSQL = `UPDATE messages m SET next_attempt_at = u.at, round_started_at = u.now, timer_at = u.now, updated_at = u.now
FROM unnest($1::bigint[], $2::timestamptz[], $3::timestamptz[]) AS u(seq, at, now)
WHERE m.seq = u.seq AND m.state = 'queued' AND m.next_attempt_at IS NULL`

// keySettle is a key whose group a change left, to be settled at now.
type keySettle struct {
	route, key string
	now        time.Time
}

// settleKeys settles many keys' groups as courier.SettleKey does each, in
// two statements whatever their number: the groups read at once, the next
// members decided in Go, and those let go written at once. Each key must
// appear once, and nothing else of the transaction may change its group
// meanwhile.
func settleKeys(ctx context.Context, tx pgx.Tx, keys []keySettle) error {
	if len(keys) == 0 {
		return nil
	}
	routes, names := make([]string, len(keys)), make([]string, len(keys))
	at := make(map[[2]string]time.Time, len(keys))
	for i, k := range keys {
		routes[i], names[i] = k.route, k.key
		at[[2]string{k.route, k.key}] = k.now
	}
	rows, err := tx.Query(ctx, settleKeysSQL, routes, names)
	if err != nil {
		return classify("read ordering keys", err)
	}
	var seqs []int64
	var nexts, nows []time.Time
	var route, key string
	var active bool
	var suspended, waiting *int64
	var after *time.Time
	_, err = pgx.ForEachRow(rows, []any{&route, &key, &active, &suspended, &waiting, &after}, func() error {
		g := courier.KeyGroup{Active: active}
		if suspended != nil {
			g.OldestSuspended = *suspended
		}
		if waiting != nil {
			g.OldestWaiting = *waiting
		}
		seq := g.Next()
		if seq == 0 {
			return nil
		}
		now := at[[2]string{route, key}]
		m := &courier.Message{}
		if after != nil {
			m.DeliverAfter = *after
		}
		p := courier.Promoted(m, now)
		seqs, nexts, nows = append(seqs, seq), append(nexts, p.NextAttemptAt), append(nows, p.RoundStartedAt)
		return nil
	})
	if err != nil {
		return classify("read ordering keys", err)
	}
	if len(seqs) == 0 {
		return nil
	}
	if _, err := tx.Exec(ctx, promoteSQL, seqs, nexts, nows); err != nil {
		return classify("let messages of their keys go", err)
	}
	return nil
}
