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
