package sqlstore

import (
	"time"

	courier "github.com/courier-gw/courier"
)

// Decide is the change an operator action makes to a message.
type Decide func(*courier.Message) (*courier.Message, error)

// Discard completes an operator's discard of a message or delivery (by
// its Key; a has who and when) and returns it with its decision.
func Discard(key string, a courier.Action) (courier.Action, Decide) {
	a.Kind, a.Subject = courier.ActionDiscard, key
	return a, func(m *courier.Message) (*courier.Message, error) { return courier.Discard(m, a.At) }
}

// ErasureActions are the actions an erasure (a has who, when and, as its
// Detail, why) records on delivery d: the discard it made of d when d was
// still live, and the erasure.
func ErasureActions(d *courier.Message, a courier.Action, discarded bool) []courier.Action {
	erase := courier.Action{At: a.At, Who: a.Who, Kind: courier.ActionErase, Subject: d.Key(), Detail: a.Detail}
	if !discarded {
		return []courier.Action{erase}
	}
	return []courier.Action{{At: a.At, Who: a.Who, Kind: courier.ActionDiscard, Subject: d.Key(), Detail: courier.ErasedDiscard}, erase}
}

// Resend completes an operator's resend of a message or delivery (by its
// Key; a has who and when) and returns it with its decision.
func Resend(key string, a courier.Action) (courier.Action, Decide) {
	a.Kind, a.Subject = courier.ActionResend, key
	return a, func(m *courier.Message) (*courier.Message, error) { return courier.Resend(m, a.At) }
}

// Resubmit completes an operator's resubmit of a message or delivery (by
// its Key), to route when one is given (a has who and when), and returns
// it with its decision.
func Resubmit(key, route string, a courier.Action) (courier.Action, Decide) {
	a.Kind, a.Subject, a.Detail = courier.ActionResubmit, key, ""
	if route != "" {
		a.Detail = "route=" + route
	}
	return a, func(m *courier.Message) (*courier.Message, error) { return courier.Resubmit(m, route, a.At) }
}

// BulkBatch does op to the messages (and deliveries) keys, one after the
// other: act changes
// one as decide says, record records the action on it. A message the
// action is not (or no longer) for is left as it is and not counted. It
// returns how many messages it changed.
func BulkBatch(op courier.BulkOp, keys []string, now time.Time, act func(key string, decide Decide) error, record func(courier.Action) error) (int, error) {
	n := 0
	for _, key := range keys {
		a, decide := Discard(key, courier.Action{At: now, Who: op.Who})
		if op.Kind == courier.ActionResubmit {
			a, decide = Resubmit(key, op.Route, a)
		}
		if err := act(key, decide); err != nil {
			if courier.ErrorCode(err) == courier.CodeConflict {
				continue // not (or no longer) for this action: left as it is
			}
			return n, err
		}
		n++
		detail := op.ActionDetail()
		if a.Detail != "" {
			detail += ", " + a.Detail
		}
		a.Detail = detail
		if err := record(a); err != nil {
			return n, err
		}
	}
	return n, nil
}

// ReplayBatch gives the subscription of replay r its deliveries of a batch
// of published messages (each read as its lead, the delivery that keeps
// the payload), as the root decides: nothing for a message the replay does
// not want or whose payload was erased; a Replayed delivery of one the subscription has none of; and,
// with Again, a Resend of the one it has, unless that one is on its way
// (queued or in flight). has reports whether the subscription has a
// delivery of message id; act changes one as decide says; create stores
// the new delivery d of leads[i]. It returns how many deliveries it gave.
func ReplayBatch(r *courier.Replay, leads []*courier.Message, now time.Time, has func(id string) (bool, error),
	act func(key string, decide Decide) error, create func(i int, d *courier.Message) error) (int, error) {
	n := 0
	for i, m := range leads {
		if !r.Wants(m) || m.Erased != nil {
			continue
		}
		found, err := has(m.ID)
		switch {
		case err != nil:
			return n, err
		case found && !r.Again:
			continue
		case found:
			err = act(courier.DeliveryKey(m.ID, r.Subscription.Name), func(d *courier.Message) (*courier.Message, error) { return courier.Resend(d, now) })
			if courier.ErrorCode(err) == courier.CodeConflict {
				continue // on its way already: left as it is
			}
		default:
			err = create(i, courier.Replayed(m, &r.Subscription, now))
		}
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}
