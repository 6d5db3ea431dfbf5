package sqlite

import (
	"database/sql"
	"fmt"
	"math"
	"time"

	courier "github.com/courier-gw/courier"
)

// The order of keyed messages (docs/design.md §6) is decided by the root package
// (courier.KeyGroup); the store reads a key's group through the partial
// indexes of migration 0003 and writes what was decided. SQLite has one
// writer, so the group read and the write that follows it are one.

// groupSQL reads a key's group leaving out one message: ?1 the route, ?2
// the key, ?3 the seq left out (0: none). The parameters are written +?N so
// that SQLite does not compile the statement anew for each key (see dueSQL).
const groupSQL = `SELECT
	EXISTS (SELECT 1 FROM messages INDEXED BY messages_key_active
		WHERE route = +?1 AND ordering_key = +?2 AND ` + keyActive + ` AND seq <> +?3),
	(SELECT MIN(seq) FROM messages INDEXED BY messages_key_suspended
		WHERE route = +?1 AND ordering_key = +?2 AND ` + keySuspended + ` AND seq <> +?3),
	(SELECT MIN(seq) FROM messages INDEXED BY messages_key_waiting
		WHERE route = +?1 AND ordering_key = +?2 AND ` + keyWaiting + ` AND seq <> +?3)`

// promoteSQL makes a waiting message due: ?1 due, ?2 its round's start and
// timer, ?3 the seq.
const promoteSQL = `UPDATE messages SET next_attempt_at = ?1, round_started_at = ?2, timer_at = ?2, updated_at = ?2
	WHERE seq = ?3 AND state = 'queued' AND next_attempt_at IS NULL`

// waitSQL makes a queued message wait for its key: ?1 the seq.
const waitSQL = `UPDATE messages SET next_attempt_at = NULL WHERE seq = ?1 AND state = 'queued'`

func (s *Store) readGroup(tx *sql.Tx, route, key string, except int64) (courier.KeyGroup, error) {
	var g courier.KeyGroup
	var suspended, waiting sql.NullInt64
	if err := s.stmt(tx, s.groupStmt).QueryRow(route, key, except).Scan(&g.Active, &suspended, &waiting); err != nil {
		return g, classify(fmt.Sprintf("read ordering key %s on %s", key, route), err)
	}
	g.OldestSuspended, g.OldestWaiting = suspended.Int64, waiting.Int64
	return g, nil
}

// admit decides, before it is inserted, whether a new message waits for
// its key: it is younger than every member of the group.
func (s *Store) admit(tx *sql.Tx, m *courier.Message) error {
	if !courier.JoinsKey(m) {
		return nil
	}
	g, err := s.readGroup(tx, m.Route, m.OrderingKey, 0)
	if err != nil {
		return err
	}
	if !g.Admits(math.MaxInt64) {
		courier.Wait(m)
	}
	return nil
}

// join decides whether a stored message that came into its key's group
// (resubmitted, or moved to another route) goes or waits.
func (s *Store) join(tx *sql.Tx, m *courier.Message, seq int64) error {
	if !courier.JoinsKey(m) || m.NextAttemptAt.IsZero() {
		return nil
	}
	g, err := s.readGroup(tx, m.Route, m.OrderingKey, seq)
	if err != nil {
		return err
	}
	if g.Admits(seq) {
		return nil
	}
	if _, err := s.stmt(tx, s.waitStmt).Exec(seq); err != nil {
		return classify(fmt.Sprintf("make %s wait for its key", m.ID), err)
	}
	courier.Wait(m)
	return nil
}

// settle lets the next waiting message of a key's group go, if the group
// says one does, with its round starting at now.
func (s *Store) settle(tx *sql.Tx, route, key string, now time.Time) error {
	g, err := s.readGroup(tx, route, key, 0)
	if err != nil {
		return err
	}
	seq := g.Next()
	if seq == 0 {
		return nil
	}
	var deliverAfter sql.NullInt64
	if err := s.stmt(tx, s.afterStmt).QueryRow(seq).Scan(&deliverAfter); err != nil {
		return classify(fmt.Sprintf("read the next message of key %s on %s", key, route), err)
	}
	w := &courier.Message{}
	if deliverAfter.Valid {
		w.DeliverAfter = fromMicros(deliverAfter.Int64)
	}
	p := courier.Promoted(w, now)
	if _, err := s.stmt(tx, s.promoteStmt).Exec(micros(p.NextAttemptAt), micros(p.RoundStartedAt), seq); err != nil {
		return classify(fmt.Sprintf("let the next message of key %s on %s go", key, route), err)
	}
	return nil
}

// reorder keeps the order of keyed message m after a change from its prior
// route and state: it joins its group when it came into one, and the
// groups it left and joined let their next message go if one may.
func (s *Store) reorder(tx *sql.Tx, m *courier.Message, seq int64, priorRoute string, priorState courier.State) error {
	if m.OrderingKey == "" {
		return nil
	}
	if priorState == courier.StateSuspended || priorRoute != m.Route {
		if err := s.join(tx, m, seq); err != nil {
			return err
		}
	}
	if err := s.settle(tx, priorRoute, m.OrderingKey, m.UpdatedAt); err != nil {
		return err
	}
	if priorRoute != m.Route {
		return s.settle(tx, m.Route, m.OrderingKey, m.UpdatedAt)
	}
	return nil
}
