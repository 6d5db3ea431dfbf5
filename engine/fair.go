package engine

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

// fair shares what is scarce among the tenants whose routes wait for it,
// by weighted deficit round robin (Shreedhar and Varghese, 1995): a node's
// claims, and through them each endpoint's slots and pacing turns, which a
// claim round hands out in the order of the tenants' turns (docs/design.md
// §20, Fair shares).
//
// Each tenant with a lane has a place in a ring and a deficit: the
// messages it may still be granted in its turn. The round takes the ready
// lanes of the tenant whose turn it is, first in, first out, and charges
// the tenant what each lane is granted; once its deficit is spent the turn
// passes, and a tenant whose deficit is spent gets its quantum (its weight
// times an equal part of the round's capacity) as the turn comes past it.
// A lane granted nothing (its endpoint is full) costs nothing, so a tenant
// keeps its credit, and its place, until the capacity frees: whoever's
// turn it is then takes it. A tenant's lanes held on an endpoint keep it among
// those that want capacity, so that one whose lanes happen to be ready
// while another's wait parked is charged all the same. With one tenant
// wanting capacity (every configuration without tenants), its lanes are
// taken as they come, without turns or charges.
type fair struct {
	tenants map[string]*tenantLanes
	ring    []*tenantLanes
	cur     int // whose turn it is
	// wantingTenants counts the tenants with lanes that want capacity.
	wantingTenants int
	round          uint64 // the claim round under way
	// users is, per endpoint, when each tenant was last granted its
	// capacity: who shares it now, for the tenants it holds back.
	users map[string]map[string]time.Time
	// servedNow lists the tenants served in the round under way, so that
	// its end costs what it served and not every tenant's name.
	servedNow []*tenantLanes
	waiting   []*tenantLanes // endRound's, kept for the next
	// looked counts the tenants turns looked at: a turn looks at a few,
	// not at every tenant.
	looked uint64
	// goneTenants are tenants deleted while a lane of theirs was claimed:
	// the end of the last such claim drops them.
	goneTenants map[string]bool
}

// tenantLanes is a tenant's ready lanes and its turns.
type tenantLanes struct {
	name    string
	ready   []*lane // FIFO; ready[head:] are waiting their turn
	head    int
	wanting int    // its lanes that want capacity: ready, claiming or held
	deficit int    // what it may still be granted in its turn; below zero, what it took beyond
	served  uint64 // the round in which it last had a turn
	// throttledAt is when fair share last held it back, and why: reason,
	// or, when the node's claims were busy, busyWith, the tenants that
	// round served (the reason is made of them when asked for).
	throttledAt time.Time
	reason      string
	busyWith    []string
}

// turn is lanes of one tenant taken for a claim round. limited: other
// tenants wait too, so the turn ends when the tenant's deficit (as it was
// when the turn began) is spent.
type turn struct {
	tenant  *tenantLanes
	routes  []string
	limited bool
	deficit int
}

// tenantOf returns a tenant's lanes, given a place in the ring when first
// seen; ls.mu is held.
func (ls *lanes) tenantOf(name string) *tenantLanes {
	tl := ls.tenants[name]
	if tl == nil {
		tl = &tenantLanes{name: name}
		ls.tenants[name] = tl
		ls.ring = append(ls.ring, tl)
	}
	return tl
}

// cutIn moves a tenant that starts to want capacity to the turn's place
// in the ring, ahead of the tenant whose turn it is: with credit left from
// its last turn it goes first, without, right after that turn. A tenant
// that sends now and then waits for one turn at most, not for a round of
// them (as new flows do in FQ-CoDel, RFC 8290); it is charged as any.
// ls.mu is held.
func (ls *lanes) cutIn(tl *tenantLanes) {
	i := slices.Index(ls.ring, tl)
	if i < 0 || i == ls.cur || ls.wantingTenants < 2 {
		return
	}
	ls.ring = slices.Delete(ls.ring, i, i+1)
	if i < ls.cur {
		ls.cur--
	}
	ls.ring = slices.Insert(ls.ring, ls.cur, tl)
}

func (tl *tenantLanes) push(l *lane) { tl.ready = append(tl.ready, l) }

// pushFront puts lanes back at the front, in their order.
func (tl *tenantLanes) pushFront(back []*lane) {
	if tl.head >= len(back) {
		tl.head -= len(back)
		copy(tl.ready[tl.head:], back)
		return
	}
	tl.ready, tl.head = append(back, tl.ready[tl.head:]...), 0
}

// live reports whether the tenant has a ready lane, dropping stale entries
// (made ready twice, or forgotten: forget leaves a lane idle) from the
// front; ls.mu is held.
func (tl *tenantLanes) live(ls *lanes) bool {
	ls.looked++
	for tl.head < len(tl.ready) {
		l := tl.ready[tl.head]
		if l.state == laneReady {
			return true
		}
		tl.ready[tl.head] = nil
		tl.head++
	}
	tl.ready, tl.head = tl.ready[:0], 0
	return false
}

// pop takes up to n of the tenant's ready lanes, in their turn; ls.mu is
// held.
func (tl *tenantLanes) pop(ls *lanes, n int) []string {
	var out []string
	for tl.head < len(tl.ready) && len(out) < n {
		l := tl.ready[tl.head]
		tl.ready[tl.head] = nil
		tl.head++
		if l.state != laneReady {
			continue
		}
		ls.set(l, laneClaiming, false)
		l.again = false
		out = append(out, l.route)
	}
	switch {
	case tl.head == len(tl.ready):
		tl.ready, tl.head = tl.ready[:0], 0
	case tl.head > 1024 && tl.head > len(tl.ready)/2:
		tl.ready, tl.head = append(tl.ready[:0], tl.ready[tl.head:]...), 0
	}
	return out
}

// beginRound starts a claim round; it tells how many tenants want
// capacity, and whether they are several: then they share it.
func (ls *lanes) beginRound() (sharing bool, wanting int) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	ls.round++
	clear(ls.servedNow)
	ls.servedNow = ls.servedNow[:0]
	return ls.wantingTenants > 1, ls.wantingTenants
}

// serve gives a tenant its turn in the round, up to n lanes; a limited
// turn takes no more lanes than its deficit can grant a message each,
// so that the rest need not be given back. ls.mu is held.
func (ls *lanes) serve(tl *tenantLanes, n int, limited bool) turn {
	if tl.served != ls.round {
		tl.served = ls.round
		ls.servedNow = append(ls.servedNow, tl)
	}
	if limited {
		n = min(n, max(tl.deficit, 1))
	}
	return turn{tenant: tl, routes: tl.pop(ls, n), limited: limited, deficit: tl.deficit}
}

// takeTurn returns the lanes of the next turn, up to n, first making ready
// the lanes whose time has come. quantum gives a tenant's quantum; nil
// takes every tenant's lanes as they come.
func (ls *lanes) takeTurn(now time.Time, n int, quantum func(tenant string) int) turn {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for ls.timed.Len() > 0 && !ls.timed[0].at.After(now) {
		ls.setReady(ls.timed[0])
	}
	// The turn looks at the tenants from the one whose turn it is, and
	// only as far as the first that may take it: never at all of them
	// while one is ready.
	k := len(ls.ring)
	if ls.wantingTenants < 2 || quantum == nil {
		for i := range k {
			if tl := ls.ring[(ls.cur+i)%k]; tl.live(ls) {
				return ls.serve(tl, n, false)
			}
		}
		return turn{}
	}
	anyLive := false
	for j, visits := ls.cur, 0; ; visits++ {
		if visits == k && !anyLive {
			return turn{}
		}
		if visits == 2*k {
			// Twice round with no credit anywhere: the rounds of quanta
			// that would pass before one has some, at once.
			ls.skipRounds(quantum)
			visits = 0
		}
		tl, next := ls.ring[j], (j+1)%k
		live := tl.live(ls)
		anyLive = anyLive || live
		switch {
		case !live:
			// Nothing ready: the turn passes it by, unless its lanes
			// wait for capacity to free (claimed in this round, or held):
			// then it keeps its turn for when they are ready again.
			if j == ls.cur && tl.wanting == 0 {
				ls.cur = next
			}
		case tl.deficit <= 0:
			tl.deficit += max(quantum(tl.name), 1)
			if j == ls.cur {
				ls.cur = next
			}
		default:
			return ls.serve(tl, n, true)
		}
		j = next
	}
}

// upcoming lists about the next n ready lanes' routes in the order the
// turns will reach them, up to per lanes of a tenant at a time (a turn's
// worth) from the one whose turn it is, without taking them: a round asks
// the store once for what their endpoints need, rather than once per
// turn. ls.mu is not held.
func (ls *lanes) upcoming(n, per int) []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	k := len(ls.ring)
	if k == 0 || n <= 0 {
		return nil
	}
	per = max(1, per)
	var out []string
	for i := 0; i < k && len(out) < n; i++ {
		tl := ls.ring[(ls.cur+i)%k]
		taken := 0
		for j := tl.head; j < len(tl.ready) && taken < per && len(out) < n; j++ {
			if l := tl.ready[j]; l.state == laneReady {
				out = append(out, l.route)
				taken++
			}
		}
	}
	return out
}

// skipRounds adds to every waiting tenant the quanta of as many rounds as
// the first to have credit again needs; ls.mu is held.
func (ls *lanes) skipRounds(quantum func(string) int) {
	rounds := -1
	for _, tl := range ls.ring {
		if tl.live(ls) {
			q := max(quantum(tl.name), 1)
			if r := (-tl.deficit + q - 1) / q; rounds < 0 || r < rounds {
				rounds = r
			}
		}
	}
	for _, tl := range ls.ring {
		if tl.live(ls) {
			tl.deficit += rounds * max(quantum(tl.name), 1)
		}
	}
}

// charge notes that a lane of the turn was granted n messages; it reports
// whether the turn is spent.
func (ls *lanes) charge(tn turn, n int) (spent bool) {
	if !tn.limited {
		return false
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	tn.tenant.deficit -= n
	return tn.tenant.deficit <= 0
}

// used notes that the route's tenant was granted capacity of the
// endpoints while other tenants wanted capacity too. Only the endpoints
// of another tenant (the system's) are noted: the tenant's own are no
// one else's to share, so a round with many tenants keeps nothing for
// each of theirs.
func (ls *lanes) used(route string, endpoints []string, now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.users == nil {
		ls.users = map[string]map[string]time.Time{}
	}
	tenant := courier.TenantOf(route)
	for _, name := range endpoints {
		if courier.TenantOf(name) == tenant {
			continue
		}
		u := ls.users[name]
		if u == nil {
			u = map[string]time.Time{}
			ls.users[name] = u
		}
		u[tenant] = now
		maps.DeleteFunc(u, func(_ string, at time.Time) bool { return now.Sub(at) >= shareWindow })
	}
}

// shareWindow is how long a use of an endpoint, or a hold-back, counts as
// now.
const shareWindow = 2 * time.Second

// heldBack notes, of a route granted nothing because the endpoints it
// waits for are full while other tenants want capacity, whether those
// share the endpoints now: then its tenant is held back by fair share.
func (ls *lanes) heldBack(route string, endpoints []string, now time.Time) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	tenant := courier.TenantOf(route)
	for _, name := range endpoints {
		if others := ls.sharers(name, tenant, now); len(others) > 0 {
			tl := ls.tenantOf(tenant)
			tl.throttledAt, tl.busyWith = now, nil
			tl.reason = "endpoint " + name + " is full; its capacity is shared by weight with " + strings.Join(others, ", ")
			return
		}
	}
}

// sharers lists the other tenants granted an endpoint's capacity lately;
// ls.mu is held.
func (ls *lanes) sharers(endpoint, tenant string, now time.Time) []string {
	var out []string
	for t, at := range ls.users[endpoint] {
		if t != tenant && now.Sub(at) < shareWindow {
			out = append(out, t)
		}
	}
	sort.Strings(out)
	return out
}

// endRound notes, when the round's claims ran out with lanes of several
// tenants still ready, that those tenants wait for their turn. It costs a
// look at each tenant and what the round served, never a reason per
// tenant: the reason is made when asked for (shares).
func (ls *lanes) endRound(capacityLeft bool, now time.Time) {
	if capacityLeft {
		return
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	waiting := ls.waiting[:0]
	for _, tl := range ls.ring {
		if tl.live(ls) {
			waiting = append(waiting, tl)
		}
	}
	defer func() { clear(waiting); ls.waiting = waiting[:0] }()
	if len(ls.servedNow) < 2 && len(waiting) < 2 {
		return
	}
	served := make([]string, len(ls.servedNow))
	for i, tl := range ls.servedNow {
		served[i] = tl.name
	}
	for _, tl := range waiting {
		// Held back by the others the round served, if it served any.
		if tl.served == ls.round && len(served) == 1 {
			continue
		}
		tl.throttledAt, tl.reason, tl.busyWith = now, "", served
	}
}

// busyReason tells a tenant that the node's claims were busy serving
// others; served are the tenants served then, itself maybe among them.
func busyReason(tenant string, served []string) string {
	others := slices.DeleteFunc(slices.Clone(served), func(s string) bool { return s == tenant })
	slices.Sort(others)
	return "the node's claims are busy; they are shared by weight with " + strings.Join(others, ", ")
}

// TenantShare is how a tenant fares in the sharing of scarce capacity on
// this node now.
type TenantShare struct {
	Tenant string `json:"tenant"`
	// WaitingRoutes counts its routes with work due that wait for
	// capacity: ready for a claim, or parked on a full or held endpoint.
	WaitingRoutes int `json:"waiting_routes"`
	// Throttled: fair share held it back lately (in the last two seconds)
	// and it still waits; Reason says what it waits for and with whom it
	// shares it.
	Throttled bool   `json:"throttled"`
	Reason    string `json:"reason,omitempty"`
}

// shares reports every tenant that has lanes, by name.
func (ls *lanes) shares(now time.Time) []TenantShare {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []TenantShare
	for _, name := range slices.Sorted(maps.Keys(ls.tenants)) {
		tl := ls.tenants[name]
		s := TenantShare{Tenant: name, WaitingRoutes: tl.wanting}
		if s.WaitingRoutes > 0 && !tl.throttledAt.IsZero() && now.Sub(tl.throttledAt) < shareWindow {
			s.Throttled, s.Reason = true, tl.reason
			if tl.busyWith != nil {
				s.Reason = busyReason(name, tl.busyWith)
			}
		}
		out = append(out, s)
	}
	return out
}

// FairShares reports, per tenant with routes known to this node, whether
// fair share holds it back now and why, and how many of its routes wait
// for capacity (docs/design.md §20, Fair shares). It is this node's view;
// the stats of a cluster add those of its nodes.
func (e *Engine) FairShares() []TenantShare {
	return e.lanes.shares(e.clock.Now())
}

// fullOf lists the endpoints of a hold that send but have no capacity left
// in the round: those whose capacity other tenants may be using.
func (e *Engine) fullOf(rd *round, h hold) []string {
	var out []string
	for _, name := range h.endpoints {
		if rd.t.Endpoints[name] == nil {
			continue
		}
		if ok, _ := rd.sendable(name); ok {
			out = append(out, name)
		}
	}
	return out
}
