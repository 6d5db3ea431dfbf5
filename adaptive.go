package courier

import (
	"math"
	"time"
)

// DefaultConcurrencyCeiling is the most attempts in flight that an endpoint
// with max_concurrency: auto may reach when it sets no
// max_concurrency_ceiling.
const DefaultConcurrencyCeiling = 64

// The adaptive limit's constants. A window is one round of attempts: as
// many answers as the limit (at least adaptiveMinWindow), about one
// latency's worth; the limit changes at most once per window, so that it
// moves on what the limit before it did.
const (
	adaptiveInitial   = 8
	adaptiveMinWindow = 8
	// A window's mean latency is rising when it exceeds the baseline by this
	// factor plus adaptiveSlack; the slack keeps the scheduling noise of a
	// busy machine from cutting receivers that answer in microseconds.
	adaptiveTolerance = 1.5
	adaptiveSlack     = time.Millisecond
	// Cuts: by a quarter on overload answers, by a tenth on rising latency.
	adaptiveOverloadCut = 0.75
	adaptiveLatencyCut  = 0.9
)

// AdaptiveLimit decides how many attempts an endpoint with
// max_concurrency: auto may have in flight (docs/design.md §4), from the outcomes
// of its attempts, in the manner of TCP congestion control: it doubles the
// limit each window while answers succeed and their latency stays flat
// (slow start), after the first cut adds one per window, and cuts it on
// overload answers (429, 503, timeouts) or when the latency of two windows
// in a row rises past the baseline. It only grows while the limit is what holds the
// attempts back (at least half of it in use).
//
// The baseline is the lowest window latency seen. It is learnt again when
// rising latency has cut the limit to 1: the receiver is slower at any
// load, so its latency at one attempt becomes the measure. It never drifts
// up by itself, so that a limit held just below the knee cannot creep past
// it.
//
// An AdaptiveLimit is not safe for concurrent use; it uses no clock.
type AdaptiveLimit struct {
	ceiling   int
	limit     float64
	slowStart bool
	baseline  time.Duration // 0 until the first window

	// The window being gathered.
	count   int           // successful answers
	sum     time.Duration // their latency
	busiest int           // the most attempts in flight at one of them

	// rising counts the windows in a row whose latency rose.
	rising int

	// skip is how many more answers belong to attempts started before the
	// latest cut: they say nothing of the new limit and are passed over.
	skip int
}

// NewAdaptiveLimit returns a limit that starts at 8 (or ceiling, when lower)
// and never exceeds ceiling (at least 1).
func NewAdaptiveLimit(ceiling int) *AdaptiveLimit {
	ceiling = max(ceiling, 1)
	return &AdaptiveLimit{ceiling: ceiling, limit: float64(min(adaptiveInitial, ceiling)), slowStart: true}
}

// Limit returns the attempts that may be in flight now: 1 to the ceiling.
func (a *AdaptiveLimit) Limit() int {
	return min(max(int(a.limit), 1), a.ceiling)
}

// Ceiling returns the most the limit may reach.
func (a *AdaptiveLimit) Ceiling() int { return a.ceiling }

// SetCeiling changes the most the limit may reach (on reload), lowering the
// limit when it is above it.
func (a *AdaptiveLimit) SetCeiling(ceiling int) {
	a.ceiling = max(ceiling, 1)
	a.limit = min(a.limit, float64(a.ceiling))
}

// Overloaded reports whether an attempt's result says the receiver has more
// than it can take: a 429, a 503, or no answer in time.
func Overloaded(r Result) bool {
	switch r.Class {
	case ClassHTTP429, ClassTimeout, ClassConnectTimeout:
		return true
	case ClassHTTP5xx:
		return r.Status == 503
	}
	return false
}

// Observe takes the outcome of one attempt: how long it took, its result,
// and how many attempts (itself included) were in flight to the endpoint
// when it ended. Failures other than overload (a 500, a 4xx, a refused
// connection) say nothing of the load and are left out; health deals with
// them.
func (a *AdaptiveLimit) Observe(latency time.Duration, r Result, inFlight int) {
	if a.skip > 0 {
		a.skip--
		return
	}
	if Overloaded(r) {
		a.cut(adaptiveOverloadCut, inFlight)
		return
	}
	if !r.Delivered() {
		return
	}
	a.count++
	a.sum += latency
	a.busiest = max(a.busiest, inFlight)
	if a.count < max(a.Limit(), adaptiveMinWindow) {
		return
	}
	mean := a.sum / time.Duration(a.count)
	busy := 2*a.busiest >= a.Limit()
	a.count, a.sum, a.busiest = 0, 0, 0
	switch {
	case a.baseline == 0 || mean < a.baseline:
		a.baseline = mean
	case float64(mean) > adaptiveTolerance*float64(a.baseline)+float64(adaptiveSlack):
		// One slow window may be the sender's own machine stalling; two in
		// a row are the receiver.
		if a.rising++; a.rising < 2 {
			return
		}
		a.cut(adaptiveLatencyCut, inFlight)
		if a.limit <= 1 {
			// Slow even at one attempt: that is the receiver's own pace now.
			a.baseline = mean
		}
		return
	}
	a.rising = 0
	if !busy {
		return
	}
	if a.slowStart {
		a.limit *= 2
	} else {
		a.limit++
	}
	a.limit = min(a.limit, float64(a.ceiling))
}

// cut lowers the limit by factor (to 1 at least), ends slow start, starts a
// new window and passes over the answers of the attempts still in flight.
func (a *AdaptiveLimit) cut(factor float64, inFlight int) {
	a.limit = max(1, math.Floor(a.limit*factor))
	a.slowStart = false
	a.count, a.sum, a.busiest, a.rising = 0, 0, 0, 0
	a.skip = max(inFlight-1, 0)
}
