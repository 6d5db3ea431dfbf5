package courier

import (
	"strings"
	"time"
)

// The messages of one route with one ordering key form the key's group
// (docs/design.md §6): every message of the key on that route that is queued, in
// flight or suspended, unless it left the order (OrderSkipped). A member
// is
//
//   - active: due, retrying or in flight; a group has at most one;
//   - suspended: it holds back the members younger than it
//     (ordered_on_failure: block), never the older ones;
//   - waiting: queued with no due time, so that no claim reads it.
//
// The stores keep the group as these functions decide, under a lock of
// the key: a message that joins the group waits unless the group Admits
// it, and after every change of a member the group's Next waiting member,
// if any, is Promoted.

// KeyGroup is what a store read of a key's group, leaving out the message
// the decision is about: whether a member is active, and the ingest order
// (the store's sequence number) of the oldest suspended and of the oldest
// waiting member, 0 for none.
type KeyGroup struct {
	Active          bool
	OldestSuspended int64
	OldestWaiting   int64
}

// JoinsKey reports whether m, queued as it is, takes part in its key's
// order on its route.
func JoinsKey(m *Message) bool {
	return m.OrderingKey != "" && !m.OrderSkipped && m.State == StateQueued
}

// Admits reports whether a message that joins the group, with ingest order
// seq, goes at once: no member is active, and none older than it is
// suspended or waiting. Otherwise it waits.
func (g KeyGroup) Admits(seq int64) bool {
	older := func(s int64) bool { return s != 0 && s < seq }
	return !g.Active && !older(g.OldestSuspended) && !older(g.OldestWaiting)
}

// Next returns the ingest order of the waiting member that goes now: the
// oldest waiting one, when no member is active and no suspended member
// older than it holds the key; 0 when none goes.
func (g KeyGroup) Next() int64 {
	if g.Active || g.OldestWaiting == 0 {
		return 0
	}
	if g.OldestSuspended != 0 && g.OldestSuspended < g.OldestWaiting {
		return 0
	}
	return g.OldestWaiting
}

// SequenceHead is where the numbering of an ordering key on a route
// stands (Message.Sequence): the last number given and the id of its
// message; zero before the first.
type SequenceHead struct {
	Last int64
	ID   string
}

// Number gives m, a message that joins its key's order at ingest, the
// number after h and h's message as its previous one, and returns the head
// that leaves.
func (h SequenceHead) Number(m *Message) SequenceHead {
	m.Sequence, m.PreviousID = h.Last+1, h.ID
	return SequenceHead{Last: m.Sequence, ID: m.ID}
}

// Wait makes m a waiting member of its key's group: queued with no due time.
func Wait(m *Message) { m.NextAttemptAt = time.Time{} }

// Promoted returns waiting m made due at now: its round begins then (max_age
// counts from it), it is due at once or at its deliver_after, and its timer
// is due at once, so that the timers of the new round are worked out.
func Promoted(m *Message, now time.Time) *Message {
	n := *m
	n.NextAttemptAt = now
	if m.DeliverAfter.After(now) {
		n.NextAttemptAt = m.DeliverAfter
	}
	n.RoundStartedAt, n.TimerAt, n.UpdatedAt = now, now, now
	return &n
}

// Discard returns m discarded by an operator at now: a queued or suspended
// message can be; any other answers CodeConflict.
func Discard(m *Message, now time.Time) (*Message, error) {
	if m.State != StateQueued && m.State != StateSuspended {
		return nil, stateConflict(m, ActionDiscard, StateQueued, StateSuspended)
	}
	n := *m
	n.State, n.NextAttemptAt, n.TimerAt = StateDiscarded, time.Time{}, time.Time{}
	n.UpdatedAt, n.FinishedAt = now, now
	return &n, nil
}

// SuspendQueued returns queued m suspended at now with the reason and
// error given, as when nothing would ever claim it (its route was
// removed); ok is false for a message that is not queued.
func SuspendQueued(m *Message, reason Reason, lastError string, now time.Time) (n *Message, ok bool) {
	if m.State != StateQueued {
		return nil, false
	}
	c := *m
	c.State, c.Reason, c.LastError = StateSuspended, reason, lastError
	c.NextAttemptAt, c.TimerAt, c.UpdatedAt, c.FinishedAt = time.Time{}, time.Time{}, now, now
	return &c, true
}

// Resubmit returns suspended m back in the queue at now, with a new round
// of attempts (its timer due at once, so that the round's timers are
// worked out), optionally on another route (route != ""). A message of a
// workflow resumes where it stopped; sent to another route it leaves its
// workflow and goes there as a message of its own. One that left its key's
// order joins it again on another route. A compensated message is not
// resubmitted: all it did is undone, and sending it again is a new
// transaction. Other states answer CodeConflict.
func Resubmit(m *Message, route string, now time.Time) (*Message, error) {
	if m.State != StateSuspended {
		return nil, stateConflict(m, ActionResubmit, StateSuspended)
	}
	if m.Erased != nil {
		return nil, erasedConflict(m, ActionResubmit)
	}
	if m.Reason == ReasonCompensated {
		return nil, CompensatedConflict(m.ID)
	}
	n := *m
	n.State, n.Reason, n.Attempts, n.Abandoned = StateQueued, "", 0, 0
	n.ResubmitCount++
	if route != "" {
		if route != m.Route {
			n.OrderSkipped = false
		}
		n.Route, n.Workflow, n.Step, n.FailedStep = route, "", 0, 0
	}
	n.NextAttemptAt, n.RoundStartedAt, n.TimerAt, n.UpdatedAt = now, now, now, now
	n.FinishedAt = time.Time{}
	return &n, nil
}

// Resend returns finished m back in the queue at now, with a new round,
// for an operator who wants it delivered again (a receiver lost what it
// got): a delivered or discarded message goes again on its route, out of
// its key's order (that order was kept when it went first), and a
// suspended one is resubmitted. Messages of workflows are not resent: what
// their steps did stands, and doing it again is a new message. Queued and
// in-flight messages answer CodeConflict: they are on their way.
func Resend(m *Message, now time.Time) (*Message, error) {
	switch {
	case m.Erased != nil:
		return nil, erasedConflict(m, ActionResend)
	case m.Workflow != "":
		return nil, Errorf(CodeConflict, "message %q went through workflow %s; its steps are not done again: send a new message", m.ID, m.Workflow)
	case m.State == StateSuspended:
		return Resubmit(m, "", now)
	case m.State != StateDelivered && m.State != StateDiscarded:
		return nil, stateConflict(m, ActionResend, StateDelivered, StateDiscarded, StateSuspended)
	}
	n := *m
	n.State, n.Reason, n.Attempts, n.Abandoned, n.Escalated = StateQueued, "", 0, 0, 0
	n.ResubmitCount++
	n.OrderSkipped = m.OrderingKey != ""
	n.NextAttemptAt, n.RoundStartedAt, n.TimerAt, n.UpdatedAt = now, now, now, now
	n.FinishedAt, n.LeaseUntil, n.LeaseOwner = time.Time{}, time.Time{}, ""
	return &n, nil
}

// Replayed is the delivery that a replay gives subscription s of a
// published message that has none for it yet; m is one of the message's
// deliveries, as stored. The new delivery is m's message, due at now (or
// its deliver_after) on s's route, with a round of its own: its timer is
// due at once, so that the engine works out its escalations and expiry by
// the type's policy.
func Replayed(m *Message, s *Subscription, now time.Time) *Message {
	d := &Message{ID: m.ID, Type: m.Type, Route: s.Route, Subscription: s.Name, Payload: m.Payload, Size: m.Size, Blob: m.Blob, Digest: m.Digest,
		ContentType: m.ContentType, Headers: m.Headers, OrderingKey: m.OrderingKey, Priority: m.Priority,
		DeliverAfter: m.DeliverAfter, ExpiresAt: m.ExpiresAt, Sender: m.Sender, Hash: m.Hash, Recipient: m.Recipient,
		State: StateQueued, CreatedAt: m.CreatedAt, UpdatedAt: now, RoundStartedAt: now, TimerAt: now, NextAttemptAt: now}
	if d.DeliverAfter.After(now) {
		d.NextAttemptAt = d.DeliverAfter
	}
	return d
}

func stateConflict(m *Message, a ActionKind, allowed ...State) error {
	names := make([]string, len(allowed))
	for i, s := range allowed {
		names[i] = string(s)
	}
	return Errorf(CodeConflict, "message %q is %s; %s applies only to a message that is %s",
		m.ID, m.State, a, strings.Join(names, " or "))
}
