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
// max_concurrency requests open. On a store that several nodes share, a node
// may use only the slots it holds in the store (shared != nil): it takes
// more while its claims come back full, and gives back those it has not used
// for a while, so the limit holds across every node.
type endpointSlots struct {
	mu      sync.Mutex
	freed   *sync.Cond // signalled when a slot is released
	running map[string]int
	waiting map[string]int // attempts waiting for a slot

	shared   courier.SharedLimits
	held     map[string][]int     // shared: the slot numbers this node holds
	busyAt   map[string]time.Time // shared: when a slot was last taken
	hungry   map[string]bool      // shared: a claim for the endpoint came back full
	retryAt  map[string]time.Time // shared: no asking for more before then
	renewdAt time.Time
}

// Slot leases in a shared store: how long a held slot outlives its node,
// how often they are renewed, and how long an unused one is kept.
const (
	slotTTL   = 30 * time.Second
	slotRenew = 5 * time.Second
	slotIdle  = time.Second
	// slotRetry is how soon a node asks again for slots that other nodes
	// held when it asked.
	slotRetry = 200 * time.Millisecond
)

func newEndpointSlots(shared courier.SharedLimits) *endpointSlots {
	s := &endpointSlots{running: map[string]int{}, waiting: map[string]int{}, shared: shared,
		held: map[string][]int{}, busyAt: map[string]time.Time{}, hungry: map[string]bool{}, retryAt: map[string]time.Time{}}
	s.freed = sync.NewCond(&s.mu)
	return s
}

// limit is how many attempts e may have running on this node; s.mu is held.
func (s *endpointSlots) limit(e *courier.Endpoint) int {
	if s.shared != nil {
		return len(s.held[e.Name])
	}
	return max(e.MaxConcurrency, 1)
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
	s.busyAt[e.Name] = time.Now()
	return true
}

// wait reserves a slot on e, waiting for one to be released. Claims are
// sized to free slots, so this is rare: two routes sharing an endpoint.
func (s *endpointSlots) wait(e *courier.Endpoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.waiting[e.Name]++
	for s.running[e.Name] >= s.limit(e) {
		s.freed.Wait()
	}
	s.waiting[e.Name]--
	s.running[e.Name]++
	s.busyAt[e.Name] = time.Now()
}

func (s *endpointSlots) release(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[name]--; s.running[name] <= 0 {
		delete(s.running, name)
	}
	s.freed.Broadcast()
}

// claimed notes, for a shared store, whether a claim for routes using the
// endpoint came back full: then the node asks for more of its slots.
func (s *endpointSlots) claimed(endpoint string, full bool) {
	if s.shared == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hungry[endpoint] = full
}

// refresh brings the slots held in a shared store in line with this node's
// need before a claim: for each endpoint that may send in this round, it
// asks for more when every held slot is in use and the claims want more (or
// it holds none, to learn whether there is work); of every endpoint it holds
// slots of (configured ones in known, or those given), it gives back the
// slots unused for a while; and it renews the rest now and then. One store
// round trip each.
func (s *endpointSlots) refresh(ctx context.Context, owner string, endpoints []*courier.Endpoint, known map[string]*courier.Endpoint, now time.Time) error {
	if s.shared == nil {
		return nil
	}
	s.mu.Lock()
	var want []courier.SlotRequest
	release := map[string][]int{}
	maxOf := func(name string) int {
		if e := known[name]; e != nil {
			return max(e.MaxConcurrency, 1)
		}
		return 0
	}
	for _, e := range endpoints {
		held, used := s.held[e.Name], s.running[e.Name]+s.waiting[e.Name]
		maxSlots := max(e.MaxConcurrency, 1)
		if len(held) < maxSlots && used >= len(held) && (len(held) == 0 || s.hungry[e.Name]) && !now.Before(s.retryAt[e.Name]) {
			// Ask for as many again as held (at least one): a node with
			// work grows quickly, one without asks for a single slot.
			want = append(want, courier.SlotRequest{Endpoint: e.Name, Max: maxSlots, N: min(max(len(held), 1), maxSlots-len(held))})
		}
	}
	for name, held := range s.held {
		used := s.running[name] + s.waiting[name]
		maxSlots := maxOf(name)
		if maxSlots == 0 {
			for _, e := range endpoints {
				if e.Name == name {
					maxSlots = max(e.MaxConcurrency, 1)
				}
			}
		}
		if maxSlots == 0 {
			maxSlots = len(held) // not known here: keep what is in use
		}
		if len(held) > maxSlots || len(held) > used && now.Sub(s.busyAt[name]) > slotIdle {
			keep := min(max(used, 0), maxSlots)
			if keep < len(held) {
				release[name] = append([]int(nil), held[keep:]...)
			}
		}
	}
	renew := now.Sub(s.renewdAt) >= slotRenew
	s.mu.Unlock()

	if len(release) > 0 {
		if err := s.shared.ReleaseSlots(ctx, owner, release); err != nil {
			return err
		}
		s.mu.Lock()
		for name, gone := range release {
			s.held[name] = s.held[name][:len(s.held[name])-len(gone)]
			if len(s.held[name]) == 0 {
				delete(s.held, name)
			}
		}
		s.mu.Unlock()
	}
	if renew {
		got, err := s.shared.RenewSlots(ctx, owner, slotTTL)
		if err != nil {
			return err
		}
		s.mu.Lock()
		// A slot that lapsed (this node could not renew it in time) may be
		// another node's now: it is no longer used here.
		s.held = got
		s.renewdAt = now
		s.mu.Unlock()
	}
	if len(want) > 0 {
		got, err := s.shared.AcquireSlots(ctx, owner, want, slotTTL)
		if err != nil {
			return err
		}
		s.mu.Lock()
		for _, w := range want {
			if len(got[w.Endpoint]) <= len(s.held[w.Endpoint]) {
				// Other nodes hold the rest; ask again a little later.
				s.retryAt[w.Endpoint] = now.Add(slotRetry)
			}
			s.held[w.Endpoint] = got[w.Endpoint]
			s.busyAt[w.Endpoint] = now // a new slot gets its chance before it counts as idle
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
	s.held = map[string][]int{}
	s.mu.Unlock()
	return s.shared.ReleaseSlots(ctx, owner, held)
}
