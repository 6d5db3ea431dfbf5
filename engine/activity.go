package engine

import (
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// activity counts the outcomes of each endpoint's attempts in one-minute
// buckets, over the last hour, for operators.
type activity struct {
	mu        sync.Mutex
	endpoints map[string]*[60]bucket
}

type bucket struct {
	minute int64 // unix minute the counts belong to
	counts map[string]int
}

// record counts one outcome at now.
func (a *activity) record(endpoint string, r courier.Result, now time.Time) {
	key := "delivered"
	if !r.Delivered() {
		key = string(r.Class)
	}
	minute := now.Unix() / 60
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.endpoints == nil {
		a.endpoints = map[string]*[60]bucket{}
	}
	ring := a.endpoints[endpoint]
	if ring == nil {
		ring = new([60]bucket)
		a.endpoints[endpoint] = ring
	}
	b := &ring[minute%60]
	if b.minute != minute || b.counts == nil {
		*b = bucket{minute: minute, counts: map[string]int{}}
	}
	b.counts[key]++
}

// lastHour sums the buckets of the last 60 minutes.
func (a *activity) lastHour(endpoint string, now time.Time) map[string]int {
	out := map[string]int{}
	minute := now.Unix() / 60
	a.mu.Lock()
	defer a.mu.Unlock()
	ring := a.endpoints[endpoint]
	if ring == nil {
		return out
	}
	for _, b := range ring {
		if b.counts != nil && minute-b.minute < 60 {
			for k, n := range b.counts {
				out[k] += n
			}
		}
	}
	return out
}

// Activity returns this node's attempts under way on an endpoint and the
// outcomes of its attempts in the last hour.
func (e *Engine) Activity(endpoint string) courier.EndpointActivity {
	return courier.EndpointActivity{InFlight: e.InFlight(endpoint), LastHour: e.activity.lastHour(endpoint, e.clock.Now()),
		ConcurrencyLimit: e.ConcurrencyLimit(endpoint)}
}

// ConcurrencyLimit returns how many attempts this node lets be in flight to
// an endpoint now: its max_concurrency, or with max_concurrency: auto the
// limit learnt so far (the starting one before any attempt). It is 0 for an
// endpoint neither configured nor used lately.
func (e *Engine) ConcurrencyLimit(endpoint string) int {
	if l, ok := e.slots.concurrencyLimit(endpoint); ok {
		return l
	}
	ep := e.topology.Load().Endpoints[endpoint]
	switch {
	case ep == nil:
		return 0
	case ep.AutoConcurrency:
		return courier.NewAdaptiveLimit(ep.MaxConcurrency).Limit()
	}
	return max(ep.MaxConcurrency, 1)
}
