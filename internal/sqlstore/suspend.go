package sqlstore

import (
	"context"
	"time"

	courier "github.com/courier-gw/courier"
)

// SuspendRoute suspends the queued messages of route in s, as
// courier.SuspendQueued decides, a page at a time through s's Apply, and
// reports how many it suspended. A message that changed between its read
// and the change (claimed meanwhile) is left as it is, as Apply guards.
func SuspendRoute(ctx context.Context, s courier.Store, route string, reason courier.Reason, lastError string, now time.Time) (int, error) {
	n := 0
	f := courier.MessageFilter{State: courier.StateQueued, Route: route, Limit: courier.MaxListLimit}
	for {
		page, err := s.Messages(ctx, f)
		if err != nil {
			return n, err
		}
		changes := make([]courier.Change, 0, len(page.Messages))
		for _, m := range page.Messages {
			if next, ok := courier.SuspendQueued(m, reason, lastError, now); ok {
				changes = append(changes, courier.Change{Message: next, From: m.State, Token: m.TotalAttempts})
			}
		}
		applied, err := s.Apply(ctx, changes)
		if err != nil {
			return n, err
		}
		for _, ok := range applied {
			if ok {
				n++
			}
		}
		if page.Next == "" {
			return n, nil
		}
		f.Cursor = page.Next
	}
}
