package sqlstore

import (
	"time"

	courier "github.com/courier-gw/courier"
)

// Decide is the change an operator action makes to a message.
type Decide func(*courier.Message) (*courier.Message, error)

// Discard completes an operator's discard of message id (a has who and
// when) and returns it with its decision.
func Discard(id string, a courier.Action) (courier.Action, Decide) {
	a.Kind, a.Subject = courier.ActionDiscard, id
	return a, func(m *courier.Message) (*courier.Message, error) { return courier.Discard(m, a.At) }
}

// Resubmit completes an operator's resubmit of message id, to route when
// one is given (a has who and when), and returns it with its decision.
func Resubmit(id, route string, a courier.Action) (courier.Action, Decide) {
	a.Kind, a.Subject, a.Detail = courier.ActionResubmit, id, ""
	if route != "" {
		a.Detail = "route=" + route
	}
	return a, func(m *courier.Message) (*courier.Message, error) { return courier.Resubmit(m, route, a.At) }
}

// BulkBatch does op to the messages ids, one after the other: act changes
// one as decide says, record records the action on it. A message the
// action is not (or no longer) for is left as it is and not counted. It
// returns how many messages it changed.
func BulkBatch(op courier.BulkOp, ids []string, now time.Time, act func(id string, decide Decide) error, record func(courier.Action) error) (int, error) {
	n := 0
	for _, id := range ids {
		a, decide := Discard(id, courier.Action{At: now, Who: op.Who})
		if op.Kind == courier.ActionResubmit {
			a, decide = Resubmit(id, op.Route, a)
		}
		if err := act(id, decide); err != nil {
			if courier.ErrorCode(err) == courier.CodeConflict {
				continue // not (or no longer) for this action: left as it is
			}
			return n, err
		}
		n++
		detail := "bulk operation " + op.ID
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
