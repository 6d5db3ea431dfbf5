package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// Ready lanes are served in turn: one that got all it asked for goes to the
// back, behind the lanes that were ready before it came round again.
func TestLanesTakeInTurn(t *testing.T) {
	ls := newLanes()
	for _, r := range []string{"deep", "a", "b"} {
		ls.due(r, t0, t0)
	}
	if got := ls.take(t0, 1); !slices.Equal(got, []string{"deep"}) {
		t.Fatalf("first take %v, want [deep]", got)
	}
	ls.claimed("deep", true) // full: more is due
	if got := ls.take(t0, 10); !slices.Equal(got, []string{"a", "b", "deep"}) {
		t.Fatalf("second take %v, want [a b deep]", got)
	}
	ls.claimed("a", false)
	ls.claimed("b", false)
	ls.claimed("deep", true)
	if got := ls.take(t0, 10); !slices.Equal(got, []string{"deep"}) {
		t.Fatalf("third take %v, want [deep]: a and b had nothing more", got)
	}
}

// Work due later waits for its time; a lane that is ready or claiming
// keeps the earliest later time and waits for it once it has nothing due.
func TestLanesWaitForTheirTime(t *testing.T) {
	ls := newLanes()
	ls.due("r", t0.Add(time.Minute), t0)
	if got := ls.take(t0, 10); len(got) != 0 {
		t.Fatalf("took %v before its time", got)
	}
	if at := ls.nextAt(); !at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("next at %v, want in a minute", at)
	}
	ls.due("r", t0.Add(30*time.Second), t0) // earlier work moves the time
	if at := ls.nextAt(); !at.Equal(t0.Add(30 * time.Second)) {
		t.Fatalf("next at %v, want in 30s", at)
	}
	now := t0.Add(30 * time.Second)
	if got := ls.take(now, 10); !slices.Equal(got, []string{"r"}) {
		t.Fatalf("took %v at its time, want [r]", got)
	}
	ls.due("r", now.Add(time.Hour), now) // a retry, decided while claiming
	ls.claimed("r", false)
	if at := ls.nextAt(); !at.Equal(now.Add(time.Hour)) {
		t.Fatalf("after the claim, next at %v, want the retry's time", at)
	}
}

// Work that comes due while a lane is being claimed is not lost when the
// claim comes back short: the claim may have read the store before it.
func TestLanesDueWhileClaiming(t *testing.T) {
	ls := newLanes()
	ls.due("r", t0, t0)
	ls.take(t0, 1)
	ls.due("r", t0, t0)
	ls.claimed("r", false)
	if got := ls.take(t0, 1); !slices.Equal(got, []string{"r"}) {
		t.Fatalf("took %v, want [r] again", got)
	}
}

// A held lane waits without being looked at: until the end of its hold, or
// until an endpoint it is parked under is released. New work does not make
// it ready; its endpoints do.
func TestLanesHeld(t *testing.T) {
	ls := newLanes()
	for i := 0; i < 100; i++ {
		ls.due(fmt.Sprintf("off-%d", i), t0, t0)
	}
	ls.due("suspended", t0, t0)
	got := ls.take(t0, 1000)
	if len(got) != 101 {
		t.Fatalf("took %d lanes, want 101", len(got))
	}
	for i := 0; i < 100; i++ {
		ls.hold(fmt.Sprintf("off-%d", i), hold{endpoints: []string{fmt.Sprintf("ep-%d", i%2)}})
	}
	ls.hold("suspended", hold{until: t0.Add(time.Minute), endpoints: []string{"s"}})
	for i := 0; i < 100; i++ {
		ls.due(fmt.Sprintf("off-%d", i), t0, t0)
	}
	if got := ls.take(t0.Add(time.Second), 1000); len(got) != 0 {
		t.Fatalf("held lanes taken: %v", got)
	}
	if !ls.release("ep-1") {
		t.Fatal("releasing ep-1 let no lane go")
	}
	if got := ls.take(t0.Add(time.Second), 1000); len(got) != 50 {
		t.Fatalf("after releasing ep-1, took %d lanes, want its 50", len(got))
	}
	if got := ls.take(t0.Add(time.Minute), 1000); !slices.Equal(got, []string{"suspended"}) {
		t.Fatalf("at the suspension's end took %v, want [suspended]", got)
	}
	if ls.release("s") {
		t.Error("a lane no longer held was released again")
	}
}

// Lanes of routes that are gone are forgotten, and their stale entries
// skipped.
func TestLanesForget(t *testing.T) {
	ls := newLanes()
	ls.due("gone", t0, t0)
	ls.due("later", t0.Add(time.Hour), t0)
	ls.due("kept", t0, t0)
	ls.forget(func(r string) bool { return r == "kept" })
	if got := ls.take(t0.Add(2*time.Hour), 10); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("took %v, want [kept]", got)
	}
	if !ls.nextAt().IsZero() {
		t.Error("a forgotten lane still has a time")
	}
}

// A lane whose route goes while it is claimed is dropped when its claim
// ends, however it ends, and a tenant deleted meanwhile goes with its last
// such lane: nothing of it stays in the lanes or the ring.
func TestLanesForgetWhileClaiming(t *testing.T) {
	for _, end := range []string{"claimed", "full", "hold", "held", "untake"} {
		t.Run(end, func(t *testing.T) {
			ls := newLanes()
			ls.due("acme/r1", t0, t0)
			ls.due("acme/r2", t0, t0)
			ls.due("kept/r", t0, t0)
			if got := ls.take(t0, 10); len(got) != 3 {
				t.Fatalf("took %v, want all three", got)
			}
			ls.claimed("kept/r", false)
			ls.forget(func(r string) bool { return r == "kept/r" })
			ls.forgetTenants(map[string]bool{"acme": true})
			if ls.tenants["acme"] == nil {
				t.Fatal("the tenant went while its lanes were claimed")
			}
			ls.claimed("acme/r1", false)
			if ls.tenants["acme"] == nil {
				t.Fatal("the tenant went while one of its lanes was still claimed")
			}
			switch end {
			case "claimed":
				ls.claimed("acme/r2", false)
			case "full":
				ls.claimed("acme/r2", true)
			case "hold":
				ls.hold("acme/r2", hold{until: t0.Add(time.Minute)})
			case "held":
				ls.hold("acme/r2", hold{endpoints: []string{"acme/ep"}})
			case "untake":
				ls.untake([]string{"acme/r2"})
			}
			for name := range ls.byName {
				if name != "kept/r" {
					t.Errorf("lane %s kept after its route went", name)
				}
			}
			if ls.tenants["acme"] != nil || slices.ContainsFunc(ls.ring, func(tl *tenantLanes) bool { return tl.name == "acme" }) {
				t.Error("the deleted tenant is still in the ring")
			}
			if ls.wantingTenants != 0 || ls.release("acme/ep") || !ls.nextAt().IsZero() {
				t.Errorf("stale state: %d tenants wanting, a lane parked or timed", ls.wantingTenants)
			}
			if got := ls.take(t0.Add(time.Hour), 10); len(got) != 0 {
				t.Errorf("took %v, want nothing", got)
			}
		})
	}
}

// Lanes taken but not claimed for keep their turn: they are the first
// ready again.
func TestLanesUntakeKeepsTheTurn(t *testing.T) {
	ls := newLanes()
	for _, r := range []string{"a", "b", "c", "d"} {
		ls.due(r, t0, t0)
	}
	got := ls.take(t0, 3)
	ls.claimed("a", true)
	ls.untake(got[1:])
	if got := ls.take(t0, 10); !slices.Equal(got, []string{"b", "c", "d", "a"}) {
		t.Fatalf("took %v, want [b c d a]", got)
	}
}
