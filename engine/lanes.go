package engine

import (
	"container/heap"
	"slices"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// lanes knows which routes have due work, so that a claim round costs what
// it claims and not what is configured: with ten thousand routes, a round
// looks at the few that are ready, never at the rest.
//
// A route's lane is
//
//   - idle: nothing known to be due;
//   - ready: work may be due now. A tenant's ready lanes are served first
//     in, first out: a route with a deep backlog takes what its endpoints
//     can take and goes to the back, so a route with one message is reached
//     within one turn of its tenant's ready ones. The tenants take turns by
//     weighted deficit round robin (fair.go);
//   - waiting: for a time (work known to come due then, or the end of a
//     hold such as a suspension or pacing), or, held, for one of the
//     endpoints it is parked under to be released (switched on, a slot
//     freed). A waiting lane costs nothing per round;
//   - claiming: a round is claiming for it now.
//
// What makes a lane ready: this node's own decisions (outcomes, retries,
// timers, rescues), the routes of messages ingested or resubmitted
// (Engine.Due), the store's notifications from other nodes, and now and
// then a sweep of the store (Store.DueRoutes), which finds what no notice
// named. A lane whose claim came back with fewer messages than it asked
// for has nothing more due now; it waits for the earliest later time it
// knows of, if any.
type lanes struct {
	mu     sync.Mutex
	byName map[string]*lane
	timed  laneHeap // waiting lanes with a time, by that time
	parked map[string]map[*lane]struct{}
	fair   // the tenants' ready lanes and turns
}

type laneState uint8

const (
	laneIdle laneState = iota
	laneReady
	laneWaiting
	laneClaiming
)

type lane struct {
	route  string
	tenant *tenantLanes
	state  laneState
	held   bool      // waiting for the end of a hold, not for work
	at     time.Time // in the timed heap: when it is ready
	index  int       // in the timed heap; -1 when not in it
	later  time.Time // the earliest known due time after now, while it cannot take a timer of its own
	again  bool      // claiming: work came due while the claim ran
	gone   bool      // claiming: its route went meanwhile; the claim's end drops it
}

// hold says why a lane cannot be claimed now: until a time (a suspension,
// pacing), and/or until one of the endpoints is released (switched off, or
// every slot in use).
type hold struct {
	until     time.Time
	endpoints []string
}

func newLanes() *lanes {
	return &lanes{byName: map[string]*lane{}, parked: map[string]map[*lane]struct{}{},
		fair: fair{tenants: map[string]*tenantLanes{}}}
}

func (ls *lanes) get(route string) *lane {
	l := ls.byName[route]
	if l == nil {
		l = &lane{route: route, index: -1, tenant: ls.tenantOf(courier.TenantOf(route))}
		ls.byName[route] = l
	}
	return l
}

// due notes that route has work due at the time (not after now: due now).
func (ls *lanes) due(route string, at, now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.dueLocked(ls.get(route), at, now)
}

func (ls *lanes) dueLocked(l *lane, at, now time.Time) {
	if at.After(now) {
		switch {
		case l.state == laneIdle:
			ls.wait(l, at)
		case l.state == laneWaiting && !l.held:
			if at.Before(l.at) {
				l.at = at
				heap.Fix(&ls.timed, l.index)
			}
		case l.later.IsZero() || at.Before(l.later):
			l.later = at
		}
		return
	}
	switch {
	case l.state == laneIdle:
		ls.setReady(l)
	case l.state == laneWaiting && !l.held:
		ls.setReady(l)
	case l.state == laneClaiming:
		l.again = true
	}
	// Ready: it is. Held: it waits for its endpoints, not for work.
}

func (ls *lanes) setReady(l *lane) {
	if l.index >= 0 {
		heap.Remove(&ls.timed, l.index)
	}
	ls.set(l, laneReady, false)
	l.tenant.push(l)
}

// set moves l to a state; ls.mu is held. It counts each tenant's lanes
// that want capacity (ready, claiming, or held), and the tenants that have
// any.
func (ls *lanes) set(l *lane, state laneState, held bool) {
	was := l.wants()
	l.state, l.held = state, held
	switch now := l.wants(); {
	case now && !was:
		if l.tenant.wanting++; l.tenant.wanting == 1 {
			ls.wantingTenants++
			ls.cutIn(l.tenant)
		}
	case was && !now:
		if l.tenant.wanting--; l.tenant.wanting == 0 {
			ls.wantingTenants--
		}
	}
}

// wants reports whether l wants capacity: it is ready or claiming, or
// held until capacity frees.
func (l *lane) wants() bool {
	return l.state == laneReady || l.state == laneClaiming || l.state == laneWaiting && l.held
}

// wait makes l wait for work due at the time.
func (ls *lanes) wait(l *lane, at time.Time) {
	ls.set(l, laneWaiting, false)
	l.at = at
	heap.Push(&ls.timed, l)
}

// idleOrLater ends l's turn: it waits for the later work it knows of, or is
// idle.
func (ls *lanes) idleOrLater(l *lane) {
	if at := l.later; !at.IsZero() {
		l.later = time.Time{}
		ls.wait(l, at)
		return
	}
	ls.set(l, laneIdle, false)
}

// take returns up to n ready lanes, first those whose time has come, in
// their turn; each is claiming until claimed or hold ends its claim. The
// tenants' lanes come in the order of their turns, without limit to a turn:
// the claimer limits turns with takeTurn.
func (ls *lanes) take(now time.Time, n int) []string {
	var out []string
	for len(out) < n {
		tn := ls.takeTurn(now, n-len(out), nil)
		if len(tn.routes) == 0 {
			break
		}
		out = append(out, tn.routes...)
	}
	return out
}

// untake gives lanes taken but not claimed for back their turn: they are
// the first ready of their tenant again, in the order given.
func (ls *lanes) untake(routes []string) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var back []*lane
	for _, r := range routes {
		if l := ls.claimEnds(r); l != nil {
			ls.set(l, laneReady, false)
			back = append(back, l)
		}
	}
	// Each tenant's run of lanes goes back in front, the last run first,
	// so that every lane ends up where it was.
	for end := len(back); end > 0; {
		start := end - 1
		for start > 0 && back[start-1].tenant == back[end-1].tenant {
			start--
		}
		back[start].tenant.pushFront(slices.Clone(back[start:end]))
		end = start
	}
}

// claimEnds returns the route's lane whose claim ends: nil when it is not
// being claimed, or when its route went meanwhile and it is dropped
// (dropGone). The caller holds ls.mu.
func (ls *lanes) claimEnds(route string) *lane {
	l := ls.byName[route]
	if l == nil || l.state != laneClaiming || ls.dropGone(l) {
		return nil
	}
	return l
}

// claimed ends a lane's claim: full reports that it got all it asked for,
// so more may be due.
func (ls *lanes) claimed(route string, full bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	switch l := ls.claimEnds(route); {
	case l == nil:
	case full || l.again:
		ls.setReady(l)
	default:
		ls.idleOrLater(l)
	}
}

// hold ends a lane's claim without claiming: it waits until the hold ends.
// A hold that names neither a time nor an endpoint leaves it idle (a route
// without endpoints: nothing would ever take its messages).
func (ls *lanes) hold(route string, h hold) {
	if h.until.IsZero() && len(h.endpoints) == 0 {
		ls.claimed(route, false)
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	l := ls.claimEnds(route)
	if l == nil {
		return
	}
	ls.set(l, laneWaiting, true)
	l.again = false
	if !h.until.IsZero() {
		l.at = h.until
		heap.Push(&ls.timed, l)
	}
	for _, name := range h.endpoints {
		set := ls.parked[name]
		if set == nil {
			set = map[*lane]struct{}{}
			ls.parked[name] = set
		}
		set[l] = struct{}{}
	}
}

// release makes the lanes parked under an endpoint ready: a slot of it was
// freed, or its health changed. It reports whether there was any.
func (ls *lanes) release(endpoint string) bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	set := ls.parked[endpoint]
	if len(set) == 0 {
		return false
	}
	delete(ls.parked, endpoint)
	any := false
	for l := range set {
		if l.state == laneWaiting && l.held {
			ls.setReady(l)
			any = true
		}
	}
	return any
}

// releaseAll makes every held lane ready, as after a change that no single
// endpoint names (a reload, a sweep).
func (ls *lanes) releaseAll() {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for name, set := range ls.parked {
		for l := range set {
			if l.state == laneWaiting && l.held {
				ls.setReady(l)
			}
		}
		delete(ls.parked, name)
	}
}

// nextAt returns when the earliest waiting lane's time comes; zero if none
// has one.
func (ls *lanes) nextAt() time.Time {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.timed.Len() == 0 {
		return time.Time{}
	}
	return ls.timed[0].at
}

// readyCount is about how many lanes are ready (stale entries counted).
func (ls *lanes) readyCount() int {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	n := 0
	for _, tl := range ls.ring {
		n += len(tl.ready) - tl.head
	}
	return n
}

// pending reports whether a lane is ready.
func (ls *lanes) pending() bool {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, tl := range ls.ring {
		if tl.live(ls) {
			return true
		}
	}
	return false
}

// forget drops the lanes of routes that are gone. A lane under a claim is
// marked gone instead, and dropped when its claim ends.
func (ls *lanes) forget(exists func(route string) bool) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for name, l := range ls.byName {
		switch {
		case exists(name):
			l.gone = false // a route that came back while its claim ran
		case l.state == laneClaiming:
			l.gone = true
		default:
			ls.drop(l)
		}
	}
}

// drop forgets a lane; ls.mu is held. Its entries in ready and parked are
// stale from now on.
func (ls *lanes) drop(l *lane) {
	if l.index >= 0 {
		heap.Remove(&ls.timed, l.index)
	}
	ls.set(l, laneIdle, false)
	delete(ls.byName, l.route)
}

// dropGone drops a lane whose route went while it was claimed, and its
// tenant when the tenant went too and this was its last lane. It reports
// whether it dropped the lane; ls.mu is held.
func (ls *lanes) dropGone(l *lane) bool {
	if !l.gone {
		return false
	}
	ls.drop(l)
	if ls.goneTenants[l.tenant.name] {
		ls.forgetTenantsLocked(map[string]bool{l.tenant.name: true})
	}
	return true
}

// laneHeap orders waiting lanes by their time.
type laneHeap []*lane

func (h laneHeap) Len() int           { return len(h) }
func (h laneHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h laneHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *laneHeap) Push(x any) {
	l := x.(*lane)
	l.index = len(*h)
	*h = append(*h, l)
}
func (h *laneHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	l.index = -1
	*h = old[:len(old)-1]
	return l
}
