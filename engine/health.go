package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
)

// healthMaxAge is how old the health that an attempt starts by may be: a
// switch, a suspension or a recovery written by another node is obeyed by
// this one within this time of its commit. Each claim round, and each
// attempt as it is about to start, reads the store again when what this
// node knows is older (one read at a time, however many ask). This node's
// own writes (an operator's switch through its API, the health its
// outcomes leave) are obeyed at once: they are put here before they are
// answered.
const healthMaxAge = 100 * time.Millisecond

// healthCache is the endpoints' health as this node last read it from the
// store, or wrote it there. Endpoints without an entry are active.
type healthCache struct {
	mu     sync.Mutex
	m      map[string]courier.EndpointHealth
	readAt time.Time
	// cursor is where the next read of the store's changes begins; resync
	// asks for a read of every row instead.
	cursor int64
	resync bool
	// reading is held by the read of the store under way, so that rounds
	// and attempts that find the health too old wait for one read rather
	// than each making its own.
	reading sync.Mutex
	// warned is when (Unix nanoseconds) an attempt last said that the
	// health could not be read.
	warned atomic.Int64
}

func (c *healthCache) get(name string) courier.EndpointHealth {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[name]
}

func (c *healthCache) put(h courier.EndpointHealth) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]courier.EndpointHealth{}
	}
	c.m[h.Endpoint] = h
}

// fresh reports whether the health was read from the store less than
// healthMaxAge before now.
func (c *healthCache) fresh(now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m != nil && now.Sub(c.readAt) < healthMaxAge
}

// refreshHealth reads the endpoints' health from the store when what this
// node knows is older than healthMaxAge (or always, with force), and lets
// the routes held by an endpoint whose health changed go. It reads the
// rows written since its last read; all of them the first time, and after
// a write of this node failed (the health it had put here is then undone
// by the store's).
func (e *Engine) refreshHealth(ctx context.Context, force bool) error {
	if !force && e.health.fresh(e.clock.Now()) {
		return nil
	}
	e.health.reading.Lock()
	defer e.health.reading.Unlock()
	// Another read may have ended while this one waited for it.
	now := e.clock.Now()
	if !force && e.health.fresh(now) {
		return nil
	}
	gen := e.steady.generation()
	e.health.mu.Lock()
	full := e.health.m == nil || e.health.resync
	e.health.resync = false
	since := e.health.cursor
	e.health.mu.Unlock()
	if full {
		since = 0
	}
	stored, cursor, err := e.store.HealthChanges(ctx, since)
	if err != nil {
		if full {
			e.health.mu.Lock()
			e.health.resync = true
			e.health.mu.Unlock()
		}
		return err
	}
	mine := map[string]bool{}
	for _, name := range e.steady.writtenSince(gen) {
		// This node wrote it after the read began: what it wrote is newer.
		mine[name] = true
	}
	e.health.mu.Lock()
	old := e.health.m
	m := old
	if full {
		m = make(map[string]courier.EndpointHealth, len(stored))
		for name := range mine {
			if h, ok := old[name]; ok {
				m[name] = h
			}
		}
	}
	var changed []string
	t := e.topology.Load()
	for _, h := range stored {
		if mine[h.Endpoint] || tenantGone(t, h.Endpoint) {
			continue // a tenant gone: its endpoints' rows are being erased
		}
		o, had := m[h.Endpoint]
		switch {
		case h.Forgettable():
			if had {
				delete(m, h.Endpoint)
				changed = append(changed, h.Endpoint)
			}
		case !had || o != h:
			m[h.Endpoint] = h
			changed = append(changed, h.Endpoint)
		}
	}
	if full {
		changed = changed[:0]
		for name, h := range m {
			if o, ok := old[name]; !ok || o != h {
				changed = append(changed, name)
			}
		}
		for name := range old {
			if _, ok := m[name]; !ok {
				changed = append(changed, name)
			}
		}
	}
	e.health.m, e.health.readAt, e.health.cursor = m, now, cursor
	e.steady.seen(gen, stored, full)
	e.health.mu.Unlock()
	for _, name := range changed {
		e.lanes.release(name)
	}
	return nil
}

// noteHealth takes in a health this node wrote to the store outside the
// engine (an operator's switch through its API): the rounds and the
// attempts about to start go by it at once, and the routes it held may go.
func (e *Engine) noteHealth(h courier.EndpointHealth) {
	e.steady.wrote(h)
	e.health.put(h)
	e.lanes.release(h.Endpoint)
}

// mayStart reports whether an attempt on ep, claimed while ep could take
// it, may start now: not when ep was switched off since, nor suspended
// (unless the attempt is the suspension's probe). It is asked at the last
// moment before the attempt is handed to its transport, after any wait for
// a slot or for pacing, with the health no older than healthMaxAge.
func (e *Engine) mayStart(ep *courier.Endpoint, probe bool) bool {
	if err := e.refreshHealth(e.life, false); err != nil {
		// What this node knows is all there is; the round that claimed
		// the message went by it too. Said once a minute at most: every
		// attempt asks while the store is away.
		now := e.clock.Now()
		if last := e.health.warned.Load(); last == 0 || now.Sub(time.Unix(0, last)) > time.Minute {
			e.health.warned.Store(now.UnixNano())
			e.logger.Warn("could not read the endpoints' health before an attempt; going by what this node knows", "endpoint", ep.Name, "err", err)
		}
	}
	switch e.health.get(ep.Name).State {
	case courier.HealthOff:
		return false
	case courier.HealthSuspended:
		return probe
	}
	return true
}

// newRound begins a claim cycle with the endpoints' health, read anew when
// it is older than healthMaxAge.
func (e *Engine) newRound(ctx context.Context) (*round, error) {
	if err := e.refreshHealth(ctx, false); err != nil {
		return nil, err
	}
	return &round{t: e.topology.Load(), now: e.clock.Now(), health: &e.health,
		reserved: map[string]courier.EndpointHealth{}, probes: map[string]bool{}}, nil
}

// reserveProbe reserves, in the store, the one probe of a suspended
// endpoint whose time has come: the reservation, until the attempt's
// timeout and the lease slack, is recognised by its time (stores keep
// microseconds). It returns the health as stored and whether this node
// holds the probe.
func (e *Engine) reserveProbe(ctx context.Context, ep *courier.Endpoint, now time.Time) (courier.EndpointHealth, bool, error) {
	until := now.Add(timeoutOf(ep) + e.opts.LeaseSlack).Truncate(time.Microsecond)
	got, err := e.store.UpdateHealth(ctx, ep.Name, func(h courier.EndpointHealth) courier.EndpointHealth {
		if _, probe := h.Sendable(now); probe {
			h.ProbeUntil = until
		}
		return h
	}, nil)
	return got, err == nil && got.ProbeUntil.Equal(until), err
}

// releaseProbes gives back the probes a round reserved but did not use (no
// message of the endpoint was due), so that the next due message may probe
// at once instead of after the reservation lapses.
func (e *Engine) releaseProbes(rd *round) {
	for name, unused := range rd.probes {
		if unused {
			e.releaseProbe(name, rd.healthOf(name).ProbeUntil)
		}
	}
}

// releaseProbe gives back a probe reserved until the time, unless another
// reservation took its place.
func (e *Engine) releaseProbe(endpoint string, until time.Time) {
	e.store.UpdateHealth(e.life, endpoint, func(h courier.EndpointHealth) courier.EndpointHealth {
		if h.ProbeUntil.Equal(until) {
			h.ProbeUntil = time.Time{}
		}
		return h
	}, nil)
}

// updateHealth applies the outcomes of a batch to the health of their
// endpoints, one store transaction per endpoint, and logs the changes an
// operator wants to know of.
func (e *Engine) updateHealth(batch []outcome) {
	type result struct {
		r     courier.Result
		probe bool
	}
	byEndpoint := map[string][]result{}
	endpoints := map[string]*courier.Endpoint{}
	for _, o := range batch {
		if o.endpoint == nil || o.endpoint.Name == "" {
			continue
		}
		byEndpoint[o.endpoint.Name] = append(byEndpoint[o.endpoint.Name], result{o.result, o.probe})
		endpoints[o.endpoint.Name] = o.endpoint
	}
	now := e.clock.Now()
	t := e.topology.Load()
	for name, results := range byEndpoint {
		if tenantGone(t, name) {
			continue // its tenant was deleted: the health would outlive its erasure
		}
		// Deliveries that were no probe leave a steady endpoint as it is.
		changes := !e.steady.is(name, t.Endpoints[name] != nil)
		for _, r := range results {
			changes = changes || r.probe || !r.r.Delivered()
		}
		if !changes {
			continue
		}
		ep := endpoints[name]
		var before courier.EndpointHealth
		after, err := e.store.UpdateHealth(e.life, name, func(h courier.EndpointHealth) courier.EndpointHealth {
			before = h
			for _, r := range results {
				h = ep.AfterOutcome(h, r.r, r.probe, now)
			}
			// This node's rounds go by the new health from before it is
			// committed: once others can read it, no attempt of this node
			// may still go by the old (a suspension let one more through).
			// Should the write fail, the next read of the store corrects it.
			e.steady.wrote(h)
			e.health.put(h)
			return h
		}, nil)
		if err != nil {
			e.logger.Warn("could not record endpoint health", "endpoint", name, "err", err)
			e.health.mu.Lock()
			e.health.resync = true // the health put here may not be the store's
			e.health.mu.Unlock()
			continue
		}
		e.steady.wrote(after)
		e.health.put(after)
		if after.State != before.State || after.SuspendedUntil != before.SuspendedUntil {
			e.lanes.release(name)
		}
		e.logHealth(name, before, after)
		e.opts.Observer.HealthChanged(name, before, after)
		reason := "attempts reach the receiver again"
		if after.State != courier.HealthActive {
			for _, r := range results {
				if f := failureOf(r.r); f != "" {
					reason = f
				}
			}
		}
		e.healthEvent(name, before, after, reason)
	}
}

// failureOf says what a failed attempt's result was, for the reason of an
// event; empty for a delivery.
func failureOf(r courier.Result) string {
	switch {
	case r.Delivered():
		return ""
	case r.Error != "":
		return string(r.Class) + ": " + r.Error
	}
	return string(r.Class)
}

func (e *Engine) logHealth(name string, before, after courier.EndpointHealth) {
	switch {
	case after.State == courier.HealthSuspended && (before.State != courier.HealthSuspended || after.Suspensions != before.Suspensions):
		e.logger.Warn("endpoint suspended", "endpoint", name, "until", after.SuspendedUntil, "suspensions", after.Suspensions)
	case after.State == courier.HealthActive && before.State == courier.HealthSuspended:
		e.logger.Info("endpoint active again", "endpoint", name)
	case after.State == courier.HealthTimeout && before.State != courier.HealthTimeout:
		e.logger.Info("endpoint failing (timeout state)", "endpoint", name, "failures", after.Failures)
	}
}

// steadyEndpoints knows which endpoints this node last saw active with no
// failures and no probe under way. Deliveries to such an endpoint change
// nothing in its health, so their batch writes none: a store round trip
// (and a wait for the disk) fewer for every batch of a healthy endpoint,
// and health_changed says when the health last changed.
//
// What it knows comes from the rounds' reads of the store and from this
// node's own writes. A read that began before a write of this node ended
// is older than that write for the endpoint written, which keeps what the
// write said. Another node's change is seen at the next round; until then
// a batch of deliveries may leave, say, one failure counted that it would
// have cleared.
type steadyEndpoints struct {
	mu      sync.Mutex
	gen     uint64            // counts this node's health writes
	written map[string]uint64 // the generation of each endpoint's last write
	steady  map[string]bool
}

func (s *steadyEndpoints) generation() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gen
}

// seen takes a read of the store's health rows, begun at generation gen:
// of all of them (full; an endpoint without a row is active, and steady if
// configured), or of those written since the read before, a forgotten one
// as its Forgettable health.
func (s *steadyEndpoints) seen(gen uint64, health []courier.EndpointHealth, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	steady := s.steady
	if full || steady == nil {
		steady = make(map[string]bool, len(health))
	}
	for _, h := range health {
		if at, ok := s.written[h.Endpoint]; ok && at > gen {
			continue // written since the read began
		}
		if h.Forgettable() {
			delete(steady, h.Endpoint)
		} else {
			steady[h.Endpoint] = h.Clean()
		}
	}
	for name, at := range s.written {
		if at > gen {
			if v, ok := s.steady[name]; ok {
				steady[name] = v // written since the read began
			}
		} else {
			delete(s.written, name) // the read is as new as the write
		}
	}
	s.steady = steady
}

// writtenSince lists the endpoints this node wrote after generation gen.
func (s *steadyEndpoints) writtenSince(gen uint64) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for name, at := range s.written {
		if at > gen {
			out = append(out, name)
		}
	}
	return out
}

// wrote notes a health this node wrote.
func (s *steadyEndpoints) wrote(h courier.EndpointHealth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	if s.steady == nil {
		s.steady = map[string]bool{}
	}
	if s.written == nil {
		s.written = map[string]uint64{}
	}
	s.written[h.Endpoint] = s.gen
	s.steady[h.Endpoint] = h.Clean()
}

// is reports whether the endpoint is known to be steady: as its row, or
// the latest write, says; without either, when it is configured.
func (s *steadyEndpoints) is(name string, configured bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.steady[name]; ok {
		return v
	}
	return configured
}
