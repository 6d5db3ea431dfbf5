package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// scarce plays claim rounds in which one slot is free: every waiting lane
// is ready, the first lane taken gets the slot and the others are held on
// the endpoint, as a round does when an endpoint is full. It returns how
// many slots each tenant got.
func scarce(t *testing.T, routes map[string]int, weights map[string]int, rounds int) map[string]int {
	t.Helper()
	ls := newLanes()
	got := map[string]int{}
	quantum := func(tenant string) int { return max(weights[tenant], 1) * 1 }
	for i := 0; i < rounds; i++ {
		for tenant, n := range routes {
			for r := 0; r < n; r++ {
				ls.due(fmt.Sprintf("%s/r-%02d", tenant, r), t0, t0)
			}
		}
		ls.beginRound()
		free := 1
		for {
			tn := ls.takeTurn(t0, 1000, quantum)
			if len(tn.routes) == 0 {
				break
			}
			for j, r := range tn.routes {
				if free == 0 {
					ls.hold(r, hold{endpoints: []string{"system/ep"}})
					continue
				}
				free--
				got[strings.Split(r, "/")[0]]++
				ls.claimed(r, false)
				if ls.charge(tn, 1) {
					ls.untake(tn.routes[j+1:])
					break
				}
			}
		}
		ls.releaseAll()
	}
	return got
}

// A tenant with one route gets the scarce slot every other round against
// one with fifty, and weights share it in their proportion: a route that
// is granted nothing keeps its tenant's turn until capacity frees.
func TestFairTurnsShareAScarceSlot(t *testing.T) {
	for _, tc := range []struct {
		name    string
		routes  map[string]int
		weights map[string]int
		want    map[string]int // of 300 slots, give or take 2
	}{
		{"equal", map[string]int{"a": 50, "b": 1}, nil, map[string]int{"a": 150, "b": 150}},
		{"two to one", map[string]int{"a": 50, "b": 1}, map[string]int{"a": 2}, map[string]int{"a": 200, "b": 100}},
		{"three tenants", map[string]int{"a": 50, "b": 1, "c": 5}, nil, map[string]int{"a": 100, "b": 100, "c": 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := scarce(t, tc.routes, tc.weights, 300)
			for tenant, want := range tc.want {
				if d := got[tenant] - want; d < -2 || d > 2 {
					t.Fatalf("got %v slots of 300, want %v", got, tc.want)
				}
			}
		})
	}
}

// With one tenant waiting its lanes come as they are ready, without turns:
// as before there were tenants.
func TestFairOneTenantTakesAll(t *testing.T) {
	ls := newLanes()
	for i := 0; i < 5; i++ {
		ls.due(fmt.Sprintf("r-%d", i), t0, t0)
	}
	tn := ls.takeTurn(t0, 10, func(string) int { return 1 })
	if len(tn.routes) != 5 || tn.limited {
		t.Fatalf("took %v (limited %v), want all five routes without limit", tn.routes, tn.limited)
	}
	if ls.charge(tn, 100) {
		t.Fatal("a lone tenant's turn was spent")
	}
}

// A tenant with a deep backlog delays another's newly ready route by at
// most one of its turns: its quantum's worth of messages.
func TestFairNewcomerWaitsOneTurn(t *testing.T) {
	ls := newLanes()
	for i := 0; i < 100; i++ {
		ls.due(fmt.Sprintf("a/r-%02d", i), t0, t0)
	}
	const q = 4
	quantum := func(string) int { return q }
	ls.beginRound()
	for _, r := range ls.takeTurn(t0, 1000, quantum).routes { // alone: all of them
		ls.claimed(r, true)
	}
	ls.due("b/new", t0, t0)
	ls.beginRound()
	ahead := 0
	for {
		tn := ls.takeTurn(t0, 1000, quantum)
		if len(tn.routes) == 0 {
			t.Fatal("b/new was never taken")
		}
		if tn.tenant.name == "b" {
			break
		}
		for j, r := range tn.routes {
			ahead += 2
			ls.claimed(r, true)
			if ls.charge(tn, 2) {
				ls.untake(tn.routes[j+1:])
				break
			}
		}
	}
	if ahead > q {
		t.Fatalf("a was granted %d messages before b's new route had its turn, want at most its quantum %d", ahead, q)
	}
}

// The tenants fair share holds back are shown throttled, with why, while
// they wait; not once they no longer wait, nor after a while.
func TestFairSharesShowThrottled(t *testing.T) {
	ls := newLanes()
	ls.due("a/r-1", t0, t0)
	ls.due("b/r-1", t0, t0)
	ls.beginRound()
	ls.take(t0, 10)
	ls.used("b/r-1", []string{"system/ep"}, t0)
	ls.claimed("b/r-1", true)
	ls.hold("a/r-1", hold{endpoints: []string{"system/ep"}})
	ls.heldBack("a/r-1", []string{"system/ep"}, t0)
	got := ls.shares(t0.Add(time.Second))
	want := []TenantShare{
		{Tenant: "a", WaitingRoutes: 1, Throttled: true, Reason: "endpoint system/ep is full; its capacity is shared by weight with b"},
		{Tenant: "b", WaitingRoutes: 1},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("shares:\n got %+v\nwant %+v", got, want)
	}
	if got := ls.shares(t0.Add(shareWindow)); got[0].Throttled {
		t.Fatalf("still throttled %s after it was last held back: %+v", shareWindow, got[0])
	}
	ls.release("system/ep")
	ls.take(t0, 10)
	ls.claimed("a/r-1", false)
	if got := ls.shares(t0.Add(time.Second)); got[0].Throttled || got[0].WaitingRoutes != 0 {
		t.Fatalf("a waits no more, yet %+v", got[0])
	}
}

// With many tenants waiting, a turn looks at the tenants from the one
// whose turn it is to the first that takes it, not at every tenant, takes
// no more of its lanes than its deficit grants, and
// the end of a round busy for all of them makes no reason per tenant: a
// claim round costs what it serves, whatever the number of tenants.
func TestFairCostDoesNotGrowWithTenants(t *testing.T) {
	const tenants = 1000
	ls := newLanes()
	for i := range tenants {
		ls.due(fmt.Sprintf("t%04d/r-1", i), t0, t0)
		ls.due(fmt.Sprintf("t%04d/r-2", i), t0, t0)
	}
	quantum := func(string) int { return 1 }
	ls.beginRound()
	ls.looked = 0
	served := map[string]bool{}
	for range tenants {
		// Worth one message: one lane of the tenant, the other left in
		// its place rather than taken and given back.
		tn := ls.takeTurn(t0, 1000, quantum)
		if len(tn.routes) != 1 || served[tn.tenant.name] {
			t.Fatalf("turn %d took %v of %q, want one route of a tenant not yet served", len(served), tn.routes, tn.tenant.name)
		}
		served[tn.tenant.name] = true
		ls.charge(tn, 1)
		ls.claimed(tn.routes[0], false)
	}
	if ls.looked > 4*tenants {
		t.Errorf("%d turns looked at tenants %d times, want a few times per turn", tenants, ls.looked)
	}
	allocs := testing.AllocsPerRun(10, func() { ls.endRound(false, t0) })
	if allocs > 2 {
		t.Errorf("the end of a round with %d tenants waiting made %.0f allocations, want none per tenant", tenants, allocs)
	}
	shares := ls.shares(t0)
	if s := shares[0]; !s.Throttled || !strings.HasPrefix(s.Reason, "the node's claims are busy; they are shared by weight with t0001, t0002") {
		t.Errorf("%s waits after a busy round: throttled %v, reason %.80q; want it held back by the others served", s.Tenant, s.Throttled, s.Reason)
	}
}

// Only a shared endpoint's use is kept, for the tenants it holds back: a
// tenant's own endpoints are no other's, and many tenants using theirs
// keep nothing.
func TestFairNotesUseOfSharedEndpointsOnly(t *testing.T) {
	ls := newLanes()
	for i := range 1000 {
		ls.used(fmt.Sprintf("t%04d/r-1", i), []string{fmt.Sprintf("t%04d/ep", i)}, t0)
	}
	ls.used("a/r-1", []string{"system/ep"}, t0)
	if len(ls.users) != 1 || !ls.users["system/ep"]["a"].Equal(t0) {
		t.Fatalf("kept the use of %d endpoints (%v of system/ep), want only system/ep's, by a", len(ls.users), ls.users["system/ep"])
	}
}
