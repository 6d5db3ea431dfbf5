package courier

import (
	"context"
	"time"
)

// SharedLimits holds the endpoints' politeness limits (docs/design.md §4) for every
// node of a store shared by several: the attempts in flight per endpoint
// (max_concurrency) and the spacing of attempt starts (min_interval, rate).
// A store that only one process uses needs none; each node then counts for
// itself. Times are the store's own clock, so that nodes whose clocks differ
// still agree.
type SharedLimits interface {
	// AcquireSlots takes, for owner, up to N more free slots of each
	// endpoint asked for (an endpoint has Max slots, less those other
	// owners hold), held for ttl unless renewed, and returns how many owner
	// holds of each of those endpoints now (one left out: none).
	AcquireSlots(ctx context.Context, owner string, want []SlotRequest, ttl time.Duration) (map[string]int, error)

	// RenewSlots extends every hold of owner by ttl and returns how many
	// slots of each endpoint it holds: a hold missing from the answer
	// lapsed, or was about to, and may be another owner's now.
	RenewSlots(ctx context.Context, owner string, ttl time.Duration) (map[string]int, error)

	// ReleaseSlots gives back, of each endpoint, that many of the slots
	// owner holds.
	ReleaseSlots(ctx context.Context, owner string, slots map[string]int) error

	// BookStart books the start of the next attempt on a paced endpoint:
	// now, or the start booked for it before if that is later but no more
	// than lead away; the booking after it is then interval later. It
	// returns how long to wait until the booked start, or ok false and how
	// long until a booking may be tried again.
	BookStart(ctx context.Context, endpoint string, interval, lead time.Duration) (wait time.Duration, ok bool, err error)
}

// SlotRequest asks for N more of an endpoint's Max slots.
type SlotRequest struct {
	Endpoint string
	Max      int
	N        int
}
