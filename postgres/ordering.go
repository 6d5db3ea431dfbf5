package postgres

import (
	"context"
	"fmt"
	"math"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

// The order of keyed messages (docs/design.md §6) is decided by the root package
// (courier.KeyGroup); the store reads a key's group through the partial
// indexes of migration 0002 and writes what was decided, in a transaction
// that holds the advisory locks of the keys it changes (lockKeysSQL), so
// that nodes change a key's group one at a time.

// groupSQL reads a key's group leaving out one message: $1 the route, $2
// the key, $3 the seq left out (0: none).
const groupSQL = `SELECT
	EXISTS (SELECT 1 FROM messages WHERE route = $1 AND ordering_key = $2 AND ` + keyActive + ` AND seq <> $3),
	(SELECT min(seq) FROM messages WHERE route = $1 AND ordering_key = $2 AND ` + keySuspended + ` AND seq <> $3),
	(SELECT min(seq) FROM messages WHERE route = $1 AND ordering_key = $2 AND ` + keyWaiting + ` AND seq <> $3)`

func readGroup(ctx context.Context, tx pgx.Tx, route, key string, except int64) (courier.KeyGroup, error) {
	var g courier.KeyGroup
	var suspended, waiting *int64
	if err := tx.QueryRow(ctx, groupSQL, route, key, except).Scan(&g.Active, &suspended, &waiting); err != nil {
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

// admit decides, before they are inserted, which new messages wait for
// their keys: each is younger than every member of its key's group, and
// than the messages before it in msgs. A message taken for a member here
// that is not stored after all (its id was taken) is set right by settle.
func admit(ctx context.Context, tx pgx.Tx, msgs []*courier.Message) error {
	type group struct{ route, key string }
	seen := map[group]bool{}
	for _, m := range msgs {
		if !courier.JoinsKey(m) {
			continue
		}
		gk := group{m.Route, m.OrderingKey}
		if seen[gk] {
			courier.Wait(m) // an older message of this call is a member
			continue
		}
		seen[gk] = true
		g, err := readGroup(ctx, tx, m.Route, m.OrderingKey, 0)
		if err != nil {
			return err
		}
		if !g.Admits(math.MaxInt64) {
			courier.Wait(m)
		}
	}
	return nil
}

// join decides whether a stored message that came into its key's group
// (resubmitted, or moved to another route) goes or waits.
func join(ctx context.Context, tx pgx.Tx, m *courier.Message, seq int64) error {
	if !courier.JoinsKey(m) || m.NextAttemptAt.IsZero() {
		return nil
	}
	g, err := readGroup(ctx, tx, m.Route, m.OrderingKey, seq)
	if err != nil {
		return err
	}
	if g.Admits(seq) {
		return nil
	}
	if _, err := tx.Exec(ctx, `UPDATE messages SET next_attempt_at = NULL WHERE seq = $1 AND state = 'queued'`, seq); err != nil {
		return classify("make "+m.ID+" wait for its key", err)
	}
	courier.Wait(m)
	return nil
}

// settle lets the next waiting message of a key's group go, if the group
// says one does, with its round starting at now. It returns the seq of the
// message it let go (0: none) and when that is due.
func settle(ctx context.Context, tx pgx.Tx, route, key string, now time.Time) (int64, time.Time, error) {
	g, err := readGroup(ctx, tx, route, key, 0)
	if err != nil {
		return 0, time.Time{}, err
	}
	seq := g.Next()
	if seq == 0 {
		return 0, time.Time{}, nil
	}
	w := &courier.Message{}
	var deliverAfter *time.Time
	if err := tx.QueryRow(ctx, `SELECT deliver_after FROM messages WHERE seq = $1`, seq).Scan(&deliverAfter); err != nil {
		return 0, time.Time{}, classify(fmt.Sprintf("read the next message of key %s on %s", key, route), err)
	}
	if deliverAfter != nil {
		w.DeliverAfter = *deliverAfter
	}
	p := courier.Promoted(w, now)
	if _, err := tx.Exec(ctx, `UPDATE messages SET next_attempt_at = $1, round_started_at = $2, timer_at = $2, updated_at = $2
		WHERE seq = $3 AND state = 'queued' AND next_attempt_at IS NULL`, p.NextAttemptAt, p.RoundStartedAt, seq); err != nil {
		return 0, time.Time{}, classify(fmt.Sprintf("let the next message of key %s on %s go", key, route), err)
	}
	return seq, p.NextAttemptAt, nil
}

// prior is where a keyed message stood before a change.
type prior struct {
	seq   int64
	route string
	state courier.State
}

// readPriors reads where the keyed messages of changes stand, by key.
func readPriors(ctx context.Context, tx pgx.Tx, changes []courier.Change) (map[string]prior, error) {
	var ids, subs []string
	for _, c := range changes {
		if c.Message.OrderingKey != "" {
			ids, subs = append(ids, c.Message.ID), append(subs, c.Message.Subscription)
		}
	}
	out := make(map[string]prior, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := tx.Query(ctx, `SELECT m.id, m.subscription, m.seq, m.route, m.state
		FROM unnest($1::text[], $2::text[]) AS k(id, subscription)
		JOIN messages m ON m.id = k.id AND m.subscription = k.subscription`, ids, subs)
	type keyed struct {
		key string
		prior
	}
	found, err := collect(nil, rows, err, "read keyed messages", func(row scanner) (keyed, error) {
		var k keyed
		var id, sub, state string
		err := row.Scan(&id, &sub, &k.seq, &k.route, &state)
		k.key, k.state = courier.DeliveryKey(id, sub), courier.State(state)
		return k, err
	})
	if err != nil {
		return nil, err
	}
	for _, k := range found {
		out[k.key] = k.prior
	}
	return out, nil
}

// reorder keeps the order of keyed message m after a change from where it
// stood: it joins its group when it came into one, and the groups it left
// and joined let their next message go if one may.
func reorder(ctx context.Context, tx pgx.Tx, m *courier.Message, p prior) error {
	if m.OrderingKey == "" {
		return nil
	}
	if p.state == courier.StateSuspended || p.route != m.Route {
		if err := join(ctx, tx, m, p.seq); err != nil {
			return err
		}
	}
	if _, _, err := settle(ctx, tx, p.route, m.OrderingKey, m.UpdatedAt); err != nil {
		return err
	}
	if p.route != m.Route {
		_, _, err := settle(ctx, tx, m.Route, m.OrderingKey, m.UpdatedAt)
		return err
	}
	return nil
}
