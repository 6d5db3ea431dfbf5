package sqlite

import (
	"database/sql"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
)

// The order of keyed messages (docs/design.md §6) is decided by the root
// package (courier.KeyGroup, courier.Reorder); the store reads a key's
// group through the partial indexes of migration 0003 and writes what was
// decided. SQLite has one writer, so the group read and the write that
// follows it are one.

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

// keyTx is the courier.KeyGroups of a write transaction.
type keyTx struct {
	s  *Store
	tx *sql.Tx
}

var _ courier.KeyGroups = keyTx{}

func (k keyTx) Group(route, key string, except int64) (courier.KeyGroup, error) {
	var g courier.KeyGroup
	var suspended, waiting sql.NullInt64
	if err := k.s.stmt(k.tx, k.s.groupStmt).QueryRow(route, key, except).Scan(&g.Active, &suspended, &waiting); err != nil {
		return g, classify(fmt.Sprintf("read ordering key %s on %s", key, route), err)
	}
	g.OldestSuspended, g.OldestWaiting = suspended.Int64, waiting.Int64
	return g, nil
}

func (k keyTx) DeliverAfter(seq int64) (time.Time, error) {
	var after sql.NullInt64
	if err := k.s.stmt(k.tx, k.s.afterStmt).QueryRow(seq).Scan(&after); err != nil {
		return time.Time{}, classify(fmt.Sprintf("read the deliver_after of message %d", seq), err)
	}
	if !after.Valid {
		return time.Time{}, nil
	}
	return fromMicros(after.Int64), nil
}

func (k keyTx) Hold(seq int64) error {
	if _, err := k.s.stmt(k.tx, k.s.waitStmt).Exec(seq); err != nil {
		return classify(fmt.Sprintf("make message %d wait for its key", seq), err)
	}
	return nil
}

func (k keyTx) Promote(seq int64, p *courier.Message) error {
	if _, err := k.s.stmt(k.tx, k.s.promoteStmt).Exec(micros(p.NextAttemptAt), micros(p.RoundStartedAt), seq); err != nil {
		return classify(fmt.Sprintf("let message %d of its key go", seq), err)
	}
	return nil
}
