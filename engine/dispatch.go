package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// round is what one claim cycle knows: the topology, the time, the health of
// the endpoints (shared with other rounds, never written), the probes it
// reserved (with the health they left) and has not yet used, and the
// earliest time a paced endpoint may start its next attempt.
type round struct {
	t        *courier.Topology
	now      time.Time
	health   *healthCache
	reserved map[string]courier.EndpointHealth
	probes   map[string]bool
	wakeAt   time.Time
	// granted counts, per endpoint, the attempts this round's claims were
	// granted, so that routes sharing an endpoint take its free slots
	// between them, in the order of the tenants' turns, and no more;
	// parts is how the last route's capacity came from its endpoints.
	granted map[string]int
	parts   []endpointPart
}

// endpointPart is what one endpoint gives of a route's capacity.
type endpointPart struct {
	endpoint string
	n        int
}

// free is how many more attempts ep can take in this round.
func (e *Engine) free(rd *round, ep *courier.Endpoint) int {
	return e.slots.free(ep) - rd.granted[ep.Name]
}

// grant books n attempts of the route whose capacity routeCapacity last
// counted against its endpoints, and returns their names.
func (rd *round) grant(n int) []string {
	var names []string
	for _, p := range rd.parts {
		if n <= 0 {
			break
		}
		take := min(p.n, n)
		if rd.granted == nil {
			rd.granted = map[string]int{}
		}
		rd.granted[p.endpoint] += take
		n -= take
		names = append(names, p.endpoint)
	}
	return names
}

// healthOf returns an endpoint's health as the round knows it.
func (rd *round) healthOf(name string) courier.EndpointHealth {
	if h, ok := rd.reserved[name]; ok {
		return h
	}
	return rd.health.get(name)
}

// paced reports whether ep has to wait before its next attempt may start,
// and notes the time in the round so that the claimer wakes for it.
func (e *Engine) paced(rd *round, ep *courier.Endpoint) bool {
	if interval(ep) <= 0 {
		return false
	}
	next := e.pace.next(ep.Name).Add(-lead(ep))
	if rd.now.Before(next) {
		if rd.wakeAt.IsZero() || next.Before(rd.wakeAt) {
			rd.wakeAt = next
		}
		return true
	}
	return false
}

// lead is how early the message of a paced endpoint's next attempt is
// claimed; the attempt then starts at its exact time, so that the time a
// claim takes does not stretch the spacing.
func lead(ep *courier.Endpoint) time.Duration { return min(interval(ep), 50*time.Millisecond) }

// interval is the least time between the starts of two attempts on an
// endpoint: its min_interval, or the spacing its rate allows, whichever is
// longer. A rate of N per period admits at most N starts (plus one at the
// edge) in any window of that period.
func interval(ep *courier.Endpoint) time.Duration {
	d := ep.MinInterval
	if !ep.Rate.Unlimited() {
		d = max(d, ep.Rate.Per/time.Duration(ep.Rate.N))
	}
	return d
}

// pacer keeps, per paced endpoint, the time booked for its next attempt and
// when its latest attempt actually started: an attempt that woke late must
// not bring the next one closer than the interval.
type pacer struct {
	mu    sync.Mutex
	times map[string]time.Time // next booking
	last  map[string]time.Time // latest actual start
}

// begin starts an attempt on ep now, if the latest start was at least the
// interval ago; else it returns how long to wait first.
func (p *pacer) begin(ep *courier.Endpoint, now time.Time) time.Duration {
	d := interval(ep)
	if d <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if wait := p.last[ep.Name].Add(d).Sub(now); wait > 0 {
		return wait
	}
	if p.last == nil {
		p.last = map[string]time.Time{}
	}
	p.last[ep.Name] = now
	return 0
}

// booked notes that another attempt (of this node or another) starts on ep
// at, so that the next one is not claimed before at plus the interval.
func (p *pacer) booked(ep *courier.Endpoint, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.times == nil {
		p.times = map[string]time.Time{}
	}
	if next := at.Add(interval(ep)); next.After(p.times[ep.Name]) {
		p.times[ep.Name] = next
	}
}

func (p *pacer) next(name string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.times[name]
}

// start books the next start on ep as courier.NextStart decides; ok is
// false when that is further off than the lead (another attempt booked it
// first), and at is then when to try again.
func (p *pacer) start(ep *courier.Endpoint, now time.Time) (at time.Time, ok bool) {
	d := interval(ep)
	if d <= 0 {
		return now, true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	at, after, ok := courier.NextStart(p.times[ep.Name], now, d, lead(ep))
	if !ok {
		return at, false
	}
	if p.times == nil {
		p.times = map[string]time.Time{}
	}
	p.times[ep.Name] = after
	return at, true
}

// sendable reports whether endpoint may take an attempt in this round: it
// sends, or it is suspended and this round holds its probe.
func (rd *round) sendable(name string) (ok, probe bool) {
	if rd.probes[name] {
		return true, true // reserved by this round, not yet used
	}
	ok, probe = rd.healthOf(name).Sendable(rd.now)
	if probe {
		return false, false // another round or node may take it first
	}
	return ok, false
}

// admit reports whether ep may take an attempt in this round, reserving in
// the store the one probe of a suspended endpoint whose time has come (so
// that exactly one attempt goes to it, from this node or any other); if
// not, it says how long ep is held: until a time, or until released (off).
func (e *Engine) admit(ctx context.Context, rd *round, ep *courier.Endpoint) (ok, probe bool, h hold) {
	if ok, probe := rd.sendable(ep.Name); ok {
		return true, probe, hold{}
	}
	health := rd.healthOf(ep.Name)
	if _, due := health.Sendable(rd.now); due {
		got, reserved, err := e.reserveProbe(ctx, ep, rd.now)
		if err != nil {
			e.logger.Warn("could not reserve the probe of a suspended endpoint; will try again", "endpoint", ep.Name, "err", err)
			return false, false, hold{until: rd.now.Add(time.Second)}
		}
		rd.reserved[ep.Name] = got
		if reserved {
			rd.probes[ep.Name] = true
			return true, true, hold{}
		}
		health = got
	}
	switch health.State {
	case courier.HealthSuspended:
		// Its probe comes when the suspension ends, or when another
		// round's reservation of it lapses unused.
		return false, false, hold{until: maxTime(health.SuspendedUntil, health.ProbeUntil), endpoints: []string{ep.Name}}
	default:
		return false, false, hold{endpoints: []string{ep.Name}}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// recheck lets a lane just parked under endpoints go again if one of them
// has a slot free by now: an attempt that ended between the round's look at
// its slots and the parking found no lane to release.
func (e *Engine) recheck(rd *round, h hold) {
	for _, name := range h.endpoints {
		ep := rd.t.Endpoints[name]
		if ep == nil {
			continue
		}
		if ok, _ := rd.sendable(name); ok && e.free(rd, ep) > 0 && !e.paced(rd, ep) {
			e.lanes.release(name)
		}
	}
}

// routeCapacity is how many more attempts a route's endpoints can take now:
// endpoints that are suspended or off take none (their messages stay queued,
// unclaimed); a probe takes one; for single and failover routes the first
// endpoint that sends takes the rest (the others stand by), for the spreading
// strategies every endpoint that sends. With none, h says until when the
// route is held: the earliest time one of its endpoints may send again
// (pacing, a suspension's end), and the endpoints whose release (a slot
// freed, switched on) may let it go sooner.
func (e *Engine) routeCapacity(ctx context.Context, rd *round, r *courier.Route) (total int, h hold) {
	rd.parts = rd.parts[:0]
	until := func(at time.Time) {
		if h.until.IsZero() || at.Before(h.until) {
			h.until = at
		}
	}
	for _, name := range r.Endpoints {
		ep := rd.t.Endpoints[name]
		if ep == nil {
			continue
		}
		ok, probe, held := e.admit(ctx, rd, ep)
		if !ok {
			if !held.until.IsZero() {
				until(held.until)
			}
			h.endpoints = append(h.endpoints, held.endpoints...)
			continue
		}
		if probe {
			if e.free(rd, ep) >= 1 {
				total++
				rd.parts = append(rd.parts, endpointPart{name, 1})
			} else {
				h.endpoints = append(h.endpoints, name)
				if e.opts.Limits != nil {
					until(rd.now.Add(slotRetry)) // see below
				}
			}
			continue
		}
		if e.paced(rd, ep) {
			until(e.pace.next(ep.Name).Add(-lead(ep)))
			// It sends, but not yet: a failover route waits for it rather
			// than going to its backups, which are for endpoints that fail.
			if !r.Spreads() {
				break
			}
			continue
		}
		free := max(e.free(rd, ep), 0)
		if interval(ep) > 0 {
			free = min(free, 1) // one start per pacing interval
		}
		if free > 0 {
			rd.parts = append(rd.parts, endpointPart{name, free})
		}
		if free == 0 {
			h.endpoints = append(h.endpoints, name)
			if e.opts.Limits != nil {
				// The slots of a shared store are held by other nodes or
				// not yet asked for: look again soon.
				until(rd.now.Add(slotRetry))
			}
		}
		total += free
		if !r.Spreads() {
			break
		}
	}
	if total > 0 {
		return total, hold{}
	}
	return 0, h
}

// routeTimeout is the longest time an attempt on one of a route's endpoints
// may take: its timeout, and for a paced endpoint the wait for its start
// (one interval ahead on a node of its own; with nodes sharing a store, the
// others' bookings may come first).
func (e *Engine) routeTimeout(t *courier.Topology, r *courier.Route) time.Duration {
	var d time.Duration
	for _, name := range r.Endpoints {
		if ep := t.Endpoints[name]; ep != nil {
			d = max(d, timeoutOf(ep)+4*interval(ep))
		}
	}
	return d
}

// sendingEndpoints lists the endpoints of the routes that may take an
// attempt in this round, each once.
func (e *Engine) sendingEndpoints(ctx context.Context, rd *round, routes []*courier.Route) []*courier.Endpoint {
	var out []*courier.Endpoint
	seen := map[string]bool{}
	for _, r := range routes {
		for _, name := range r.Endpoints {
			ep := rd.t.Endpoints[name]
			if ep == nil || seen[name] {
				continue
			}
			seen[name] = true
			if ok, _, _ := e.admit(ctx, rd, ep); ok {
				out = append(out, ep)
			}
		}
	}
	return out
}

// endpointsAhead lists the endpoints of routes that send now, as far as
// the round knows without reserving anything (a probe is reserved when
// its route's turn comes).
func (rd *round) endpointsAhead(routes []string) []*courier.Endpoint {
	var out []*courier.Endpoint
	seen := map[string]bool{}
	for _, name := range routes {
		r := rd.t.Route(name)
		if r == nil {
			continue
		}
		for _, name := range r.Endpoints {
			if ep := rd.t.Endpoints[name]; ep != nil && !seen[name] {
				seen[name] = true
				if ok, _ := rd.sendable(name); ok {
					out = append(out, ep)
				}
			}
		}
	}
	return out
}

func timeoutOf(ep *courier.Endpoint) time.Duration {
	if ep.Timeout > 0 {
		return ep.Timeout
	}
	return courier.DefaultTimeout
}

// chooseEndpoint picks the endpoint of this attempt by the route's strategy
// among those that can send: a probe first (it takes exactly one message),
// then by the strategy, preferring one with a free slot (and reserving it).
// After a failure, another endpoint of the route is preferred. reserved is
// false when every slot was taken: the attempt must wait for one. ep is nil
// when no endpoint of the route can send any more.
func (e *Engine) chooseEndpoint(rd *round, r *courier.Route, m *courier.Message) (ep *courier.Endpoint, reserved, probe bool) {
	var candidates, waiting []*courier.Endpoint // sending now; sending but paced
	for _, name := range r.Endpoints {
		ep := rd.t.Endpoints[name]
		if ep == nil {
			continue
		}
		switch ok, isProbe := rd.sendable(name); {
		case ok && isProbe:
			rd.probes[name] = false
			e.slots.wait(ep)
			return ep, true, true
		case ok && e.paced(rd, ep):
			waiting = append(waiting, ep)
		case ok:
			candidates = append(candidates, ep)
		}
	}
	if len(candidates) == 0 {
		// The attempt waits for its pacing when it starts.
		candidates = waiting
	}
	if len(candidates) == 0 {
		return nil, false, false
	}
	var pos uint64
	if r.Spreads() {
		pos = e.position(r.Name)
	}
	candidates = r.ChooseOrder(candidates, pos, m)
	for _, ep := range candidates {
		if e.slots.take(ep) {
			return ep, true, false
		}
	}
	return candidates[0], false, false
}

// position advances and returns the round-robin counter of a route.
func (e *Engine) position(route string) uint64 {
	v, _ := e.rr.LoadOrStore(route, new(atomic.Uint64))
	return v.(*atomic.Uint64).Add(1)
}

// dispatch starts the attempt of a claimed message.
func (e *Engine) dispatch(ctx context.Context, rd *round, m *courier.Message) {
	r := rd.t.Route(m.Route)
	if r != nil && r.Lookup != nil {
		e.lookups.start(r.Name)
		e.inflight.Add(1)
		e.attempts.Add(1)
		e.workers.run(func() { e.attemptLookup(rd, r, m) })
		return
	}
	var ep *courier.Endpoint
	reserved, probe := false, false
	if r != nil {
		ep, reserved, probe = e.chooseEndpoint(rd, r, m)
	}
	e.inflight.Add(1)
	e.attempts.Add(1)
	if ep == nil && r != nil && e.routeHeld(rd, r) {
		// Its endpoints were switched off or suspended between the round's
		// look at them and the claim: the message waits for them, as it
		// would have unclaimed.
		e.workers.run(func() { e.putBack(rd.t, m) })
		return
	}
	e.workers.run(func() { e.attempt(rd.t, m, ep, reserved, probe) })
}

// routeHeld reports, of a route none of whose endpoints could be chosen
// for an attempt, whether that is for their health (it has configured
// endpoints, all of them off or suspended): then its messages wait; if
// it has none, the attempt fails and says so.
func (e *Engine) routeHeld(rd *round, r *courier.Route) bool {
	for _, name := range r.Endpoints {
		if rd.t.Endpoints[name] != nil {
			return true
		}
	}
	return false
}

// putBack queues a claimed message again without an attempt: the
// endpoint it was claimed for cannot take it now. Its route is held by the
// endpoint's health as the next round finds it, so the message waits
// there, not in a loop.
func (e *Engine) putBack(t *courier.Topology, m *courier.Message) {
	defer e.attempts.Done()
	e.finished(outcome{t: t, msg: m, deferUntil: e.clock.Now()})
}

// attempt delivers one message and hands the outcome to the completer.
func (e *Engine) attempt(t *courier.Topology, m *courier.Message, ep *courier.Endpoint, reserved, probe bool) {
	defer e.attempts.Done()
	if ep != nil && !reserved && !e.slots.wait(ep) {
		// The slots this node held are forgotten: it lost its presence.
		e.lanes.release(ep.Name)
		e.finished(outcome{t: t, msg: m})
		return
	}
	paced := ep == nil || e.waitPace(ep)
	if paced && ep != nil && !e.mayStart(ep, probe) {
		// Switched off or suspended while the attempt waited to start.
		e.slots.release(ep.Name)
		e.lanes.release(ep.Name)
		e.finished(outcome{t: t, msg: m, deferUntil: e.clock.Now()})
		return
	}
	ctx, span := e.startAttempt(m, ep)
	started := e.clock.Now()
	var res courier.Result
	switch {
	case !paced:
	case ep == nil:
		res = courier.Result{Class: courier.ClassTransport, Error: "the route " + m.Route + " has no endpoint"}
	default:
		res = e.send(ctx, t, m, ep)
	}
	duration := e.clock.Now().Sub(started)
	endAttempt(span, res)
	// The receiver is done with it: free the slot at once, so that the next
	// attempt need not wait for this outcome to be written, and let the
	// routes that waited for it go.
	if ep != nil {
		if paced {
			e.slots.done(ep, res, duration, e.clock.Now())
		} else {
			e.slots.release(ep.Name)
		}
		e.lanes.release(ep.Name)
	}
	e.finished(outcome{t: t, msg: m, endpoint: ep, result: res, probe: probe, started: started, duration: duration, ctx: ctx})
}

// finished hands an ended attempt (or a message put back) to the
// completer: its endpoint's activity and the observer hear of it, and the
// worker it held is free. After a stop cut the work off, it is dropped.
func (e *Engine) finished(o outcome) {
	if _, ours := e.ours(o.msg); e.life.Err() != nil || !ours {
		// Cut off by a stop that ran out of time, or by the loss of this
		// node's presence: what the attempt got is no verdict of the
		// receiver's. Its lease lapses, or the others take it over, as at
		// a crash.
		e.inflight.Add(-1)
		return
	}
	if o.endpoint != nil && !tenantGone(e.topology.Load(), o.endpoint.Name) {
		e.activity.record(o.endpoint.Name, o.result, e.clock.Now())
		e.noteAuth(o.endpoint.Name, o.result, e.clock.Now())
		e.opts.Observer.AttemptDone(o.msg, o.endpoint.Name, o.result, o.duration)
	}
	e.pending.Add(1)
	e.inflight.Add(-1)
	e.nudge()
	e.outcomes <- o
}

// send makes one attempt of m on ep with ep's transport, under the
// topology it was claimed under. ctx is e.life or a context of it that
// carries the attempt's span.
func (e *Engine) send(ctx context.Context, t *courier.Topology, m *courier.Message, ep *courier.Endpoint) courier.Result {
	sender := e.senderFor(ep)
	if sender == nil {
		return courier.Result{Class: courier.ClassTransport, Error: "this version of courier has no " + string(ep.Transport) + " transport"}
	}
	// The lease outlives the endpoint timeout. A stop does not cut an
	// attempt short, so that its outcome is known and written, unless it
	// runs out of time: then the attempt is abandoned (a transport may
	// still finish a request already sent; finished drops what it gets).
	actx, cancel := context.WithTimeout(ctx, timeoutOf(ep)+5*time.Second)
	defer cancel()
	// A node that lost its presence cuts its attempts short: the others may
	// take their messages over.
	p, ok := e.ours(m)
	if !ok {
		return courier.Result{Class: courier.ClassTransport, Error: "this node is not present in the store"}
	}
	if p.ctx.Done() != nil { // a presence that can be lost
		defer context.AfterFunc(p.ctx, cancel)()
	}
	sent, res := e.claimed(actx, m, ep)
	if res != nil {
		return *res
	}
	return sender.Send(actx, courier.Delivery{Message: sent, Endpoint: ep, Attempt: m.TotalAttempts, Step: t.StepContext(m), Blobs: e.store.Blobs()})
}

func (e *Engine) senderFor(ep *courier.Endpoint) courier.Sender {
	if ep == nil {
		return nil
	}
	return e.senders[ep.Transport]
}

// waitPace waits until a paced endpoint may start this attempt: its booked
// time, and the interval since the latest actual start. Claims take a paced
// endpoint's messages at most one interval (and 50 ms) ahead, so the wait is
// short. It reports false when a stop cut the wait off.
func (e *Engine) waitPace(ep *courier.Endpoint) bool {
	if e.opts.Limits != nil {
		if !e.bookShared(ep) {
			return false
		}
	} else {
		for {
			now := e.clock.Now()
			at, ok := e.pace.start(ep, now)
			if ok {
				if !startstop.Sleep(e.life, at.Sub(now)) {
					return false
				}
				break
			}
			if !startstop.Sleep(e.life, max(at.Sub(now), time.Millisecond)) {
				return false
			}
		}
	}
	for {
		wait := e.pace.begin(ep, e.clock.Now())
		if wait <= 0 {
			return true
		}
		if !startstop.Sleep(e.life, wait) {
			return false
		}
	}
}

// bookShared books this attempt's start in the store that nodes share, so
// that the spacing holds across all of them, and waits for it: the store
// decides at this node's now, and the wait runs until the time booked on
// this node's clock. What the store answers also tells this node's
// claimer when the endpoint is free again, so that it does not claim for
// it before then. It reports false when a stop cut the wait off.
func (e *Engine) bookShared(ep *courier.Endpoint) bool {
	if interval(ep) <= 0 {
		return true
	}
	for failures := 0; ; {
		now := e.clock.Now()
		wait, ok, err := e.opts.Limits.BookStart(e.life, ep.Name, interval(ep), lead(ep), now)
		if err != nil {
			if e.life.Err() != nil {
				return false
			}
			// Without a booking the spacing cannot be known: wait for the
			// store rather than send (the lease lapses if it stays away).
			failures++
			e.logger.Warn("could not book the next start of a paced endpoint; trying again", "endpoint", ep.Name, "err", err)
			if !startstop.Sleep(e.life, min(time.Duration(failures)*100*time.Millisecond, 2*time.Second)) {
				return false
			}
			continue
		}
		at := now.Add(wait)
		if ok {
			e.pace.booked(ep, at)
			return startstop.Sleep(e.life, at.Sub(e.clock.Now()))
		}
		e.pace.booked(ep, at.Add(lead(ep)-interval(ep)))
		if !startstop.Sleep(e.life, max(at.Sub(e.clock.Now()), time.Millisecond)) {
			return false
		}
	}
}
