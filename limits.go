package courier

import (
	"context"
	"time"
)

// SharedLimits holds the endpoints' politeness limits (docs/design.md §4) for every
// node of a store shared by several: the attempts in flight per endpoint
// (max_concurrency) and the spacing of attempt starts (min_interval, rate);
// and the tenants' ingest rates (§20). A store that only one process uses
// needs none; each node then counts for itself (the ingest buckets in a
// courier.TokenBuckets). The store applies what NextStart, SlotShare and
// TakeTokens decide at the now it is given, the caller's clock, as leases
// and due times are: nodes that share a store keep their clocks in step.
type SharedLimits interface {
	// AcquireSlots takes, for owner, up to N more free slots of each
	// endpoint asked for (an endpoint has Max slots, less those other
	// owners hold), held for ttl unless renewed, and returns how many owner
	// holds of each of those endpoints now (one left out: none), as
	// SlotShare decides at now.
	AcquireSlots(ctx context.Context, owner string, want []SlotRequest, ttl time.Duration, now time.Time) (map[string]int, error)

	// RenewSlots extends every hold of owner to now plus ttl and returns
	// how many slots of each endpoint it holds: a hold missing from the
	// answer lapsed, or was about to (SlotGrace), and may be another
	// owner's now.
	RenewSlots(ctx context.Context, owner string, ttl time.Duration, now time.Time) (map[string]int, error)

	// ReleaseSlots gives back, of each endpoint, that many of the slots
	// owner holds.
	ReleaseSlots(ctx context.Context, owner string, slots map[string]int) error

	// BookStart books the start of the next attempt on a paced endpoint,
	// as NextStart decides at now from the start booked for it before. It
	// returns how long to wait until the booked start, or ok false and how
	// long until a booking may be tried again.
	BookStart(ctx context.Context, endpoint string, interval, lead time.Duration, now time.Time) (wait time.Duration, ok bool, err error)

	// IngestTokens holds the tenants' ingest buckets (Quotas.IngestRate,
	// Burst) for every node: a token one node takes is gone for all.
	IngestTokens
}

// SlotRequest asks for N more of an endpoint's Max slots.
type SlotRequest struct {
	Endpoint string
	Max      int
	N        int
}

// NextStart decides the start of the next attempt on a paced endpoint at
// now, when next is the earliest start that the attempts booked before
// leave it (zero: none booked): now, or next if that is later but no more
// than lead away. The start after it is then interval later (after). When
// next is further off than lead, ok is false and at is when a booking may
// be tried again.
func NextStart(next, now time.Time, interval, lead time.Duration) (at, after time.Time, ok bool) {
	if now.Before(next.Add(-lead)) {
		return next.Add(-lead), next, false
	}
	at = now
	if next.After(now) {
		at = next
	}
	return at, at.Add(interval), true
}

// SlotHold is one owner's hold of N of an endpoint's slots, until it
// lapses unless renewed.
type SlotHold struct {
	Owner string
	N     int
	Until time.Time
}

// SlotGrace is how long before it lapses a hold can no longer be renewed,
// and counts as none for its owner: a node that counts other nodes' holds
// may read one as it was before a renewal committed, and this margin keeps
// such a read from taking a hold as lapsed while its renewal is under way.
const SlotGrace = time.Second

// SlotShare decides how many of an endpoint's slots owner holds after it
// asks, at now, for req.N more than it holds, given the endpoint's holds
// (every owner's): no more than req.Max less the live holds of the other
// owners. Its own hold counts only if it does not lapse within SlotGrace.
// None (0 or less) means it holds none.
func SlotShare(holds []SlotHold, owner string, req SlotRequest, now time.Time) int {
	others, mine := 0, 0
	for _, h := range holds {
		switch {
		case h.Owner != owner && !h.Until.Before(now):
			others += h.N
		case h.Owner == owner && !h.Until.Before(now.Add(SlotGrace)):
			mine = h.N
		}
	}
	return min(max(req.Max, 1)-others, mine+max(req.N, 0))
}
