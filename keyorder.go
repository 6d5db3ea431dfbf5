package courier

import (
	"math"
	"time"
)

// The flow that keeps a key's group (ordering.go) as its members come and
// go is the same for every store: a store gives it the reads and guarded
// writes of KeyGroups, inside its transaction that holds the keys' locks,
// and calls AdmitKeyed before it stores new messages and Reorder after it
// changes a keyed one.

// KeyGroups is what a store gives the ordering of keyed messages: reads of
// a key's group and of its members, and writes that apply what was decided
// only to a member that is still as the decision found it. Members are
// named by their ingest order (the store's sequence number).
type KeyGroups interface {
	// Group reads the group of key on route, leaving out member except
	// (0: none).
	Group(route, key string, except int64) (KeyGroup, error)
	// DeliverAfter reads the deliver_after of member seq.
	DeliverAfter(seq int64) (time.Time, error)
	// Hold makes member seq wait (queued with no due time), if it is
	// still queued.
	Hold(seq int64) error
	// Promote writes the due time (NextAttemptAt) and round start
	// (RoundStartedAt, also its timer and update time) that p has to
	// member seq, if it is still waiting.
	Promote(seq int64, p *Message) error
}

// KeyPrior is where a keyed message stood before a change: its ingest
// order, route and state.
type KeyPrior struct {
	Seq   int64
	Route string
	State State
}

// AdmitKeyed decides, before they are stored, which of the new messages
// msgs wait for their keys: each is younger than every member of its key's
// group, and than the messages before it in msgs. A message taken for a
// member here that is not stored after all (its id was taken) is set right
// by SettleKey.
func AdmitKeyed(g KeyGroups, msgs []*Message) error {
	type group struct{ route, key string }
	var seen map[group]bool
	for _, m := range msgs {
		if !JoinsKey(m) {
			continue
		}
		gk := group{m.Route, m.OrderingKey}
		if seen[gk] {
			Wait(m) // an older message of this call is a member
			continue
		}
		if len(msgs) > 1 {
			if seen == nil {
				seen = map[group]bool{}
			}
			seen[gk] = true
		}
		kg, err := g.Group(m.Route, m.OrderingKey, 0)
		if err != nil {
			return err
		}
		if !kg.Admits(math.MaxInt64) {
			Wait(m)
		}
	}
	return nil
}

// joinKey decides whether stored message m, member seq, that came into its
// key's group (resubmitted, or moved to another route) goes or waits.
func joinKey(g KeyGroups, m *Message, seq int64) error {
	if !JoinsKey(m) || m.NextAttemptAt.IsZero() {
		return nil
	}
	kg, err := g.Group(m.Route, m.OrderingKey, seq)
	if err != nil || kg.Admits(seq) {
		return err
	}
	if err := g.Hold(seq); err != nil {
		return err
	}
	Wait(m)
	return nil
}

// SettleKey lets the next waiting member of a key's group go, if the group
// says one does, with its round starting at now. It returns the member it
// let go, 0 for none.
func SettleKey(g KeyGroups, route, key string, now time.Time) (int64, error) {
	kg, err := g.Group(route, key, 0)
	if err != nil {
		return 0, err
	}
	seq := kg.Next()
	if seq == 0 {
		return 0, nil
	}
	after, err := g.DeliverAfter(seq)
	if err != nil {
		return 0, err
	}
	if err := g.Promote(seq, Promoted(&Message{DeliverAfter: after}, now)); err != nil {
		return 0, err
	}
	return seq, nil
}

// Reorder keeps the order of keyed message m after a change from where it
// stood (p): it joins its group when it came into one, and the groups it
// left and joined let their next member go if one may.
func Reorder(g KeyGroups, m *Message, p KeyPrior) error {
	if m.OrderingKey == "" {
		return nil
	}
	if p.State == StateSuspended || p.Route != m.Route {
		if err := joinKey(g, m, p.Seq); err != nil {
			return err
		}
	}
	if _, err := SettleKey(g, p.Route, m.OrderingKey, m.UpdatedAt); err != nil {
		return err
	}
	if p.Route != m.Route {
		_, err := SettleKey(g, m.Route, m.OrderingKey, m.UpdatedAt)
		return err
	}
	return nil
}
