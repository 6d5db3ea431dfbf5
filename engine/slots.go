package engine

import (
	"context"
	"maps"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// endpointSlots counts the attempts running per endpoint, so that claims
// take only what an endpoint may receive and no endpoint ever has more than
// max_concurrency requests open. An endpoint with max_concurrency: auto has
// the limit its courier.AdaptiveLimit gives, learnt on this node from the
// outcomes of this node's attempts. On a store that several nodes share, a node
// may use only the slots it holds in the store (shared != nil): it takes
// what is free of an endpoint when it has work for it and its claims come
// back full, and gives back, once a window, what it held beyond the most it
// used in that window, so the limit holds across every node and a node
// keeps no more than it needs.
type endpointSlots struct {
	mu      sync.Mutex
	freed   *sync.Cond // signalled when a slot is released
	running map[string]int
	waiting map[string]int // attempts waiting for a slot

	shared   courier.SharedLimits
	held     map[string]int       // shared: the slots this node holds
	peak     map[string]int       // shared: the most in use at once in this window
	windowAt time.Time            // shared: when this window began
	hungry   map[string]bool      // shared: a claim for the endpoint came back full
	retryAt  map[string]time.Time // shared: no asking for more before then
	renewdAt time.Time
	gen      uint64 // counts forget: waiters of an earlier generation give up

	adaptive map[string]*adaptive // endpoints with max_concurrency: auto
	prunedAt time.Time

	// gone reports an endpoint whose tenant was deleted (nil: none): the
	// holds renewed in the store are not kept for it, whose rows its
	// tenant's erasure removes.
	gone func(endpoint string) bool
}

// adaptive is the limit of an endpoint with max_concurrency: auto, and when
// an attempt on it last ended.
type adaptive struct {
	limit *courier.AdaptiveLimit
	used  time.Time
}

// adaptiveIdle is how long the limit learnt for an endpoint outlives its
// last attempt: a resolved endpoint of a lookup route that is no longer
// used is forgotten, one that is used again starts afresh.
const adaptiveIdle = 10 * time.Minute

// Slot holds in a shared store: how long a hold outlives its node, how
// often holds are renewed, and the window over which a node's use of an
// endpoint is measured before what it did not use goes back. The window is
// a few seconds, not one: with ten thousand endpoints each gets its turn
// of the claims about every second or two, so a one-second window gave an
// endpoint's slots back between two of its turns and took them again at
// the next, some five times per endpoint in a run of 100,000 messages
// (2.5 s of database time in a 16 s run); with three seconds, once. Slots
// a node no longer uses reach other nodes that much later.
const (
	slotTTL    = 30 * time.Second
	slotRenew  = 5 * time.Second
	slotWindow = 3 * time.Second
	// slotRetry is how soon a node asks again for slots that other nodes
	// held when it asked.
	slotRetry = 200 * time.Millisecond
)

func newEndpointSlots(shared courier.SharedLimits) *endpointSlots {
	s := &endpointSlots{running: map[string]int{}, waiting: map[string]int{}, shared: shared,
		held: map[string]int{}, peak: map[string]int{}, hungry: map[string]bool{}, retryAt: map[string]time.Time{},
		adaptive: map[string]*adaptive{}}
	s.freed = sync.NewCond(&s.mu)
	return s
}

// limit is how many attempts e may have running on this node; s.mu is held.
func (s *endpointSlots) limit(e *courier.Endpoint) int {
	if s.shared != nil {
		return min(s.held[e.Name], s.maxOf(e))
	}
	return s.maxOf(e)
}

// maxOf is how many attempts e may have in flight: its max_concurrency, or
// with auto its adaptive limit now; s.mu is held. On a shared store it is
// what this node asks for, and the slots of the store count the attempts
// of every node against it.
func (s *endpointSlots) maxOf(e *courier.Endpoint) int {
	if !e.AutoConcurrency {
		return max(e.MaxConcurrency, 1)
	}
	return s.adaptiveOf(e).limit.Limit()
}

// adaptiveOf returns the adaptive limit of e, made when first asked for;
// s.mu is held.
func (s *endpointSlots) adaptiveOf(e *courier.Endpoint) *adaptive {
	a := s.adaptive[e.Name]
	if a == nil {
		a = &adaptive{limit: courier.NewAdaptiveLimit(e.MaxConcurrency)}
		s.adaptive[e.Name] = a
	} else if c := max(e.MaxConcurrency, 1); a.limit.Ceiling() != c {
		a.limit.SetCeiling(c) // changed on reload
	}
	return a
}

// concurrencyLimit returns the adaptive limit of the endpoint named, and
// false when it has none (not auto, or not used lately).
func (s *endpointSlots) concurrencyLimit(name string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a := s.adaptive[name]; a != nil {
		return a.limit.Limit(), true
	}
	return 0, false
}

func (s *endpointSlots) free(e *courier.Endpoint) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit(e) - s.running[e.Name] - s.waiting[e.Name]
}

// take reserves a slot on e if one is free.
func (s *endpointSlots) take(e *courier.Endpoint) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[e.Name] >= s.limit(e) {
		return false
	}
	s.running[e.Name]++
	s.used(e.Name)
	return true
}

// wait reserves a slot on e, waiting for one to be released. Claims are
// sized to free slots, so this is rare: two routes sharing an endpoint. It
// returns false, reserving nothing, if the slots held were forgotten
// meanwhile.
func (s *endpointSlots) wait(e *courier.Endpoint) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[e.Name]++
	s.used(e.Name)
	gen := s.gen
	for s.running[e.Name] >= s.limit(e) && s.gen == gen {
		s.freed.Wait()
	}
	if s.waiting[e.Name]--; s.waiting[e.Name] <= 0 {
		delete(s.waiting, e.Name)
	}
	if s.gen != gen {
		return false
	}
	s.running[e.Name]++
	return true
}

// forget drops the slots held in a shared store without giving them back:
// this node lost its presence, and the others take them over. Attempts
// waiting for a slot give up.
func (s *endpointSlots) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.held)
	clear(s.peak)
	clear(s.hungry)
	s.gen++
	s.freed.Broadcast()
}

// used notes the slots of name in use now towards the window's peak; s.mu
// is held.
func (s *endpointSlots) used(name string) {
	if s.shared != nil {
		s.peak[name] = max(s.peak[name], s.running[name]+s.waiting[name])
	}
}

func (s *endpointSlots) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[name]--; s.running[name] <= 0 {
		delete(s.running, name)
	}
	s.freed.Broadcast()
}

// done releases the slot of an attempt on e that was sent and got r after
// d; an endpoint with max_concurrency: auto learns from it.
func (s *endpointSlots) done(e *courier.Endpoint, r courier.Result, d time.Duration, now time.Time) {
	if e.AutoConcurrency {
		s.mu.Lock()
		a := s.adaptiveOf(e)
		a.limit.Observe(d, r, s.running[e.Name])
		a.used = now
		if now.Sub(s.prunedAt) >= adaptiveIdle {
			maps.DeleteFunc(s.adaptive, func(name string, a *adaptive) bool {
				return now.Sub(a.used) > adaptiveIdle && s.running[name]+s.waiting[name] == 0
			})
			s.prunedAt = now
		}
		s.mu.Unlock()
	}
	s.release(e.Name)
}

// claimed notes, for a shared store, whether a claim for routes using the
// endpoint came back full: then the node asks for more of its slots.
func (s *endpointSlots) claimed(endpoint string, full bool) {
	if s.shared == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if full {
		s.hungry[endpoint] = true
	} else {
		delete(s.hungry, endpoint) // so that the map holds only endpoints that want more
	}
}

// refresh brings the slots held in a shared store in line with this node's
// need before a claim: for each endpoint that may send in this round, it
// asks for every slot it lacks when every held slot is in use and the
// claims want more (or it holds none, to learn whether there is work); once
// a window, it gives back what it held beyond the most it used in the
// window, of every endpoint it holds slots of (configured ones in known,
// or those given); and it renews its holds now and then. One store round
// trip each, whatever the number of endpoints and slots.
func (s *endpointSlots) refresh(ctx context.Context, owner string, endpoints []*courier.Endpoint, known map[string]*courier.Endpoint, now time.Time) error {
	if s.shared == nil {
		return nil
	}
	s.mu.Lock()
	var want []courier.SlotRequest
	release := map[string]int{}
	maxOf := make(map[string]int, len(endpoints))
	for _, e := range endpoints {
		held, used := s.held[e.Name], s.running[e.Name]+s.waiting[e.Name]
		maxSlots := s.maxOf(e)
		maxOf[e.Name] = maxSlots
		switch {
		case held > maxSlots:
			release[e.Name] = held - maxSlots // its limit was lowered
		case held < maxSlots && used >= held && (held == 0 || s.hungry[e.Name]) && !now.Before(s.retryAt[e.Name]):
			want = append(want, courier.SlotRequest{Endpoint: e.Name, Max: maxSlots, N: maxSlots - held})
		}
	}
	// Once a window, and only then, every held endpoint is looked at: a
	// round costs what it claims for, not what the node holds.
	if now.Sub(s.windowAt) >= slotWindow {
		for name, held := range s.held {
			maxSlots, ok := maxOf[name]
			if !ok {
				if e := known[name]; e != nil {
					maxSlots = s.maxOf(e)
				} else {
					maxSlots = held // not known here (a resolved endpoint): its use decides
				}
			}
			if keep := min(maxSlots, max(s.peak[name], s.running[name]+s.waiting[name])); keep < held {
				release[name] = held - keep
			}
		}
		clear(s.peak)
		for name, n := range s.running {
			s.peak[name] = n + s.waiting[name]
		}
		// Pauses that ended are forgotten, so that the map does not keep
		// every endpoint ever resolved on a lookup route.
		maps.DeleteFunc(s.retryAt, func(_ string, at time.Time) bool { return !now.Before(at) })
		s.windowAt = now
	}
	renew := now.Sub(s.renewdAt) >= slotRenew
	s.mu.Unlock()

	if len(release) > 0 {
		if err := s.shared.ReleaseSlots(ctx, owner, release); err != nil {
			return err
		}
		s.mu.Lock()
		for name, n := range release {
			if s.held[name] -= n; s.held[name] <= 0 {
				delete(s.held, name)
			}
		}
		s.mu.Unlock()
	}
	if renew {
		got, err := s.shared.RenewSlots(ctx, owner, slotTTL, now)
		if err != nil {
			return err
		}
		s.mu.Lock()
		// A hold that lapsed (this node could not renew it in time) may be
		// another node's now: it is no longer used here.
		if s.gone != nil {
			maps.DeleteFunc(got, func(name string, _ int) bool { return s.gone(name) })
		}
		s.held = got
		s.renewdAt = now
		s.mu.Unlock()
	}
	if len(want) > 0 {
		got, err := s.shared.AcquireSlots(ctx, owner, want, slotTTL, now)
		if err != nil {
			return err
		}
		s.mu.Lock()
		for _, w := range want {
			n := got[w.Endpoint]
			if n <= s.held[w.Endpoint] {
				// Other nodes hold the rest; ask again a little later.
				s.retryAt[w.Endpoint] = now.Add(slotRetry)
			}
			if n > 0 {
				s.held[w.Endpoint] = n
			} else {
				delete(s.held, w.Endpoint)
			}
		}
		s.mu.Unlock()
	}
	s.freed.Broadcast()
	return nil
}

// releaseAll gives back every slot held in a shared store, at stop.
func (s *endpointSlots) releaseAll(ctx context.Context, owner string) error {
	if s.shared == nil {
		return nil
	}
	s.mu.Lock()
	held := maps.Clone(s.held)
	s.held = map[string]int{}
	s.mu.Unlock()
	return s.shared.ReleaseSlots(ctx, owner, held)
}
