package sqlite

import (
	"database/sql"
	"fmt"
	"sync/atomic"

	courier "github.com/courier-gw/courier"
)

// prioritySet is a set of message priorities, one bit each.
type prioritySet uint32

func (s prioritySet) has(p int) bool { return s&(1<<p) != 0 }

// priorities is the set of priorities messages have been stored with
// (table priorities): a claim looks at those only. The set only grows, and
// grows before the message that adds to it is committed: a claim may look
// at a priority no message has, never miss one that a stored message has.
type priorities struct {
	bits atomic.Uint32
}

func (p *priorities) set() prioritySet { return prioritySet(p.bits.Load()) }

// load reads the set from the database.
func (p *priorities) load(db *sql.DB) error {
	rows, err := db.Query(`SELECT priority FROM priorities`)
	if err != nil {
		return fmt.Errorf("read priorities: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			return fmt.Errorf("read priorities: %w", err)
		}
		if n >= 0 && n <= courier.MaxPriority {
			p.bits.Or(1 << n)
		}
	}
	return rows.Err()
}

// note adds the priority of a message about to be stored in tx.
func (p *priorities) note(tx *sql.Tx, n int) error {
	if n < 0 || n > courier.MaxPriority || p.set().has(n) {
		return nil
	}
	if _, err := tx.Exec(`INSERT OR IGNORE INTO priorities (priority) VALUES (?)`, n); err != nil {
		return classify(fmt.Sprintf("note priority %d", n), err)
	}
	p.bits.Or(1 << n)
	return nil
}
