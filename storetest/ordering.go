package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// keyed returns a queued message of an ordering key on a route, accepted
// at base (due at once).
func keyed(id, route, key string) *courier.Message {
	m := &courier.Message{ID: id, Type: "t", Route: route, Payload: []byte(id), ContentType: "text/plain", OrderingKey: key}
	courier.Accept(m, courier.DefaultPolicy(), true, base)
	return m
}

// finish applies the outcome of a claimed message: delivered, or suspended
// (with skip: leaving its key's order).
func finish(t *testing.T, s courier.Store, m *courier.Message, state courier.State, skip bool, now time.Time) {
	t.Helper()
	n := *m
	n.State, n.UpdatedAt, n.LeaseUntil, n.LeaseOwner = state, now, time.Time{}, ""
	n.NextAttemptAt, n.TimerAt, n.FinishedAt = time.Time{}, time.Time{}, now
	if state == courier.StateSuspended {
		n.Reason, n.LastError = courier.ReasonRejected, "HTTP 400"
	}
	n.OrderSkipped = skip
	applyOne(t, s, &n, m.TotalAttempts)
}

// claimWant claims on route acme and wants exactly the ids given.
func claimWant(t *testing.T, s courier.Store, now time.Time, want string) []*courier.Message {
	t.Helper()
	return claimOn(t, s, "acme", now, want)
}

// claimOn claims on one route and wants exactly the ids given.
func claimOn(t *testing.T, s courier.Store, route string, now time.Time, want string) []*courier.Message {
	t.Helper()
	got := claim(t, s, now, courier.RouteQuota{Route: route, Limit: 100})
	if ids(got) != want {
		t.Fatalf("claimed on %s %s, want %s", route, ids(got), want)
	}
	return got
}

// fireTimers does what the engine does with the timers due at now of the
// messages of route r (the suite's subtests share a store, each on routes
// of its own): it decides with the policy that policy gives each message
// and applies the decisions. Every decision must apply.
func fireTimers(t *testing.T, s courier.Store, r *courier.Route, now time.Time, policy func(*courier.Message) *courier.Policy) {
	t.Helper()
	ctx := context.Background()
	due, err := s.DueTimers(ctx, now, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var changes []courier.Change
	for _, m := range due {
		if m.Route != r.Name {
			continue
		}
		next, notices, _ := courier.OnTimer(m, policy(m), now)
		courier.KeepOrder(next, r)
		changes = append(changes, courier.Change{Message: next, From: courier.StateQueued, Token: m.TotalAttempts, Notices: notices})
	}
	MustApply(t, s, changes...)
}

// blockRoute is a route whose ordered_on_failure is block.
func blockRoute(name string) *courier.Route {
	return &courier.Route{Name: name, OrderedOnFailure: courier.OrderedBlock}
}

func defaultPolicy(*courier.Message) *courier.Policy { return courier.DefaultPolicy() }

func mustResubmit(t *testing.T, s courier.Store, id, route string, at time.Time) *courier.Message {
	t.Helper()
	m, err := s.Resubmit(context.Background(), id, route, courier.Action{At: at, Who: "ops"})
	if err != nil {
		t.Fatalf("resubmit %s: %v", id, err)
	}
	return m
}

// mustCreate ingests messages that must all be new: the subtests that
// share a store have ids of their own.
func mustCreate(t *testing.T, s courier.Store, msgs ...*courier.Message) {
	t.Helper()
	for i, r := range mustIngest(t, s, msgs...) {
		if r.Status != courier.IngestCreated {
			t.Fatalf("ingest %s: %v, want created", msgs[i].ID, r.Status)
		}
	}
}

// wantHolder wants KeyHolder(route, key) to be the message id.
func wantHolder(t *testing.T, s courier.Store, route, key, id string) {
	t.Helper()
	h, err := s.KeyHolder(context.Background(), route, key)
	if err != nil || h.ID != id {
		t.Fatalf("KeyHolder(%s, %s) = %v, %v; want %s", route, key, h, err, id)
	}
}

func byID(msgs []*courier.Message, id string) *courier.Message {
	for _, m := range msgs {
		if m.ID == id {
			return m
		}
	}
	return nil
}

// testOrderingOneAtATime: of each key on each route one message is
// claimable, the oldest; the next becomes due when it is delivered.
func testOrderingOneAtATime(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustIngest(t, s, keyed("a1", "acme", "k"))
	mustIngest(t, s, keyed("a2", "acme", "k"), keyed("b1", "acme", "l"))
	mustIngest(t, s, keyed("a3", "acme", "k"), keyed("g1", "globex", "k")) // the same key on another route is another key
	u := keyed("u", "acme", "")
	mustIngest(t, s, u)
	// Several of one key in one call: the first in input order leads.
	mustIngest(t, s, keyed("c1", "acme", "m"), keyed("c2", "acme", "m"), keyed("c3", "acme", "m"))

	for _, id := range []string{"a2", "a3", "c2", "c3"} {
		if m := mustGet(t, s, id); !m.Waiting() || m.State != courier.StateQueued {
			t.Errorf("%s: state %s next %v, want queued and waiting for its key", id, m.State, m.NextAttemptAt)
		}
	}
	wantHolder(t, s, "acme", "k", "a1")
	// Waiting messages are queued: counted, and their route has work.
	if n, err := s.CountQueued(ctx, []string{"acme"}); err != nil || n != 8 {
		t.Fatalf("CountQueued(acme) = %d, %v; want 8, the waiting ones too", n, err)
	}
	got := claimWant(t, s, base, "[a1 b1 u c1]")
	routes, err := s.QueuedRoutes(ctx)
	sort.Strings(routes)
	if err != nil || fmt.Sprint(routes) != "[acme globex]" {
		t.Fatalf("QueuedRoutes = %v, %v; want [acme globex]: acme has only waiting messages left", routes, err)
	}
	if g := claim(t, s, base, courier.RouteQuota{Route: "globex", Limit: 10}); ids(g) != "[g1]" {
		t.Fatalf("globex claimed %s, want [g1]", ids(g))
	}
	claimWant(t, s, base.Add(time.Hour), "[]")

	finish(t, s, byID(got, "a1"), courier.StateDelivered, false, base.Add(time.Second))
	if m := mustGet(t, s, "a2"); m.Waiting() || !m.NextAttemptAt.Equal(base.Add(time.Second)) {
		t.Fatalf("a2 after a1 was delivered: next %v, want due at the time a1 was", m.NextAttemptAt)
	}
	got = claimWant(t, s, base.Add(time.Second), "[a2]")
	// A retry keeps the key: a2 is due again later, a3 still waits.
	retry := *got[0]
	retry.State, retry.Attempts, retry.NextAttemptAt, retry.LeaseUntil = courier.StateQueued, 1, base.Add(time.Minute), time.Time{}
	MustApply(t, s, courier.Change{Message: &retry, From: courier.StateInflight, Token: got[0].TotalAttempts})
	claimWant(t, s, base.Add(30*time.Second), "[]")
	got = claimWant(t, s, base.Add(time.Minute), "[a2]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(time.Minute))
	got = claimWant(t, s, base.Add(time.Minute), "[a3]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(time.Minute))
	if _, err := s.KeyHolder(ctx, "acme", "k"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("KeyHolder of a key with nothing left: %v, want not_found", err)
	}
	// A key whose messages are all done starts afresh.
	mustIngest(t, s, keyed("a4", "acme", "k"))
	claimWant(t, s, base.Add(time.Minute), "[a4]")
}

// testOrderingBlock: a suspended message blocks the younger messages of
// its key until it is resubmitted (and delivered) or discarded; the older
// ones go on.
func testOrderingBlock(t *testing.T, s courier.Store) {
	// The subtests share the store, each on routes of its own.
	t.Run("HeadBlocks", func(t *testing.T) {
		ctx := context.Background()
		mustIngest(t, s, keyed("a1", "acme", "k"), keyed("a2", "acme", "k"), keyed("b1", "acme", "l"))
		got := claimWant(t, s, base, "[a1 b1]")
		finish(t, s, byID(got, "a1"), courier.StateSuspended, false, base)
		finish(t, s, byID(got, "b1"), courier.StateDelivered, false, base)
		claimWant(t, s, base.Add(time.Hour), "[]")
		h, err := s.KeyHolder(ctx, "acme", "k")
		if err != nil || h.ID != "a1" || !h.HoldsKey() {
			t.Fatalf("KeyHolder = %+v, %v; want the suspended a1", h, err)
		}

		if _, err := s.Resubmit(ctx, "a1", "", courier.Action{At: base.Add(time.Minute), Who: "ops"}); err != nil {
			t.Fatal(err)
		}
		got = claimWant(t, s, base.Add(time.Minute), "[a1]")
		finish(t, s, got[0], courier.StateSuspended, false, base.Add(time.Minute))
		claimWant(t, s, base.Add(time.Hour), "[]")

		if _, err := s.Discard(ctx, "a1", courier.Action{At: base.Add(2 * time.Minute), Who: "ops"}); err != nil {
			t.Fatal(err)
		}
		claimWant(t, s, base.Add(2*time.Minute), "[a2]")
	})
	t.Run("OlderGoesOn", func(t *testing.T) { testOrderingOlderGoesOn(t, s) })
}

// testOrderingOlderGoesOn: a message that joins a key's group on another
// route waits behind the active one even though it is older; when that one
// is suspended, the older message goes on, and the younger ones wait.
func testOrderingOlderGoesOn(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustCreate(t, s, keyed("y", "b-other", "k"))
	mustCreate(t, s, keyed("x1", "b-main", "k"), keyed("x2", "b-main", "k"))
	got := claimOn(t, s, "b-other", base, "[y]")
	finish(t, s, got[0], courier.StateSuspended, false, base)
	if m := mustResubmit(t, s, "y", "b-main", base.Add(time.Minute)); !m.Waiting() || m.OrderSkipped {
		t.Fatalf("y resubmitted to b-main beside x1 due: %+v; want waiting in the order of b-main", m)
	}
	wantHolder(t, s, "b-main", "k", "x1")
	got = claimOn(t, s, "b-main", base.Add(time.Minute), "[x1]")
	finish(t, s, got[0], courier.StateSuspended, false, base.Add(2*time.Minute))
	// x1 blocks x2, younger than it, not y.
	got = claimOn(t, s, "b-main", base.Add(2*time.Minute), "[y]")
	wantHolder(t, s, "b-main", "k", "y")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(3*time.Minute))
	claimOn(t, s, "b-main", base.Add(time.Hour), "[]")
	wantHolder(t, s, "b-main", "k", "x1")
	if m := mustGet(t, s, "x2"); !m.Waiting() {
		t.Fatalf("x2 behind the suspended x1: %+v, want waiting", m)
	}
	if _, err := s.Discard(ctx, "x1", courier.Action{At: base.Add(4 * time.Minute), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	claimOn(t, s, "b-main", base.Add(4*time.Minute), "[x2]")
}

// testOrderingSkip: a message suspended with OrderSkipped lets its key go
// on; resubmitted, it is delivered on its own and stays marked. A message
// ingested suspended and out of the order blocks nothing.
func testOrderingSkip(t *testing.T, s courier.Store) {
	t.Run("Resubmit", func(t *testing.T) {
		ctx := context.Background()
		mustIngest(t, s, keyed("a1", "acme", "k"), keyed("a2", "acme", "k"), keyed("a3", "acme", "k"))
		got := claimWant(t, s, base, "[a1]")
		finish(t, s, got[0], courier.StateSuspended, true, base)
		if m := mustGet(t, s, "a1"); !m.OrderSkipped || m.HoldsKey() {
			t.Fatalf("a1 after a skip: %+v", m)
		}
		claimWant(t, s, base, "[a2]")
		m, err := s.Resubmit(ctx, "a1", "", courier.Action{At: base.Add(time.Minute), Who: "ops"})
		if err != nil || !m.OrderSkipped {
			t.Fatalf("resubmit of a skipped message: %+v, %v; want it still marked", m, err)
		}
		// It does not wait behind a2 (in flight) nor a3: order is already lost.
		claimWant(t, s, base.Add(time.Minute), "[a1]")
	})
	t.Run("IngestedSuspended", func(t *testing.T) { testOrderingIngestedSkipped(t, s) })
}

// testOrderingIngestedSkipped: an item that a receive location could not
// use is ingested suspended and out of its key's order; it holds up none
// of its key's messages.
func testOrderingIngestedSkipped(t *testing.T, s courier.Store) {
	const route = "s-ingest"
	bad := keyed("i1", route, "k")
	bad.State, bad.Reason, bad.LastError, bad.OrderSkipped = courier.StateSuspended, courier.ReasonInvalid, "no route header", true
	bad.NextAttemptAt, bad.TimerAt, bad.FinishedAt = time.Time{}, time.Time{}, base
	mustCreate(t, s, bad)
	if m := mustGet(t, s, "i1"); !m.OrderSkipped || m.HoldsKey() {
		t.Fatalf("i1 ingested out of its key's order: %+v", m)
	}
	mustCreate(t, s, keyed("i2", route, "k"))
	claimOn(t, s, route, base, "[i2]")
}

// testOrderingTimers: the timers of a message that waits for its key.
func testOrderingTimers(t *testing.T, s courier.Store) {
	t.Run("Stale", func(t *testing.T) { testOrderingStaleTimer(t, s) })
	t.Run("ExpiredWhileWaiting", func(t *testing.T) { testOrderingExpiredWhileWaiting(t, s) })
	t.Run("RoundBeginsOnPromotion", func(t *testing.T) { testOrderingRoundBeginsOnPromotion(t, s) })
}

// testOrderingStaleTimer: a change to queued without a due time (a timer
// of a waiting message) leaves the message waiting, or due if it was
// promoted since it was read, with the round its promotion began.
func testOrderingStaleTimer(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustIngest(t, s, keyed("a1", "acme", "k"), keyed("a2", "acme", "k"))
	stale := mustGet(t, s, "a2")
	timer := func() bool {
		n := *stale
		n.Escalated++
		n.UpdatedAt = base.Add(time.Second)
		applied, err := s.Apply(ctx, []courier.Change{{Message: &n, From: courier.StateQueued, Token: stale.TotalAttempts}})
		if err != nil {
			t.Fatal(err)
		}
		return applied[0]
	}
	if !timer() {
		t.Fatal("the timer change of a waiting message did not apply")
	}
	if m := mustGet(t, s, "a2"); !m.Waiting() || m.Escalated != 1 {
		t.Fatalf("a2 after its timer: waiting %v escalated %d", m.Waiting(), m.Escalated)
	}
	got := claimWant(t, s, base, "[a1]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(time.Second))
	if !timer() {
		t.Fatal("the stale timer change did not apply")
	}
	m := mustGet(t, s, "a2")
	if m.Waiting() {
		t.Fatal("a stale timer change made a promoted message wait again: its key would be stuck")
	}
	if at := base.Add(time.Second); !m.RoundStartedAt.Equal(at) || !m.TimerAt.Equal(at) {
		t.Fatalf("a2 after a stale timer change: round started %v, timer %v; want both at its promotion %v",
			m.RoundStartedAt, m.TimerAt, at)
	}
	claimWant(t, s, base.Add(time.Second), "[a2]")
}

// testOrderingExpiredWhileWaiting: a waiting message whose expires_at
// passes is suspended and leaves its key's order (even on a route that
// blocks): the messages older than it go on, and so do the younger ones.
func testOrderingExpiredWhileWaiting(t *testing.T, s courier.Store) {
	const route = "t-expiry"
	e3 := keyed("e3", route, "k")
	e3.ExpiresAt = base.Add(10 * time.Minute)
	courier.Accept(e3, courier.DefaultPolicy(), true, base)
	mustCreate(t, s, keyed("e1", route, "k"), keyed("e2", route, "k"), e3, keyed("e4", route, "k"))
	got := claimOn(t, s, route, base, "[e1]")
	fireTimers(t, s, blockRoute(route), base.Add(11*time.Minute), defaultPolicy)
	if m := mustGet(t, s, "e3"); m.State != courier.StateSuspended || m.Reason != courier.ReasonExpired || !m.OrderSkipped || m.HoldsKey() {
		t.Fatalf("e3 expired while waiting: %+v; want suspended, expired, out of its key's order", m)
	}
	if m := mustGet(t, s, "e2"); !m.Waiting() {
		t.Fatalf("e2: %+v, want still waiting behind e1", m)
	}
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(12*time.Minute))
	got = claimOn(t, s, route, base.Add(12*time.Minute), "[e2]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(13*time.Minute))
	claimOn(t, s, route, base.Add(13*time.Minute), "[e4]")
}

// testOrderingRoundBeginsOnPromotion: a message that waits for its key has
// not begun its round: however long its key is blocked, max_age does not
// expire it and the fallback's time does not move it; promoted, it starts
// its round, and its timer is due at once so that the round's timers are
// worked out. The head, resubmitted, goes first.
func testOrderingRoundBeginsOnPromotion(t *testing.T, s courier.Store) {
	const route, vans = "t-round", "t-round-vans"
	mustCreate(t, s, keyed("r1", route, "k"), keyed("r2", route, "k"), keyed("r3", route, "k"))
	got := claimOn(t, s, route, base, "[r1]")
	finish(t, s, got[0], courier.StateSuspended, false, base)
	policy := func(m *courier.Message) *courier.Policy {
		p := courier.DefaultPolicy()
		if m.ID == "r3" {
			p.Fallback = &courier.Fallback{After: 24 * time.Hour, Route: vans}
		}
		return p
	}
	late := base.Add(49 * time.Hour) // past max_age (48h) and the fallback's time (24h)
	fireTimers(t, s, blockRoute(route), late, policy)
	for _, id := range []string{"r2", "r3"} {
		if m := mustGet(t, s, id); !m.Waiting() || m.Route != route || !m.TimerAt.IsZero() {
			t.Fatalf("%s waiting behind the suspended r1 after 49h: %+v; want waiting on %s with no timer", id, m, route)
		}
	}
	claimOn(t, s, vans, late, "[]")

	if m := mustResubmit(t, s, "r1", "", late); m.Waiting() {
		t.Fatalf("r1, the oldest, resubmitted: %+v; want due, not waiting behind younger ones", m)
	}
	got = claimOn(t, s, route, late, "[r1]")
	promoted := late.Add(time.Minute)
	finish(t, s, got[0], courier.StateDelivered, false, promoted)
	m := mustGet(t, s, "r2")
	if !m.NextAttemptAt.Equal(promoted) || !m.RoundStartedAt.Equal(promoted) || !m.TimerAt.Equal(promoted) {
		t.Fatalf("r2 promoted: due %v, round started %v, timer %v; want all at %v", m.NextAttemptAt, m.RoundStartedAt, m.TimerAt, promoted)
	}
	fireTimers(t, s, blockRoute(route), promoted, policy)
	if m := mustGet(t, s, "r2"); m.State != courier.StateQueued || !m.TimerAt.Equal(promoted.Add(48*time.Hour)) {
		t.Fatalf("r2 after its round's timers: %+v; want queued with max_age from its promotion", m)
	}
	got = claimOn(t, s, route, promoted, "[r2]")
	finish(t, s, got[0], courier.StateDelivered, false, promoted.Add(time.Minute))
	claimOn(t, s, route, promoted.Add(time.Minute), "[r3]")
	claimOn(t, s, vans, promoted.Add(time.Minute), "[]")
}

// testOrderingResubmitAll: a key whose messages were all suspended (its
// route was removed) goes on in its order however they are resubmitted;
// a promoted message keeps its deliver_after.
func testOrderingResubmitAll(t *testing.T, s courier.Store) {
	t.Run("AnyOrder", func(t *testing.T) { testOrderingResubmitAnyOrder(t, s) })
	t.Run("HeadOnly", func(t *testing.T) { testOrderingResubmitHeadOnly(t, s) })
}

func testOrderingResubmitAnyOrder(t *testing.T, s courier.Store) {
	ctx := context.Background()
	later := keyed("a3", "acme", "k")
	later.DeliverAfter = base.Add(time.Hour)
	later.NextAttemptAt = later.DeliverAfter
	mustIngest(t, s, keyed("a1", "acme", "k"), keyed("a2", "acme", "k"), later)
	if n, err := s.SuspendRoute(ctx, "acme", courier.ReasonNoRoute, "route acme was removed", base); err != nil || n != 3 {
		t.Fatalf("SuspendRoute: %d %v", n, err)
	}
	for _, id := range []string{"a3", "a1", "a2"} {
		mustResubmit(t, s, id, "", base.Add(time.Minute))
	}
	got := claimWant(t, s, base.Add(time.Minute), "[a1]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(time.Minute))
	got = claimWant(t, s, base.Add(time.Minute), "[a2]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(2*time.Minute))
	if m := mustGet(t, s, "a3"); !m.NextAttemptAt.Equal(base.Add(time.Hour)) {
		t.Fatalf("a3 promoted due at %v, want its deliver_after %v", m.NextAttemptAt, base.Add(time.Hour))
	}
	claimWant(t, s, base.Add(30*time.Minute), "[]")
	claimWant(t, s, base.Add(time.Hour), "[a3]")
}

// testOrderingResubmitHeadOnly: of a key whose messages were all suspended,
// the oldest, resubmitted alone, goes on: the younger suspended ones do not
// hold it back. A younger one resubmitted waits behind an older one still
// suspended.
func testOrderingResubmitHeadOnly(t *testing.T, s courier.Store) {
	ctx := context.Background()
	const route = "r-head"
	mustCreate(t, s, keyed("h1", route, "k"), keyed("h2", route, "k"), keyed("h3", route, "k"))
	if n, err := s.SuspendRoute(ctx, route, courier.ReasonNoRoute, "route was removed", base); err != nil || n != 3 {
		t.Fatalf("SuspendRoute: %d %v", n, err)
	}
	if m := mustResubmit(t, s, "h1", "", base.Add(time.Minute)); m.Waiting() {
		t.Fatalf("h1 resubmitted: %+v; want due", m)
	}
	got := claimOn(t, s, route, base.Add(time.Minute), "[h1]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(time.Minute))
	claimOn(t, s, route, base.Add(time.Hour), "[]")
	if m := mustResubmit(t, s, "h3", "", base.Add(2*time.Minute)); !m.Waiting() {
		t.Fatalf("h3 resubmitted while h2 is suspended: %+v; want waiting", m)
	}
	wantHolder(t, s, route, "k", "h2")
	claimOn(t, s, route, base.Add(time.Hour), "[]")
	mustResubmit(t, s, "h2", "", base.Add(3*time.Minute))
	got = claimOn(t, s, route, base.Add(3*time.Minute), "[h2]")
	finish(t, s, got[0], courier.StateDelivered, false, base.Add(4*time.Minute))
	claimOn(t, s, route, base.Add(4*time.Minute), "[h3]")
}

// testOrderingLeaveRoute: a message that moves to another route (resubmit
// to another route, or a fallback) leaves its key's order on the first and
// joins its key's order on the other: one at a time there too.
func testOrderingLeaveRoute(t *testing.T, s courier.Store) {
	t.Run("ResubmitAndFallBack", func(t *testing.T) { testOrderingMoveRoute(t, s) })
	t.Run("RemovedRoute", func(t *testing.T) { testOrderingRemovedRoute(t, s) })
}

func testOrderingMoveRoute(t *testing.T, s courier.Store) {
	mustCreate(t, s, keyed("a1", "acme", "k"), keyed("a2", "acme", "k"), keyed("a3", "acme", "k"), keyed("g1", "globex", "k"))
	got := claimWant(t, s, base, "[a1]")
	finish(t, s, got[0], courier.StateSuspended, false, base)
	m := mustResubmit(t, s, "a1", "globex", base.Add(time.Minute))
	if m.OrderSkipped || m.Route != "globex" || !m.Waiting() {
		t.Fatalf("resubmit to another route: %+v; want waiting behind g1 on globex", m)
	}
	got = claimWant(t, s, base.Add(time.Minute), "[a2]")
	// On globex a1 goes after g1, not beside it.
	g := claimOn(t, s, "globex", base.Add(time.Minute), "[g1]")
	finish(t, s, g[0], courier.StateDelivered, false, base.Add(time.Minute))
	a1 := claimOn(t, s, "globex", base.Add(time.Minute), "[a1]")
	// A fallback: the decided change moves a2 to globex, where it joins the
	// order of its key behind a1.
	fb := *got[0]
	fb.State, fb.Route, fb.FallbackFrom, fb.OrderSkipped = courier.StateQueued, "globex", "acme", false
	fb.NextAttemptAt, fb.LeaseUntil, fb.UpdatedAt = base.Add(2*time.Minute), time.Time{}, base.Add(2*time.Minute)
	MustApply(t, s, courier.Change{Message: &fb, From: courier.StateInflight, Token: got[0].TotalAttempts})
	if m := mustGet(t, s, "a2"); !m.Waiting() || m.Route != "globex" {
		t.Fatalf("a2 fallen back beside a1 in flight: %+v; want waiting on globex", m)
	}
	claimWant(t, s, base.Add(2*time.Minute), "[a3]")
	claimOn(t, s, "globex", base.Add(2*time.Minute), "[]")
	finish(t, s, a1[0], courier.StateDelivered, false, base.Add(3*time.Minute))
	claimOn(t, s, "globex", base.Add(3*time.Minute), "[a2]")
}

// testOrderingRemovedRoute: the messages of a key on a removed route,
// resubmitted to the route that replaces it one after another, are
// delivered there one at a time, in their order.
func testOrderingRemovedRoute(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustCreate(t, s, keyed("b1", "r-old", "k"), keyed("b2", "r-old", "k"), keyed("b3", "r-old", "k"))
	if _, err := s.SuspendRoute(ctx, "r-old", courier.ReasonNoRoute, "route r-old was removed", base); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"b1", "b2", "b3"} {
		mustResubmit(t, s, id, "r-new", base.Add(time.Minute))
	}
	for i, id := range []string{"b1", "b2", "b3"} {
		at := base.Add(time.Duration(i+1) * time.Minute)
		got := claimOn(t, s, "r-new", at, "["+id+"]")
		finish(t, s, got[0], courier.StateDelivered, false, at.Add(time.Minute))
	}
	claimOn(t, s, "r-new", base.Add(time.Hour), "[]")
}

// testOrderingBulk: bulk discards and resubmits keep keys going.
func testOrderingBulk(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustIngest(t, s, keyed("a1", "acme", "k"), keyed("a2", "acme", "k"), keyed("b1", "acme", "l"), keyed("b2", "acme", "l"))
	got := claimWant(t, s, base, "[a1 b1]")
	finish(t, s, byID(got, "a1"), courier.StateSuspended, false, base)
	finish(t, s, byID(got, "b1"), courier.StateSuspended, false, base)
	op, err := s.StartBulk(ctx, courier.BulkOp{ID: "op-1", Kind: courier.ActionDiscard, Who: "ops", CreatedAt: base,
		Filter: courier.MessageFilter{State: courier.StateSuspended, Route: "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	for !op.Done {
		if op, err = s.RunBulk(ctx, op.ID, 1, base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	claimWant(t, s, base.Add(time.Minute), "[a2 b2]")
}

// testOrderingConcurrent: keys stay in order under many changes: from
// concurrent writers and claimers, and from a long run of every kind of
// change.
func testOrderingConcurrent(t *testing.T, s courier.Store) {
	t.Run("Writers", func(t *testing.T) { testOrderingWriters(t, s) })
	t.Run("RandomChanges", func(t *testing.T) { testOrderingRandomChanges(t, s) })
}

// testOrderingWriters: with several writers ingesting one key and several
// claimers, no two messages of a key are ever in flight together, and each
// writer's messages of a key are delivered in the order it ingested them.
func testOrderingWriters(t *testing.T, s courier.Store) {
	ctx := context.Background()
	const writers, keys, perKey, claimers = 4, 5, 15, 3
	total := writers * keys * perKey
	var wg sync.WaitGroup
	errs := make(chan error, writers+claimers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perKey; i++ {
				batch := make([]*courier.Message, 0, keys)
				for k := 0; k < keys; k++ {
					batch = append(batch, keyed(fmt.Sprintf("w%d-k%d-%03d", w, k, i), "acme", fmt.Sprintf("k%d", k)))
				}
				if _, err := s.Ingest(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var mu sync.Mutex
	inflight := map[string]string{}    // key → the message in flight
	delivered := map[string][]string{} // key → ids in delivery order
	seen := map[string]bool{}          // ids delivered
	deadline := time.Now().Add(time.Minute)
	for c := 0; c < claimers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := len(seen) == total
				mu.Unlock()
				if done {
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("only %d of %d delivered within a minute", len(seen), total)
					return
				}
				now := time.Now()
				got, err := s.ClaimDue(ctx, courier.Claim{Now: now, LeaseUntil: now.Add(time.Hour), Owner: fmt.Sprint("c", c),
					Routes: []courier.RouteQuota{{Route: "acme", Limit: 4}}})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					time.Sleep(2 * time.Millisecond)
				}
				for _, m := range got {
					mu.Lock()
					if other, ok := inflight[m.OrderingKey]; ok {
						mu.Unlock()
						errs <- fmt.Errorf("%s and %s of key %s were in flight together", other, m.ID, m.OrderingKey)
						return
					}
					inflight[m.OrderingKey] = m.ID
					mu.Unlock()
				}
				for _, m := range got {
					mu.Lock()
					delete(inflight, m.OrderingKey)
					delivered[m.OrderingKey] = append(delivered[m.OrderingKey], m.ID)
					if seen[m.ID] {
						mu.Unlock()
						errs <- fmt.Errorf("%s delivered twice", m.ID)
						return
					}
					seen[m.ID] = true
					mu.Unlock()
					n := *m
					n.State, n.LeaseUntil, n.FinishedAt, n.UpdatedAt = courier.StateDelivered, time.Time{}, time.Now(), time.Now()
					if _, err := s.Apply(ctx, []courier.Change{{Message: &n, From: courier.StateInflight, Token: m.TotalAttempts}}); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	waitNoError(t, &wg, errs)
	for key, order := range delivered {
		last := map[string]string{}
		for _, id := range order {
			var w, k, i int
			fmt.Sscanf(id, "w%d-k%d-%d", &w, &k, &i)
			writer := fmt.Sprint(w)
			if prev := last[writer]; prev > id {
				t.Fatalf("key %s: %s delivered after %s, out of the order writer %s ingested them", key, id, prev, writer)
			}
			last[writer] = id
		}
	}
}

// testOrderingRandomChanges: a seeded run of every kind of change that the
// engine and operators make (ingest, claims, outcomes and timers decided by
// the root package, fallbacks, resubmits to the same or another route,
// discards, a removed route) keeps every key's groups sound after each
// step (see checkGroups); at the end, with the suspended messages
// discarded, every other message is delivered: no key is stuck.
func testOrderingRandomChanges(t *testing.T, s courier.Store) {
	ctx := context.Background()
	rnd := rand.New(rand.NewPCG(1, 2))
	routes := map[string]*courier.Route{
		"q-block":    {Name: "q-block", OrderedOnFailure: courier.OrderedBlock},
		"q-skip":     {Name: "q-skip", OrderedOnFailure: courier.OrderedSkip},
		"q-fallback": {Name: "q-fallback", OrderedOnFailure: courier.OrderedBlock},
	}
	names := []string{"q-block", "q-skip", "q-fallback"}
	quotas := []courier.RouteQuota{{Route: "q-block", Limit: 100}, {Route: "q-skip", Limit: 100}, {Route: "q-fallback", Limit: 100}}
	p := courier.DefaultPolicy()
	p.MaxAttempts, p.MaxAge = 3, 40*time.Minute
	p.Backoff = courier.Backoff{Initial: time.Minute, Factor: 1, Max: time.Minute}
	p.Fallback = &courier.Fallback{After: 25 * time.Minute, Route: "q-fallback"}
	policy := func(*courier.Message) *courier.Policy { return p }
	endpoint := &courier.Endpoint{Name: "e"}
	results := []courier.Result{{}, {}, {Class: courier.ClassHTTP5xx, Status: 503}, {Class: courier.ClassHTTP4xx, Status: 400}}
	pick := func(state courier.State) *courier.Message {
		page, err := s.Messages(ctx, courier.MessageFilter{State: state, Limit: courier.MaxListLimit})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) == 0 {
			return nil
		}
		return page.Messages[rnd.IntN(len(page.Messages))]
	}
	outcomes := func(inflight []*courier.Message, now time.Time, result func() courier.Result) {
		t.Helper()
		changes := make([]courier.Change, len(inflight))
		for i, m := range inflight {
			next, notices := courier.AfterAttempt(m, p, endpoint, result(), now, 0.5)
			courier.KeepOrder(next, routes[next.Route])
			changes[i] = courier.Change{Message: next, From: courier.StateInflight, Token: m.TotalAttempts, Notices: notices}
		}
		MustApply(t, s, changes...)
	}

	now, n := base, 0
	var inflight []*courier.Message
	for step := 0; step < 300; step++ {
		now = now.Add(time.Minute)
		switch r := rnd.IntN(20); {
		case r < 5:
			var batch []*courier.Message
			for range 1 + rnd.IntN(3) {
				n++
				m := keyed(fmt.Sprintf("q%03d", n), names[rnd.IntN(2)], fmt.Sprintf("k%d", rnd.IntN(3)))
				if rnd.IntN(5) == 0 {
					m.ExpiresAt = now.Add(time.Duration(5+rnd.IntN(30)) * time.Minute)
				}
				courier.Accept(m, p, true, now)
				batch = append(batch, m)
			}
			mustCreate(t, s, batch...)
		case r < 9:
			inflight = append(inflight, claim(t, s, now, quotas...)...)
		case r < 13:
			outcomes(inflight, now, func() courier.Result { return results[rnd.IntN(len(results))] })
			inflight = nil
		case r < 15:
			for _, r := range routes {
				fireTimers(t, s, r, now, policy)
			}
		case r < 18:
			if m := pick(courier.StateSuspended); m != nil {
				mustResubmit(t, s, m.ID, []string{"", "", names[rnd.IntN(len(names))]}[rnd.IntN(3)], now)
			}
		case r < 19:
			if m := pick(courier.StateQueued); m != nil {
				if _, err := s.Discard(ctx, m.ID, courier.Action{At: now, Who: "ops"}); err != nil {
					t.Fatal(err)
				}
			}
		default:
			if _, err := s.SuspendRoute(ctx, names[rnd.IntN(len(names))], courier.ReasonNoRoute, "removed", now); err != nil {
				t.Fatal(err)
			}
		}
		checkGroups(t, s, fmt.Sprintf("step %d", step))
	}

	delivered := func() courier.Result { return courier.Result{} }
	for round := 0; ; round++ {
		now = now.Add(time.Minute)
		outcomes(inflight, now, delivered)
		for m := pick(courier.StateSuspended); m != nil; m = pick(courier.StateSuspended) {
			if _, err := s.Discard(ctx, m.ID, courier.Action{At: now, Who: "ops"}); err != nil {
				t.Fatal(err)
			}
		}
		checkGroups(t, s, fmt.Sprintf("drain %d", round))
		if inflight = claim(t, s, now, quotas...); len(inflight) > 0 {
			continue
		}
		if m := pick(courier.StateQueued); m != nil {
			t.Fatalf("%s is queued (waiting %v) and nothing is claimable: its key is stuck", m.ID, m.Waiting())
		}
		t.Logf("%d messages; drained in %d rounds", n, round)
		return
	}
}

// checkGroups checks every group of a key on a route (its messages that
// are queued, in flight or suspended and have not left its order): at
// most one is claimable or in flight, and when none is, the oldest waiting
// one has an older suspended one before it.
func checkGroups(t *testing.T, s courier.Store, when string) {
	t.Helper()
	page, err := s.Messages(context.Background(), courier.MessageFilter{Limit: courier.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	if page.Next != "" {
		t.Fatal("checkGroups reads one page of messages: too many")
	}
	type group struct {
		active          []string
		waiting         string // the oldest
		suspendedBefore bool   // a suspended message older than waiting
	}
	groups := map[[2]string]*group{}
	for i := len(page.Messages) - 1; i >= 0; i-- { // oldest first
		m := page.Messages[i]
		if m.OrderingKey == "" || m.OrderSkipped {
			continue
		}
		g := groups[[2]string{m.Route, m.OrderingKey}]
		if g == nil {
			g = &group{}
			groups[[2]string{m.Route, m.OrderingKey}] = g
		}
		switch {
		case m.State == courier.StateInflight || m.State == courier.StateQueued && !m.Waiting():
			g.active = append(g.active, m.ID)
		case m.State == courier.StateSuspended && g.waiting == "":
			g.suspendedBefore = true
		case m.Waiting() && g.waiting == "":
			g.waiting = m.ID
		}
	}
	for rk, g := range groups {
		if len(g.active) > 1 {
			t.Fatalf("%s: route %s key %s: %v are claimable or in flight together", when, rk[0], rk[1], g.active)
		}
		if len(g.active) == 0 && g.waiting != "" && !g.suspendedBefore {
			t.Fatalf("%s: route %s key %s: %s waits, but nothing older is suspended and nothing is claimable", when, rk[0], rk[1], g.waiting)
		}
	}
}

// Ingest tells the sender what it stored: a message behind an earlier one
// of its key comes back without a due time, as a read shows it; the first,
// and a message of another key, come back due.
func testOrderingIngestSaysWaiting(t *testing.T, s courier.Store) {
	var msgs []*courier.Message
	for _, id := range []string{"k-1", "k-2", "other"} {
		key := "k"
		if id == "other" {
			key = "j"
		}
		m := &courier.Message{ID: id, Type: "t", Route: "acme", Payload: []byte(id), ContentType: "text/plain", OrderingKey: key}
		courier.Accept(m, courier.DefaultPolicy(), true, base)
		msgs = append(msgs, m)
	}
	mustIngest(t, s, msgs[0])
	mustIngest(t, s, msgs[1:]...)
	for _, m := range msgs {
		stored := mustGet(t, s, m.ID)
		if m.Waiting() != stored.Waiting() || !m.NextAttemptAt.Equal(stored.NextAttemptAt) {
			t.Errorf("%s: ingest left next attempt %v (waiting %v), stored %v (waiting %v)",
				m.ID, m.NextAttemptAt, m.Waiting(), stored.NextAttemptAt, stored.Waiting())
		}
	}
	if !msgs[1].Waiting() || msgs[0].Waiting() || msgs[2].Waiting() {
		t.Errorf("waiting after ingest: k-1 %v, k-2 %v, other %v; want only k-2", msgs[0].Waiting(), msgs[1].Waiting(), msgs[2].Waiting())
	}
}
