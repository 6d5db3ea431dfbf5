package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func testHealth(t *testing.T, s courier.Store) {
	ctx := context.Background()
	if hs, err := s.Health(ctx); err != nil || len(hs) != 0 {
		t.Fatalf("health of a new store: %+v %v", hs, err)
	}
	var seen courier.EndpointHealth
	suspend := func(h courier.EndpointHealth) courier.EndpointHealth {
		seen = h
		h.State, h.Suspensions, h.SuspendedUntil, h.ProbeUntil, h.UpdatedAt = courier.HealthSuspended, h.Suspensions+1,
			base.Add(time.Minute), base.Add(30*time.Second), base
		return h
	}
	got, err := s.UpdateHealth(ctx, "acme", suspend, nil)
	if err != nil || got.State != courier.HealthSuspended || got.Suspensions != 1 {
		t.Fatalf("first update: %+v %v", got, err)
	}
	if seen.State != courier.HealthActive || seen.Endpoint != "acme" {
		t.Errorf("an endpoint without a row starts as %+v, want active", seen)
	}
	if _, err := s.UpdateHealth(ctx, "acme", suspend, nil); err != nil {
		t.Fatal(err)
	}
	if seen.Suspensions != 1 || !seen.SuspendedUntil.Equal(base.Add(time.Minute)) || !seen.ProbeUntil.Equal(base.Add(30*time.Second)) {
		t.Errorf("the second update saw %+v, want what the first stored", seen)
	}
	off := &courier.Action{At: base, Who: "ops", Kind: courier.ActionEndpointOff, Subject: "globex"}
	if _, err := s.UpdateHealth(ctx, "globex", func(h courier.EndpointHealth) courier.EndpointHealth { return h.SwitchedOff(base) }, off); err != nil {
		t.Fatal(err)
	}
	hs, err := s.Health(ctx)
	if err != nil || len(hs) != 2 {
		t.Fatalf("health: %+v %v", hs, err)
	}
	if hs[0].Endpoint != "acme" || hs[0].Suspensions != 2 || hs[1].Endpoint != "globex" || hs[1].State != courier.HealthOff {
		t.Errorf("health: %+v", hs)
	}
	actions, err := s.Actions(ctx, "globex")
	if err != nil || len(actions) != 1 || actions[0].Kind != courier.ActionEndpointOff || actions[0].Who != "ops" {
		t.Errorf("switch action: %+v %v", actions, err)
	}
}

func testCountQueued(t *testing.T, s courier.Store) {
	ctx := context.Background()
	for i, route := range []string{"a", "a", "b", "c"} {
		queuedAt(t, s, fmt.Sprintf("m-%d", i), route, i%3, base)
	}
	suspendedMsg(t, s, "s", "t") // route acme, not queued
	for _, tt := range []struct {
		routes []string
		want   int
	}{{[]string{"a"}, 2}, {[]string{"a", "b"}, 3}, {[]string{"acme"}, 0}, {nil, 0}} {
		if got, err := s.CountQueued(ctx, tt.routes); err != nil || got != tt.want {
			t.Errorf("CountQueued(%v) = %d, %v; want %d", tt.routes, got, err, tt.want)
		}
	}
	if _, err := s.ClaimDue(ctx, courier.Claim{Now: base, LeaseUntil: base.Add(time.Minute), Owner: "n",
		Routes: []courier.RouteQuota{{Route: "a", Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.CountQueued(ctx, []string{"a"}); got != 1 {
		t.Errorf("after a claim: %d queued on a, want 1", got)
	}
}

func testSuspendRoute(t *testing.T, s courier.Store) {
	ctx := context.Background()
	queuedAt(t, s, "a-1", "a", 0, base)
	queuedAt(t, s, "a-2", "a", 5, base.Add(time.Hour))
	queuedAt(t, s, "b-1", "b", 0, base)
	if routes, err := s.QueuedRoutes(ctx); err != nil || fmt.Sprint(routes) != "[a b]" {
		t.Fatalf("queued routes: %v %v", routes, err)
	}
	n, err := s.SuspendRoute(ctx, "a", courier.ReasonNoRoute, "route a is no longer configured", base.Add(time.Minute))
	if err != nil || n != 2 {
		t.Fatalf("SuspendRoute: %d %v", n, err)
	}
	m := mustGet(t, s, "a-2")
	if m.State != courier.StateSuspended || m.Reason != courier.ReasonNoRoute || m.LastError != "route a is no longer configured" ||
		!m.NextAttemptAt.IsZero() || !m.FinishedAt.Equal(base.Add(time.Minute)) {
		t.Errorf("suspended for no route: %+v", m)
	}
	if m := mustGet(t, s, "b-1"); m.State != courier.StateQueued {
		t.Errorf("another route's message: %s", m.State)
	}
	if routes, _ := s.QueuedRoutes(ctx); fmt.Sprint(routes) != "[b]" {
		t.Errorf("queued routes after: %v", routes)
	}
}

// testResolvedHealthForgotten: the health of a resolved endpoint is kept
// while there is something to say about it, and dropped once it is back to
// what no record means, so that a registry's thousands of access points do
// not each leave a row for every claim round to read.
func testResolvedHealthForgotten(t *testing.T, s courier.Store) {
	ctx := context.Background()
	name := courier.ResolvedEndpointPrefix + "https://ap.example/as4"
	now := time.Now().Truncate(time.Microsecond)
	has := func() (courier.EndpointHealth, bool) {
		t.Helper()
		hs, err := s.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range hs {
			if h.Endpoint == name {
				return h, true
			}
		}
		return courier.EndpointHealth{}, false
	}
	got, err := s.UpdateHealth(ctx, name, func(h courier.EndpointHealth) courier.EndpointHealth {
		h.State, h.Failures, h.Suspensions, h.SuspendedUntil, h.UpdatedAt = courier.HealthSuspended, 1, 1, now.Add(time.Minute), now
		return h
	}, nil)
	if err != nil || got.State != courier.HealthSuspended {
		t.Fatalf("suspend: %+v, %v", got, err)
	}
	if h, ok := has(); !ok || h.State != courier.HealthSuspended {
		t.Fatalf("a suspended resolved endpoint is not kept: %+v %v", h, ok)
	}
	got, err = s.UpdateHealth(ctx, name, func(h courier.EndpointHealth) courier.EndpointHealth {
		if h.State != courier.HealthSuspended {
			t.Errorf("read back %+v", h)
		}
		return courier.EndpointHealth{Endpoint: name, State: courier.HealthActive, UpdatedAt: now}
	}, nil)
	if err != nil || got.State != courier.HealthActive {
		t.Fatalf("recover: %+v, %v", got, err)
	}
	if h, ok := has(); ok {
		t.Fatalf("an active resolved endpoint with nothing counted is kept: %+v", h)
	}
	// A configured endpoint's record stays, whatever it holds.
	if _, err := s.UpdateHealth(ctx, "acme", func(h courier.EndpointHealth) courier.EndpointHealth {
		h.State, h.UpdatedAt = courier.HealthActive, now
		return h
	}, nil); err != nil {
		t.Fatal(err)
	}
	hs, _ := s.Health(ctx)
	found := false
	for _, h := range hs {
		found = found || h.Endpoint == "acme"
	}
	if !found {
		t.Fatal("a configured endpoint's health was dropped")
	}
	t.Run("WhileOthersWait", func(t *testing.T) { testHealthForgottenWhileOthersWait(t, s) })
}

// testHealthForgottenWhileOthersWait: updates of an endpoint's health that
// wait for its row while another node forgets it each start from what the
// one before them left, so that no failure counted is lost. The forgetting
// update holds the row long enough for the others to be waiting for it.
func testHealthForgottenWhileOthersWait(t *testing.T, s courier.Store) {
	ctx := context.Background()
	name := courier.ResolvedEndpointPrefix + "https://ap.example/busy"
	const rounds, waiters = 5, 4
	fail := func(h courier.EndpointHealth) courier.EndpointHealth {
		h.Failures, h.UpdatedAt = h.Failures+1, base
		return h
	}
	for round := range rounds {
		holding := make(chan struct{})
		var once sync.Once
		var wg sync.WaitGroup
		errs := make(chan error, waiters+1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.UpdateHealth(ctx, name, func(courier.EndpointHealth) courier.EndpointHealth {
				once.Do(func() { close(holding) })
				time.Sleep(50 * time.Millisecond)
				return courier.EndpointHealth{Endpoint: name, State: courier.HealthActive, UpdatedAt: base}
			}, nil)
			errs <- err
		}()
		<-holding
		for range waiters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.UpdateHealth(ctx, name, fail, nil)
				errs <- err
			}()
		}
		waitNoError(t, &wg, errs)
		hs, err := s.Health(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, h := range hs {
			if h.Endpoint == name {
				got = h.Failures
			}
		}
		if got != waiters {
			t.Fatalf("round %d: %d failures counted by %d updates that waited for a forget; want %d", round, got, waiters, waiters)
		}
	}
}

// SwitchHealth makes many switches in one call, in order, each with its
// action under the endpoint's name; a switch that leaves its endpoint as
// it is writes and records nothing. Concurrent calls over the same
// endpoints each see the others' changes.
func testSwitchHealth(t *testing.T, s courier.Store) {
	ctx := context.Background()
	if _, err := s.UpdateHealth(ctx, "acme", func(h courier.EndpointHealth) courier.EndpointHealth {
		h.State, h.Suspensions, h.SuspendedUntil, h.UpdatedAt = courier.HealthSuspended, 2, base.Add(time.Minute), base
		return h
	}, nil); err != nil {
		t.Fatal(err)
	}
	off := func(h courier.EndpointHealth) (courier.EndpointHealth, bool) { return h.SwitchedOff(base), true }
	on := func(h courier.EndpointHealth) (courier.EndpointHealth, bool) { return h.SwitchedOn(base), true }
	onlyOff := func(h courier.EndpointHealth) (courier.EndpointHealth, bool) {
		return h.SwitchedOn(base), h.State == courier.HealthOff
	}
	act := func(kind courier.ActionKind) *courier.Action {
		return &courier.Action{At: base, Who: "ops", Kind: kind, Detail: "by filter name_prefix=a"}
	}
	got, err := s.SwitchHealth(ctx, []courier.HealthSwitch{
		{Endpoint: "acme", Next: off, Action: act(courier.ActionEndpointOff)},
		{Endpoint: "globex", Next: off, Action: act(courier.ActionEndpointOff)},
		{Endpoint: "initech", Next: onlyOff, Action: act(courier.ActionEndpointOn)}, // active: left as it is
		{Endpoint: "globex", Next: on, Action: act(courier.ActionEndpointOn)},
	})
	if err != nil || len(got) != 4 {
		t.Fatalf("switch: %+v %v", got, err)
	}
	for i, want := range []struct {
		before, after courier.HealthState
		changed       bool
	}{{courier.HealthSuspended, courier.HealthOff, true}, {courier.HealthActive, courier.HealthOff, true},
		{courier.HealthActive, courier.HealthActive, false}, {courier.HealthOff, courier.HealthActive, true}} {
		if c := got[i]; c.Before.State != want.before || c.After.State != want.after || c.Changed != want.changed {
			t.Errorf("switch %d (%s): %s to %s, changed %v; want %s to %s, %v", i, c.Endpoint, c.Before.State, c.After.State, c.Changed,
				want.before, want.after, want.changed)
		}
	}
	if a := got[0].After; a.Suspensions != 2 || !a.SuspendedUntil.Equal(base.Add(time.Minute)) {
		t.Errorf("acme switched off: %+v; want its suspensions kept", a)
	}
	hs, err := s.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]courier.HealthState{}
	for _, h := range hs {
		states[h.Endpoint] = h.State
	}
	if states["acme"] != courier.HealthOff || states["globex"] != courier.HealthActive || states["initech"] == courier.HealthOff {
		t.Errorf("stored states %v; want acme off, globex active", states)
	}
	for name, want := range map[string][]courier.ActionKind{"acme": {courier.ActionEndpointOff},
		"globex": {courier.ActionEndpointOff, courier.ActionEndpointOn}, "initech": nil} {
		actions, err := s.Actions(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		var kinds []courier.ActionKind
		for _, a := range actions {
			kinds = append(kinds, a.Kind)
			if a.Who != "ops" || a.Detail != "by filter name_prefix=a" || a.Subject != name {
				t.Errorf("action on %s: %+v", name, a)
			}
		}
		if fmt.Sprint(kinds) != fmt.Sprint(want) {
			t.Errorf("actions on %s: %v, want %v", name, kinds, want)
		}
	}

	// Many at once, from many callers, over the same endpoints in
	// different orders: every switch is made, none is lost.
	const callers, endpoints = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var sw []courier.HealthSwitch
			for i := range endpoints {
				n := i
				if c%2 == 1 {
					n = endpoints - 1 - i
				}
				sw = append(sw, courier.HealthSwitch{Endpoint: fmt.Sprintf("ep-%02d", n), Next: func(h courier.EndpointHealth) (courier.EndpointHealth, bool) {
					h.Failures++ // counts the switches that saw each other
					h.UpdatedAt = base
					return h, true
				}})
			}
			_, err := s.SwitchHealth(ctx, sw)
			errs <- err
		}()
	}
	waitNoError(t, &wg, errs)
	hs, err = s.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hs {
		if len(h.Endpoint) == 5 && h.Endpoint[:3] == "ep-" && h.Failures != callers {
			t.Errorf("%s counted %d switches, want %d", h.Endpoint, h.Failures, callers)
		}
	}
}

// testSuspendRouteOfManyMessages: a route with more queued messages than
// a page of a listing has them all suspended.
func testSuspendRouteOfManyMessages(t *testing.T, s courier.Store) {
	ctx := context.Background()
	const n = courier.MaxListLimit + 5
	msgs := make([]*courier.Message, n)
	for i := range msgs {
		m := &courier.Message{ID: fmt.Sprintf("m-%d", i), Type: "t", Route: "gone", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), true, base)
		msgs[i] = m
	}
	mustIngest(t, s, msgs...)
	got, err := s.SuspendRoute(ctx, "gone", courier.ReasonNoRoute, "route gone was removed", base.Add(time.Minute))
	if err != nil || got != n {
		t.Fatalf("SuspendRoute: %d %v; want %d", got, err, n)
	}
	if routes, err := s.QueuedRoutes(ctx); err != nil || len(routes) != 0 {
		t.Errorf("queued routes after: %v %v; want none", routes, err)
	}
}

// healthByChanges applies the changes to what a reader knows, as a reader
// of HealthChanges does: a Forgettable health drops the endpoint.
func healthByChanges(known map[string]courier.EndpointHealth, changes []courier.EndpointHealth) {
	for _, h := range changes {
		if h.Forgettable() {
			delete(known, h.Endpoint)
		} else {
			known[h.Endpoint] = h
		}
	}
}

// testHealthChanges: a reader of the changes since its last read learns of
// every write (an update, a switch, a forgotten health) and ends knowing
// what Health says; the rows no one wrote since are not read again unless
// a write ran beside the read.
func testHealthChanges(t *testing.T, s courier.Store) {
	ctx := context.Background()
	changes := func(since int64) ([]courier.EndpointHealth, int64) {
		t.Helper()
		hs, next, err := s.HealthChanges(ctx, since)
		if err != nil {
			t.Fatalf("HealthChanges(%d): %v", since, err)
		}
		return hs, next
	}
	names := func(hs []courier.EndpointHealth) map[string]courier.EndpointHealth {
		out := map[string]courier.EndpointHealth{}
		for _, h := range hs {
			out[h.Endpoint] = h
		}
		return out
	}
	hs, cursor := changes(0)
	if len(hs) != 0 {
		t.Fatalf("changes of a new store: %+v", hs)
	}
	resolved := courier.ResolvedEndpointPrefix + "https://ap.example/as4"
	for _, name := range []string{"acme", "globex", resolved} {
		if _, err := s.UpdateHealth(ctx, name, func(h courier.EndpointHealth) courier.EndpointHealth {
			h.State, h.Failures, h.UpdatedAt = courier.HealthTimeout, 1, base
			return h
		}, nil); err != nil {
			t.Fatal(err)
		}
	}
	hs, cursor = changes(cursor)
	if got := names(hs); len(got) != 3 || got["acme"].State != courier.HealthTimeout || got["acme"].Failures != 1 {
		t.Fatalf("changes after three updates: %+v", hs)
	}
	// A switch, and a resolved endpoint's health forgotten.
	if _, err := s.SwitchHealth(ctx, []courier.HealthSwitch{{Endpoint: "globex", Next: func(h courier.EndpointHealth) (courier.EndpointHealth, bool) {
		return h.SwitchedOff(base), true
	}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateHealth(ctx, resolved, func(h courier.EndpointHealth) courier.EndpointHealth {
		return h.SwitchedOn(base)
	}, nil); err != nil {
		t.Fatal(err)
	}
	hs, cursor = changes(cursor)
	got := names(hs)
	if got["globex"].State != courier.HealthOff {
		t.Errorf("changes after a switch off: %+v; want globex off", hs)
	}
	if h, ok := got[resolved]; !ok || !h.Forgettable() {
		t.Errorf("changes after %s was forgotten: %+v; want it, forgettable", resolved, hs)
	}
	all, err := s.Health(ctx)
	if err != nil || len(all) != 2 {
		t.Fatalf("health after the forgetting: %+v %v; want acme and globex", all, err)
	}
	// A forgotten health starts again from active.
	if _, err := s.UpdateHealth(ctx, resolved, func(h courier.EndpointHealth) courier.EndpointHealth {
		if h.State != courier.HealthActive || h.Failures != 0 {
			t.Errorf("a forgotten health is read as %+v, want active", h)
		}
		h.State, h.Failures, h.UpdatedAt = courier.HealthTimeout, 1, base
		return h
	}, nil); err != nil {
		t.Fatal(err)
	}
	hs, _ = changes(cursor)
	if h := names(hs)[resolved]; h.State != courier.HealthTimeout {
		t.Errorf("changes after the forgotten health came back: %+v", hs)
	}

	// Writers beside a reader: the reader misses none of their writes.
	known := map[string]courier.EndpointHealth{}
	hs, cursor = changes(0)
	healthByChanges(known, hs)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				name := fmt.Sprintf("writer-%d-%d", w, i%5)
				if _, err := s.UpdateHealth(ctx, name, func(h courier.EndpointHealth) courier.EndpointHealth {
					h.State, h.Failures, h.UpdatedAt = courier.HealthTimeout, h.Failures+1, base
					return h
				}, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			select {
			case <-stop:
				return
			default:
			}
			hs, next, err := s.HealthChanges(ctx, cursor)
			if err != nil {
				t.Error(err)
				return
			}
			healthByChanges(known, hs)
			cursor = next
		}
	}()
	wg.Wait()
	close(stop)
	<-read
	hs, _ = changes(cursor)
	healthByChanges(known, hs)
	all, err = s.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(known) != len(all) {
		t.Errorf("the reader knows %d endpoints' health, the store has %d", len(known), len(all))
	}
	for _, h := range all {
		if known[h.Endpoint] != h {
			t.Errorf("the reader knows %+v, the store has %+v", known[h.Endpoint], h)
		}
	}
}
