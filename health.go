package courier

import (
	"net"
	"net/url"
	"slices"
	"strings"
	"time"
)

// HealthState is the delivery health of an endpoint, shared by every node
// that uses the same store (docs/design.md §4).
type HealthState string

// The endpoint health states.
const (
	HealthActive    HealthState = "active"
	HealthTimeout   HealthState = "timeout"
	HealthSuspended HealthState = "suspended"
	HealthOff       HealthState = "off"
)

// EndpointHealth is the persisted health of one endpoint. The zero value is
// an active endpoint that never failed.
type EndpointHealth struct {
	Endpoint       string
	State          HealthState
	Failures       int       // timeout_on failures in a row
	Suspensions    int       // suspensions in a row, for the growing duration
	SuspendedUntil time.Time // when a suspended endpoint may be probed
	ProbeUntil     time.Time // while a probe is under way, no other attempt goes
	UpdatedAt      time.Time
}

// Sendable reports whether an endpoint in this health may take an attempt
// now, and whether that attempt is the one probe of a suspension that has
// run its time: active and timeout endpoints send, off ones never, suspended
// ones one probe at a time once suspended_until has passed.
func (h EndpointHealth) Sendable(now time.Time) (ok, probe bool) {
	switch h.State {
	case "", HealthActive, HealthTimeout:
		return true, false
	case HealthSuspended:
		if !now.Before(h.SuspendedUntil) && !now.Before(h.ProbeUntil) {
			return true, true
		}
	}
	return false, false
}

// AfterOutcome is the endpoint's health after an attempt on it ended with r
// (docs/design.md §4): success makes it active and resets the counters; a class in
// suspend_on, or a 429 or 503 with Retry-After, suspends it; classes in
// timeout_on make it timeout and, after retries_before_suspension more,
// suspended; other classes leave it as it is, and a Blameless one does so
// even on a probe, as the receiver was not reached. probe says the attempt was the
// one let through after a suspension: failing, it suspends the endpoint again
// for the next, longer duration; reaching the receiver with a failure of the
// message's own, it shows the endpoint is back. Attempts that were already
// under way when the endpoint was suspended change nothing unless they
// succeed. An endpoint switched off stays off.
func (e *Endpoint) AfterOutcome(h EndpointHealth, r Result, probe bool, now time.Time) EndpointHealth {
	h.Endpoint, h.UpdatedAt = e.Name, now
	if h.State == HealthOff {
		return h
	}
	if probe {
		h.ProbeUntil = time.Time{}
	} else if h.State == HealthSuspended && !r.Delivered() {
		return h
	}
	if r.Class.Blameless() {
		// The receiver was not reached: nothing is known of it. A probe
		// that failed so lets the next attempt be the probe.
		return h
	}
	retryAfter := r.RetryAfter > 0 && (r.Class == ClassHTTP429 || r.Class == ClassHTTP5xx && r.Status == 503)
	switch {
	case r.Delivered():
		return EndpointHealth{Endpoint: e.Name, State: HealthActive, UpdatedAt: now}
	case retryAfter || slices.Contains(e.SuspendOn, r.Class):
		return e.suspend(h, now, r.RetryAfter)
	case slices.Contains(e.TimeoutOn, r.Class):
		h.Failures++
		if probe || h.Failures > e.RetriesBeforeSuspension {
			return e.suspend(h, now, 0)
		}
		h.State = HealthTimeout
		return h
	case probe:
		return EndpointHealth{Endpoint: e.Name, State: HealthActive, UpdatedAt: now}
	default:
		return h
	}
}

// suspend starts the next suspension: min(initial × factor^n, max), at least
// floor (a Retry-After).
func (e *Endpoint) suspend(h EndpointHealth, now time.Time, floor time.Duration) EndpointHealth {
	d := max(e.Suspension.Delay(h.Suspensions), floor)
	h.State, h.SuspendedUntil = HealthSuspended, now.Add(d)
	h.Suspensions++
	h.Failures = 0
	return h
}

// Clean reports whether h is active with nothing counted: the health a
// delivery leaves (AfterOutcome), so that a delivery does not change it.
func (h EndpointHealth) Clean() bool {
	return (h.State == HealthActive || h.State == "") && h.Failures == 0 && h.Suspensions == 0 &&
		h.SuspendedUntil.IsZero() && h.ProbeUntil.IsZero()
}

// SwitchedOff is the health of an endpoint an operator switched off.
func (h EndpointHealth) SwitchedOff(now time.Time) EndpointHealth {
	h.State, h.UpdatedAt, h.ProbeUntil = HealthOff, now, time.Time{}
	return h
}

// SwitchedOn is the health of an endpoint an operator switched on: active,
// with its counters reset.
func (h EndpointHealth) SwitchedOn(now time.Time) EndpointHealth {
	return EndpointHealth{Endpoint: h.Endpoint, State: HealthActive, UpdatedAt: now}
}

// EndpointActivity is what one node knows of an endpoint's recent work: the
// attempts under way, the outcomes of the last hour, by "delivered" or
// error class, and how many attempts it lets be in flight at once
// (max_concurrency, or the limit learnt with auto).
type EndpointActivity struct {
	InFlight         int
	LastHour         map[string]int
	ConcurrencyLimit int
}

// HealthSwitch is one change of an endpoint's health that
// Store.SwitchHealth makes: Next, given the health as stored, returns the
// new one, or false to leave the endpoint as it is; Action, unless nil, is
// recorded with the change, under the endpoint's name.
type HealthSwitch struct {
	Endpoint string
	Next     func(EndpointHealth) (EndpointHealth, bool)
	Action   *Action
}

// HealthChange is what a HealthSwitch did: the health before and after,
// and whether it was written (Next may leave an endpoint as it is).
type HealthChange struct {
	Endpoint      string
	Before, After EndpointHealth
	Changed       bool
}

// EndpointFilter selects the endpoints an operator switches at once, as the
// suspended queue's filter selects messages: every field set must match,
// and at least one must be set.
type EndpointFilter struct {
	NamePrefix string
	Transport  Transport
	// Host is the host the endpoint reaches (of its URL, or its SMTP
	// server's address), with or without the port, in any case.
	Host  string
	State HealthState
}

// Empty reports whether the filter sets nothing (and so would match every
// endpoint).
func (f EndpointFilter) Empty() bool { return f == EndpointFilter{} }

// Matches reports whether endpoint e, whose health is h, is selected.
func (f EndpointFilter) Matches(e *Endpoint, h EndpointHealth) bool {
	state := h.State
	if state == "" {
		state = HealthActive
	}
	switch {
	case !strings.HasPrefix(e.Name, f.NamePrefix):
		return false
	case f.Transport != "" && e.Transport != f.Transport:
		return false
	case f.State != "" && state != f.State:
		return false
	case f.Host != "":
		host, port := e.Host()
		return strings.EqualFold(f.Host, host) || port != "" && strings.EqualFold(f.Host, net.JoinHostPort(host, port))
	}
	return true
}

// String says what the filter selects, as the audit records it:
// "name_prefix=crm- transport=http host=crm.example state=suspended".
func (f EndpointFilter) String() string {
	var parts []string
	for _, p := range [][2]string{{"name_prefix", f.NamePrefix}, {"transport", string(f.Transport)}, {"host", f.Host}, {"state", string(f.State)}} {
		if p[1] != "" {
			parts = append(parts, p[0]+"="+p[1])
		}
	}
	return strings.Join(parts, " ")
}

// Host returns the host an endpoint reaches and its port, if one is given:
// those of its Target, when that is a URL (http, amqp, nats; an smtp
// endpoint's is smtp://host:port); empty for a file endpoint.
func (e *Endpoint) Host() (host, port string) {
	u, err := url.Parse(e.Target())
	if err != nil {
		return "", ""
	}
	return u.Hostname(), u.Port()
}
