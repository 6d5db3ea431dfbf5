package engine

import (
	"context"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// A lookup route (docs/design.md §13) has no endpoints of its own: each message's
// is resolved from its recipient just before its attempt. Claims for such a
// route are bounded by its template's max_concurrency; what holds for the
// resolved endpoint (its health, max_concurrency, min_interval and rate)
// is checked once it is known, and a message whose endpoint cannot take it
// now is put back until it can, without spending an attempt.

// lookupRoutes counts the attempts under way per lookup route, and keeps
// the resolved endpoints seen lately (for the slots a shared store holds).
type lookupRoutes struct {
	mu       sync.Mutex
	inflight map[string]int
	seen     map[string]seenEndpoint
	turns    map[string]time.Time // paced endpoints: the latest turn given to a message put back
}

// turn returns when a message put back for a paced endpoint is due: the
// endpoint's next start, or one interval after the turn given before.
func (l *lookupRoutes) turn(endpoint string, next time.Time, interval time.Duration) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.turns == nil {
		l.turns = map[string]time.Time{}
	}
	at := next
	if last := l.turns[endpoint]; !last.Before(at) {
		at = last.Add(interval)
	}
	l.turns[endpoint] = at
	return at
}

type seenEndpoint struct {
	ep   *courier.Endpoint
	at   time.Time
	full bool // an attempt found no free slot on it
}

// offRecheck is how long the messages of a resolved endpoint that an
// operator switched off are put back for: each costs a claim and a write
// per period, so a large backlog must not cycle every second.
const offRecheck = 30 * time.Second

// resolvedIdle is how long a resolved endpoint is kept among the seen ones
// after its last attempt.
const resolvedIdle = 10 * time.Minute

func (l *lookupRoutes) start(route string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight == nil {
		l.inflight = map[string]int{}
	}
	l.inflight[route]++
}

func (l *lookupRoutes) end(route string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[route]--; l.inflight[route] <= 0 {
		delete(l.inflight, route)
	}
}

func (l *lookupRoutes) running(route string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight[route]
}

// saw notes a resolved endpoint in use.
func (l *lookupRoutes) saw(ep *courier.Endpoint, now time.Time, full bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]seenEndpoint{}
	}
	l.seen[ep.Name] = seenEndpoint{ep: ep, at: now, full: full || l.seen[ep.Name].full}
}

// recent lists the resolved endpoints used lately, forgetting older ones,
// and whether an attempt on each found no free slot since the last call.
func (l *lookupRoutes) recent(now time.Time) (eps []*courier.Endpoint, full map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	full = map[string]bool{}
	for name, at := range l.turns {
		if now.Sub(at) > time.Minute {
			delete(l.turns, name)
		}
	}
	for name, s := range l.seen {
		if now.Sub(s.at) > resolvedIdle {
			delete(l.seen, name)
			continue
		}
		eps = append(eps, s.ep)
		full[name] = s.full
		s.full = false
		l.seen[name] = s
	}
	return eps, full
}

// lookupCapacity is how many more messages a lookup route may have under
// way: its template's max_concurrency.
func (e *Engine) lookupCapacity(r *courier.Route) int {
	limit := 16
	if r.EndpointTemplate != nil {
		limit = max(r.EndpointTemplate.MaxConcurrency, 1)
	}
	return limit - e.lookups.running(r.Name)
}

// lookupTimeout bounds an attempt on a lookup route: the lookup, the
// attempt, and a paced endpoint's wait.
func lookupTimeout(r *courier.Route) time.Duration {
	d := r.Lookup.RequestTimeout()
	if t := r.EndpointTemplate; t != nil {
		return d + timeoutOf(t) + 4*interval(t)
	}
	return d + courier.DefaultTimeout
}

// attemptLookup resolves the message's endpoint and, when that endpoint can
// take it now, delivers it; otherwise the message is put back until it can.
func (e *Engine) attemptLookup(rd *round, r *courier.Route, m *courier.Message) {
	defer e.attempts.Done()
	defer e.lookups.end(r.Name)
	started := e.clock.Now()
	var actx context.Context // the attempt's span, once there is one
	finish := func(ep *courier.Endpoint, res courier.Result, probe bool, deferUntil time.Time) {
		e.finished(outcome{t: rd.t, msg: m, endpoint: ep, result: res, probe: probe, started: started,
			duration: e.clock.Now().Sub(started), deferUntil: deferUntil, ctx: actx})
	}
	if m.Recipient == "" {
		// It came to this route without one (a fallback, a resubmit): there
		// is nobody to look up, and never will be.
		finish(nil, courier.Result{Class: courier.ClassRejected, Error: "the message has no recipient to look up on route " + r.Name}, false, time.Time{})
		return
	}
	if e.opts.Resolver == nil {
		finish(nil, courier.Result{Class: courier.ClassLookup, Error: "this courier has no registry client for lookup routes"}, false, time.Time{})
		return
	}
	lctx, cancel := context.WithTimeout(e.life, r.Lookup.RequestTimeout())
	res, err := e.opts.Resolver.Resolve(lctx, r, m.Recipient, m.Type)
	cancel()
	if err != nil {
		finish(nil, courier.LookupFailed(m.Recipient, m.Type, err), false, time.Time{})
		return
	}
	ep := courier.ResolvedEndpoint(r, res)
	now := e.clock.Now()
	// Held, not failed: an endpoint that is suspended or off takes nothing,
	// and its messages wait for it as any endpoint's do.
	h := rd.healthOf(ep.Name)
	sendable, probe := h.Sendable(now)
	var probeUntil time.Time
	if probe {
		var got courier.EndpointHealth
		got, probe, _ = e.reserveProbe(e.life, ep, now)
		probeUntil, sendable = got.ProbeUntil, probe
	}
	putBack := func(until time.Time) {
		if probe {
			e.releaseProbe(ep.Name, probeUntil)
		}
		finish(nil, courier.Result{}, false, until)
	}
	if !sendable {
		// Back when the suspension ends (for its probe); while another
		// attempt holds the probe, when that lapses; an endpoint that is
		// off is looked at again now and then. Never in a loop.
		until := h.SuspendedUntil
		switch {
		case h.State == courier.HealthOff:
			until = now.Add(offRecheck)
		case h.ProbeUntil.After(now):
			until = h.ProbeUntil
		case !until.After(now):
			until = now.Add(time.Second)
		}
		putBack(until)
		return
	}
	// Politeness: a slot, and for a paced endpoint its turn soon; else the
	// message waits for them in the queue, not in a worker.
	if !e.slots.take(ep) {
		e.lookups.saw(ep, now, true)
		putBack(now.Add(100 * time.Millisecond))
		return
	}
	e.lookups.saw(ep, now, false)
	if d := interval(ep); d > 0 {
		if next := e.pace.next(ep.Name); next.After(now.Add(lead(ep))) {
			e.slots.release(ep.Name)
			// Each message put back takes the next turn after those put
			// back before it, so that every turn claims one, not all.
			putBack(e.lookups.turn(ep.Name, next.Add(-lead(ep)), d))
			return
		}
	}
	if !e.waitPace(ep) {
		e.slots.release(ep.Name)
		finish(nil, courier.Result{}, false, time.Time{}) // cut off by a stop: dropped
		return
	}
	if !e.mayStart(ep, probe) {
		// Switched off or suspended while the attempt waited to start:
		// back as above.
		e.slots.release(ep.Name)
		now := e.clock.Now()
		until := now.Add(offRecheck)
		if h := e.health.get(ep.Name); h.State == courier.HealthSuspended && h.SuspendedUntil.After(now) {
			until = h.SuspendedUntil
		}
		putBack(until)
		return
	}
	started = e.clock.Now()
	ctx, span := e.startAttempt(m, ep)
	result := e.send(ctx, rd.t, m, ep)
	endAttempt(span, result)
	if span != nil {
		actx = ctx
	}
	e.slots.done(ep, result, e.clock.Now().Sub(started), e.clock.Now())
	if !result.Delivered() {
		// The recipient may have moved: the next attempt asks again.
		e.opts.Resolver.Invalidate(r, m.Recipient, m.Type)
	}
	finish(ep, result, probe, time.Time{})
}
