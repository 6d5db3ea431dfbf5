package courier

import (
	"slices"
	"time"
)

// Hold is why a queued message does not go at its time: the endpoints its
// route could send it to are suspended or switched off, and it is held,
// not failed, until one of them takes attempts again. Views
// show it instead of a due time that has passed.
type Hold struct {
	// Endpoints are the endpoints that hold it, the one expected back
	// first first: suspended ones by the end of their suspension, then
	// those switched off, which come back only when switched on.
	Endpoints []HeldBy
}

// HeldBy is one endpoint that holds a message, and why.
type HeldBy struct {
	Endpoint string
	State    HealthState // HealthSuspended or HealthOff
	// Until is when a suspended endpoint's probe may go (zero when off); it
	// may have passed while the probe is under way or not yet taken.
	Until time.Time
	// Since is when its health last changed: for an endpoint switched off,
	// when it was.
	Since time.Time
}

// Endpoint returns the endpoint expected back first.
func (h *Hold) Endpoint() HeldBy { return h.Endpoints[0] }

// Held reports what holds m at now, given the route it is on (r, nil when
// it is not configured) and the health of endpoints by name (the zero
// value: active): nil unless m is queued, not waiting for its ordering key,
// and every endpoint that could take its next attempt is off or suspended
// past the time m is due. An endpoint whose suspension ends before m is due
// does not hold it (m waits for its own time), but one whose suspension has
// ended holds it until its probe has shown it back. A lookup route's
// endpoint is known only from m's latest attempt.
func Held(m *Message, r *Route, health func(endpoint string) EndpointHealth, now time.Time) *Hold {
	if m.State != StateQueued || m.Waiting() || r == nil {
		return nil
	}
	candidates := r.Endpoints
	if r.Lookup != nil {
		if m.Endpoint == "" {
			return nil
		}
		candidates = []string{m.Endpoint}
	}
	due := m.NextAttemptAt
	if due.Before(now) {
		due = now
	}
	var h Hold
	for _, name := range candidates {
		eh := health(name)
		switch {
		case eh.State == HealthOff:
		case eh.State == HealthSuspended && (eh.SuspendedUntil.After(due) || !eh.SuspendedUntil.After(now)):
		default:
			return nil // it can take m at m's time
		}
		by := HeldBy{Endpoint: name, State: eh.State, Since: eh.UpdatedAt}
		if eh.State == HealthSuspended {
			by.Until = eh.SuspendedUntil
		}
		h.Endpoints = append(h.Endpoints, by)
	}
	if len(h.Endpoints) == 0 {
		return nil
	}
	slices.SortStableFunc(h.Endpoints, func(a, b HeldBy) int {
		switch {
		case a.State == b.State && a.State == HealthSuspended:
			return a.Until.Compare(b.Until)
		case a.State == b.State:
			return 0
		case a.State == HealthSuspended:
			return -1
		}
		return 1
	})
	return &h
}

// ShownError is the last error a view shows with m: none once m is
// delivered, as the error of an attempt before the one that delivered it
// is history (its attempts keep it), not what is wrong now.
func ShownError(m *Message) (text string, class ErrorClass) {
	if m.State == StateDelivered {
		return "", ""
	}
	return m.LastError, m.LastClass
}
