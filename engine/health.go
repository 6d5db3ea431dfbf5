package engine

import (
	"context"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// newRound reads the endpoints' health for a claim cycle and reserves, in
// the store, the probe of every suspended endpoint whose time has come, so
// that exactly one attempt goes to it (from this node or any other).
func (e *Engine) newRound(ctx context.Context) (*round, error) {
	gen := e.steady.generation()
	stored, err := e.store.Health(ctx)
	if err != nil {
		return nil, err
	}
	rd := &round{t: e.topology.Load(), now: e.clock.Now(), health: make(map[string]courier.EndpointHealth, len(stored)),
		probes: map[string]bool{}}
	for _, h := range stored {
		rd.health[h.Endpoint] = h
	}
	e.steady.seen(gen, rd.t.Endpoints, rd.health)
	for name, h := range rd.health {
		ep := rd.t.Endpoints[name]
		if ep == nil {
			continue
		}
		if _, probe := h.Sendable(rd.now); !probe {
			continue
		}
		got, reserved, err := e.reserveProbe(ctx, ep, rd.now)
		if err != nil {
			return nil, err
		}
		rd.health[name] = got
		rd.probes[name] = reserved
	}
	return rd, nil
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
			e.releaseProbe(name, rd.health[name].ProbeUntil)
		}
	}
}

// releaseProbe gives back a probe reserved until the time, unless another
// reservation took its place.
func (e *Engine) releaseProbe(endpoint string, until time.Time) {
	e.store.UpdateHealth(context.Background(), endpoint, func(h courier.EndpointHealth) courier.EndpointHealth {
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
	for name, results := range byEndpoint {
		// Deliveries that were no probe leave a steady endpoint as it is.
		changes := !e.steady.is(name)
		for _, r := range results {
			changes = changes || r.probe || !r.r.Delivered()
		}
		if !changes {
			continue
		}
		ep := endpoints[name]
		var before courier.EndpointHealth
		after, err := e.store.UpdateHealth(context.Background(), name, func(h courier.EndpointHealth) courier.EndpointHealth {
			before = h
			for _, r := range results {
				h = ep.AfterOutcome(h, r.r, r.probe, now)
			}
			return h
		}, nil)
		if err != nil {
			e.logger.Warn("could not record endpoint health", "endpoint", name, "err", err)
			continue
		}
		e.steady.wrote(after)
		e.logHealth(name, before, after)
		e.opts.Observer.HealthChanged(name, before, after)
	}
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

// seen takes a round's read of the store, begun at generation gen, for
// the configured endpoints and those of the read. An endpoint without a
// stored health is active.
func (s *steadyEndpoints) seen(gen uint64, endpoints map[string]*courier.Endpoint, health map[string]courier.EndpointHealth) {
	s.mu.Lock()
	defer s.mu.Unlock()
	steady := make(map[string]bool, len(endpoints)+len(health))
	for name := range endpoints {
		steady[name] = true
	}
	for name, h := range health {
		steady[name] = h.Clean()
	}
	for name, at := range s.written {
		if at > gen {
			steady[name] = s.steady[name] // written since the read began
		} else {
			delete(s.written, name) // the read is as new as the write
		}
	}
	s.steady = steady
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

// is reports whether the endpoint is known to be steady.
func (s *steadyEndpoints) is(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steady[name]
}
