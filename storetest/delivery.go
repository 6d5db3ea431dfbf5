package storetest

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func claim(t *testing.T, s courier.Store, now time.Time, quotas ...courier.RouteQuota) []*courier.Message {
	t.Helper()
	got, err := s.ClaimDue(context.Background(), courier.Claim{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "node-1", Routes: quotas})
	if err != nil {
		t.Fatalf("ClaimDue: %v", err)
	}
	return got
}

func ids(msgs []*courier.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return fmt.Sprint(out)
}

// listedIDs returns the ids of the messages of the first page that s lists
// for f.
func listedIDs(t *testing.T, s courier.Store, f courier.MessageFilter) []string {
	t.Helper()
	page, err := s.Messages(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page.Messages {
		out = append(out, m.ID)
	}
	return out
}

// queuedAt ingests a message on route, due at due, with a priority.
func queuedAt(t *testing.T, s courier.Store, id, route string, prio int, due time.Time) {
	t.Helper()
	m := &courier.Message{ID: id, Type: "t", Route: route, Payload: []byte(id), ContentType: "text/plain", Priority: prio}
	courier.Accept(m, courier.DefaultPolicy(), true, base)
	m.NextAttemptAt = due
	mustIngest(t, s, m)
}

func testClaimDue(t *testing.T, s courier.Store) {
	queuedAt(t, s, "low-old", "acme", 0, base)
	queuedAt(t, s, "low-new", "acme", 0, base.Add(time.Second))
	queuedAt(t, s, "high", "acme", 9, base.Add(2*time.Second))
	queuedAt(t, s, "mid", "acme", 5, base.Add(time.Second))
	queuedAt(t, s, "future", "acme", 9, base.Add(time.Hour))
	queuedAt(t, s, "other-route", "globex", 9, base)
	now := base.Add(time.Minute)

	got := claim(t, s, now, courier.RouteQuota{Route: "acme", Limit: 3})
	if ids(got) != "[high mid low-old]" {
		t.Fatalf("claimed %s, want [high mid low-old]: priority first, then the longest due", ids(got))
	}
	for _, m := range got {
		if m.State != courier.StateInflight || !m.LeaseUntil.Equal(now.Add(time.Minute)) || m.LeaseOwner != "node-1" || m.TotalAttempts != 1 {
			t.Errorf("claimed %s: state %s lease %v owner %q token %d", m.ID, m.State, m.LeaseUntil, m.LeaseOwner, m.TotalAttempts)
		}
		if string(m.Payload) != m.ID {
			t.Errorf("claimed %s without its payload", m.ID)
		}
	}
	if stored := mustGet(t, s, "high"); stored.State != courier.StateInflight || stored.TotalAttempts != 1 {
		t.Errorf("stored after claim: %s token %d", stored.State, stored.TotalAttempts)
	}
	// What is leased is not claimed again; the future is not claimed; other
	// routes only through their own quota.
	got = claim(t, s, now, courier.RouteQuota{Route: "acme", Limit: 10})
	if ids(got) != "[low-new]" {
		t.Fatalf("second claim %s, want [low-new]", ids(got))
	}
	got = claim(t, s, now, courier.RouteQuota{Route: "acme", Limit: 10}, courier.RouteQuota{Route: "globex", Limit: 0})
	if len(got) != 0 {
		t.Fatalf("third claim %s, want nothing", ids(got))
	}
	got = claim(t, s, base.Add(2*time.Hour), courier.RouteQuota{Route: "acme", Limit: 10}, courier.RouteQuota{Route: "globex", Limit: 10})
	if ids(got) != "[future other-route]" && ids(got) != "[other-route future]" {
		t.Fatalf("later claim %s, want future and other-route", ids(got))
	}
}

func testApply(t *testing.T, s courier.Store) {
	ctx := context.Background()
	queuedAt(t, s, "m", "acme", 0, base)
	claimed := claim(t, s, base, courier.RouteQuota{Route: "acme", Limit: 1})
	if len(claimed) != 1 {
		t.Fatal("nothing claimed")
	}
	m := claimed[0]
	next := *m
	next.State, next.Attempts, next.LastError, next.LastClass = courier.StateQueued, 1, "HTTP 503", courier.ClassHTTP5xx
	next.NextAttemptAt, next.LeaseUntil, next.LeaseOwner, next.Endpoint = base.Add(time.Minute), time.Time{}, "", "acme-primary"
	next.Escalated, next.TimerAt, next.UpdatedAt = 1, base.Add(time.Hour), base.Add(time.Second)
	attempt := &courier.Attempt{MessageID: "m", N: m.TotalAttempts, Endpoint: "acme-primary", Route: "acme", StartedAt: base,
		Duration: 1500 * time.Microsecond, Outcome: courier.OutcomeFailed, Class: courier.ClassHTTP5xx, Status: 503,
		Error: "HTTP 503", Response: "busy"}
	notice := &courier.Message{ID: "m.escalation.1.ops", Type: courier.NoticeType, Route: courier.NoticeRoute("ops"), Payload: []byte("{}"), ContentType: "application/json"}
	courier.Accept(notice, courier.DefaultPolicy(), false, base)

	stale := next
	applied, err := s.Apply(ctx, []courier.Change{
		{Message: &stale, From: courier.StateInflight, Token: m.TotalAttempts + 1, Attempt: attempt}, // a lease that was lost
		{Message: &next, From: courier.StateInflight, Token: m.TotalAttempts, Attempt: attempt, Notices: []*courier.Message{notice}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if applied[0] || !applied[1] {
		t.Fatalf("applied %v, want [false true]: the stale token must change nothing", applied)
	}
	got := mustGet(t, s, "m")
	if got.State != courier.StateQueued || got.Attempts != 1 || got.LastError != "HTTP 503" || got.LastClass != courier.ClassHTTP5xx ||
		!got.NextAttemptAt.Equal(base.Add(time.Minute)) || got.Endpoint != "acme-primary" || got.Escalated != 1 ||
		!got.TimerAt.Equal(base.Add(time.Hour)) || !got.LeaseUntil.IsZero() || got.LeaseOwner != "" || got.TotalAttempts != 1 {
		t.Fatalf("after apply: %+v", got)
	}
	attempts, err := s.Attempts(ctx, "m")
	if err != nil || len(attempts) != 1 {
		t.Fatalf("attempts %+v, %v; want exactly one (the stale change recorded none)", attempts, err)
	}
	if a := attempts[0]; a.N != 1 || a.Outcome != courier.OutcomeFailed || a.Status != 503 || a.Response != "busy" ||
		a.Duration != 1500*time.Microsecond || !a.StartedAt.Equal(base) || a.Class != courier.ClassHTTP5xx {
		t.Errorf("attempt %+v", a)
	}
	if n := mustGet(t, s, notice.ID); n.Type != courier.NoticeType || n.State != courier.StateQueued {
		t.Errorf("notice stored as %+v", n)
	}

	// Applying the same change again (as after a crash) does nothing twice.
	applied, err = s.Apply(ctx, []courier.Change{{Message: &next, From: courier.StateInflight, Token: m.TotalAttempts, Attempt: attempt}})
	if err != nil || applied[0] {
		t.Fatalf("repeat apply: %v %v", applied, err)
	}

	// Delivered: terminal, with its finish time, ready for retention.
	claimed = claim(t, s, base.Add(time.Hour), courier.RouteQuota{Route: "acme", Limit: 1})
	if len(claimed) != 1 || claimed[0].TotalAttempts != 2 {
		t.Fatalf("second claim: %v", ids(claimed))
	}
	done := *claimed[0]
	done.State, done.FinishedAt, done.NextAttemptAt, done.TimerAt = courier.StateDelivered, base.Add(time.Hour), time.Time{}, time.Time{}
	MustApply(t, s, courier.Change{Message: &done, From: courier.StateInflight, Token: 2,
		Attempt: &courier.Attempt{N: 2, Endpoint: "e", Route: "acme", StartedAt: base.Add(time.Hour), Outcome: courier.OutcomeDelivered, Status: 204}})
	if n, err := s.Purge(ctx, courier.Purge{Before: base.Add(2 * time.Hour)}, 10); err != nil || n != 1 {
		t.Fatalf("purge of the delivered message: %d %v", n, err)
	}
}

// testDeliveryWritesWhatTheChangeDoes: a Delivery (a change that knows
// the message as leased), which a store may write with fewer columns,
// leaves the message and its attempts as the same change written whole
// does. The messages have been through a failed attempt and an
// escalation first, so that what a delivery keeps (the last error, the
// escalations, the round) is not all zero; one is a delivery of a
// published message.
func testDeliveryWritesWhatTheChangeDoes(t *testing.T, s courier.Store) {
	ctx := context.Background()
	top := &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme"}},
		Subscriptions: map[string]*courier.Subscription{"audit": {Name: "audit", Types: []string{"t"}, Route: "acme"}}}
	top.Prepare()
	for _, id := range []string{"whole", "narrow"} {
		queuedAt(t, s, id, "acme", 3, base)
		mustIngest(t, s, published(t, top, id+"-pub", "t", `"x"`, nil, base)...)
	}
	// A failed attempt and an escalation for each.
	first := claim(t, s, base, courier.RouteQuota{Route: "acme", Limit: 10})
	if len(first) != 4 {
		t.Fatalf("claimed %s, want four", ids(first))
	}
	var failed []courier.Change
	for _, m := range first {
		next := *m
		next.State, next.Attempts, next.LastError, next.LastClass = courier.StateQueued, 1, "HTTP 503", courier.ClassHTTP5xx
		next.NextAttemptAt, next.LeaseUntil, next.LeaseOwner, next.Endpoint = base.Add(time.Minute), time.Time{}, "", "acme-primary"
		next.Escalated, next.TimerAt, next.UpdatedAt = 1, base.Add(time.Hour), base.Add(time.Second)
		failed = append(failed, courier.Change{Message: &next, From: courier.StateInflight, Token: m.TotalAttempts,
			Attempt: &courier.Attempt{MessageID: m.ID, Subscription: m.Subscription, N: m.TotalAttempts, Endpoint: "acme-primary",
				Route: "acme", StartedAt: base, Outcome: courier.OutcomeFailed, Class: courier.ClassHTTP5xx, Status: 503, Error: "HTTP 503"}})
	}
	MustApply(t, s, failed...)

	// Delivered at the second attempt: half the changes know the message
	// as leased, half do not.
	at := base.Add(2 * time.Minute)
	second := claim(t, s, at, courier.RouteQuota{Route: "acme", Limit: 10})
	if len(second) != 4 {
		t.Fatalf("claimed again %s, want four", ids(second))
	}
	var changes []courier.Change
	for _, m := range second {
		next := *m
		next.State, next.Attempts, next.Endpoint, next.UpdatedAt, next.FinishedAt = courier.StateDelivered, 2, "acme-backup", at, at
		next.LeaseUntil, next.LeaseOwner, next.NextAttemptAt, next.TimerAt = time.Time{}, "", time.Time{}, time.Time{}
		c := courier.Change{Message: &next, From: courier.StateInflight, Token: m.TotalAttempts,
			Attempt: &courier.Attempt{MessageID: m.ID, Subscription: m.Subscription, N: m.TotalAttempts, Endpoint: "acme-backup",
				Route: "acme", StartedAt: at, Duration: 2 * time.Millisecond, Outcome: courier.OutcomeDelivered, Status: 200, Response: "ok"}}
		if strings.HasPrefix(m.ID, "narrow") {
			c.Prior = m
			if !c.Delivery() {
				t.Fatalf("the change of %s is no Delivery", m.Key())
			}
			// A stale lease changes nothing, this way too.
			stale := c
			stale.Token++
			stalePrior := *m
			stalePrior.TotalAttempts++
			stale.Prior = &stalePrior
			changes = append(changes, stale)
		}
		changes = append(changes, c)
	}
	applied := mustBatch(t, "Apply", s.Apply, changes)
	for i, c := range changes {
		if want := c.Token == c.Message.TotalAttempts; applied[i] != want {
			t.Fatalf("change %d of %s (token %d) applied %v, want %v", i, c.Message.Key(), c.Token, applied[i], want)
		}
	}

	for _, sub := range []string{"", "audit"} {
		read := func(id string) (*courier.Message, []courier.Attempt) {
			t.Helper()
			m := mustGet(t, s, id)
			if sub != "" {
				ds, err := s.Deliveries(ctx, id+"-pub")
				if err != nil || len(ds) != 1 || ds[0].Subscription != sub {
					t.Fatalf("deliveries of %s-pub: %v, %v", id, ids(ds), err)
				}
				m = ds[0]
			}
			a, err := s.Attempts(ctx, m.Key())
			if err != nil {
				t.Fatal(err)
			}
			return m, a
		}
		whole, wholeAttempts := read("whole")
		narrow, narrowAttempts := read("narrow")
		if narrow.State != courier.StateDelivered || narrow.Attempts != 2 || narrow.LastError != "HTTP 503" || narrow.Escalated != 1 {
			t.Errorf("delivered %s: %+v", narrow.Key(), narrow)
		}
		// All but what names the message and its content alike.
		narrow.ID, narrow.Payload, narrow.Size, narrow.Hash = whole.ID, whole.Payload, whole.Size, whole.Hash
		if !reflect.DeepEqual(whole, narrow) {
			t.Errorf("written as a Delivery:\n%+v\nwritten whole:\n%+v", narrow, whole)
		}
		for i := range narrowAttempts {
			narrowAttempts[i].MessageID = wholeAttempts[i].MessageID
		}
		if !reflect.DeepEqual(wholeAttempts, narrowAttempts) {
			t.Errorf("attempts written with a Delivery:\n%+v\nwritten whole:\n%+v", narrowAttempts, wholeAttempts)
		}
	}
}

func testExpiredLeases(t *testing.T, s courier.Store) {
	ctx := context.Background()
	queuedAt(t, s, "a", "acme", 0, base)
	queuedAt(t, s, "b", "acme", 0, base)
	if _, err := s.ClaimDue(ctx, courier.Claim{Now: base, LeaseUntil: base.Add(time.Minute), Owner: "n",
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimDue(ctx, courier.Claim{Now: base, LeaseUntil: base.Add(time.Hour), Owner: "n",
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 1}}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ExpiredLeases(ctx, base.Add(2*time.Minute), 10)
	if err != nil || len(got) != 1 || got[0].ID != "a" || got[0].State != courier.StateInflight {
		t.Fatalf("expired leases %s, %v; want [a]", ids(got), err)
	}
	if got, _ := s.ExpiredLeases(ctx, base, 10); len(got) != 0 {
		t.Fatalf("leases expired before they end: %s", ids(got))
	}
}

func testDueTimers(t *testing.T, s courier.Store) {
	ctx := context.Background()
	p := courier.DefaultPolicy() // max_age 48h: every message gets a timer
	for i, id := range []string{"a", "b"} {
		m := &courier.Message{ID: id, Type: "t", Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, p, false, base.Add(time.Duration(i)*time.Hour))
		mustIngest(t, s, m)
	}
	susp := &courier.Message{ID: "s", Type: "t", Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(susp, p, false, base)
	susp.State, susp.Reason, susp.TimerAt = courier.StateSuspended, courier.ReasonInvalid, time.Time{}
	mustIngest(t, s, susp)

	got, err := s.DueTimers(ctx, base.Add(48*time.Hour+time.Minute), 10)
	if err != nil || ids(got) != "[a]" {
		t.Fatalf("due timers %s, %v; want [a]", ids(got), err)
	}
	got, _ = s.DueTimers(ctx, base.Add(50*time.Hour), 1)
	if ids(got) != "[a]" {
		t.Fatalf("limit 1: %s", ids(got))
	}
	// A resubmitted message has its timers worked out again at once.
	resub := &courier.Message{ID: "r", Type: "t", Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(resub, p, false, base)
	resub.State, resub.Reason, resub.TimerAt = courier.StateSuspended, courier.ReasonExhausted, time.Time{}
	mustIngest(t, s, resub)
	if _, err := s.Resubmit(ctx, "r", "", courier.Action{At: base.Add(time.Minute), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.DueTimers(ctx, base.Add(time.Minute), 10)
	if ids(got) != "[r]" || !got[0].RoundStartedAt.Equal(base.Add(time.Minute)) {
		t.Fatalf("after resubmit: %s", ids(got))
	}
}

// testClaimMax: the total limit is spent on routes that have due messages.
func testClaimMax(t *testing.T, s courier.Store) {
	for i := 0; i < 5; i++ {
		queuedAt(t, s, fmt.Sprintf("b-%d", i), "b", 0, base)
	}
	got, err := s.ClaimDue(context.Background(), courier.Claim{Now: base, LeaseUntil: base.Add(time.Minute), Owner: "n", Max: 3,
		Routes: []courier.RouteQuota{{Route: "empty", Limit: 10}, {Route: "b", Limit: 10}}})
	if err != nil || len(got) != 3 {
		t.Fatalf("claimed %s, %v; want 3 of route b (the empty route leaves its share)", ids(got), err)
	}
}

// DueRoutes names each route with a claimable message once, with the
// earliest due time over every priority; routes whose messages are all in
// flight, suspended, finished or waiting for their ordering key are left
// out.
func testDueRoutes(t *testing.T, s courier.Store) {
	ctx := context.Background()
	due := func() map[string]time.Time {
		t.Helper()
		got, err := s.DueRoutes(ctx)
		if err != nil {
			t.Fatalf("DueRoutes: %v", err)
		}
		out := map[string]time.Time{}
		for _, d := range got {
			if _, twice := out[d.Route]; twice {
				t.Errorf("route %s listed twice", d.Route)
			}
			out[d.Route] = d.At
		}
		return out
	}
	if got := due(); len(got) != 0 {
		t.Fatalf("empty store: %v", got)
	}
	queuedAt(t, s, "a-late", "acme", 9, base.Add(time.Hour))
	queuedAt(t, s, "a-early", "acme", 0, base.Add(time.Minute))
	queuedAt(t, s, "a-mid", "acme", 5, base.Add(30*time.Minute))
	queuedAt(t, s, "g", "globex", 3, base)
	queuedAt(t, s, "i", "initech", 0, base)
	// A keyed message behind another of its key waits: its route is due
	// through the first alone.
	for _, id := range []string{"k1", "k2"} {
		m := &courier.Message{ID: id, Type: "t", Route: "keyed", Payload: []byte(id), ContentType: "text/plain", OrderingKey: "k"}
		courier.Accept(m, courier.DefaultPolicy(), true, base)
		mustIngest(t, s, m)
	}
	got := due()
	want := map[string]time.Time{"acme": base.Add(time.Minute), "globex": base, "initech": base, "keyed": base}
	if len(got) != len(want) {
		t.Fatalf("due routes %v, want %v", got, want)
	}
	for r, at := range want {
		if !got[r].Equal(at) {
			t.Errorf("route %s due at %v, want %v", r, got[r], at)
		}
	}
	// Claimed, the only message of initech leaves it out; the claimed key
	// leaves its route out too, its next message still waiting.
	claim(t, s, base, courier.RouteQuota{Route: "initech", Limit: 10}, courier.RouteQuota{Route: "keyed", Limit: 10})
	got = due()
	if _, ok := got["initech"]; ok {
		t.Errorf("initech, all in flight, is listed: %v", got)
	}
	if _, ok := got["keyed"]; ok {
		t.Errorf("keyed, its head in flight and the next waiting, is listed: %v", got)
	}
	if len(got) != 2 {
		t.Errorf("due routes %v, want acme and globex", got)
	}
}

// Delivered are the outcomes of delivering the claimed messages at the
// attempts they were leased for, on the endpoint "receiver", as the engine
// decides them (AfterAttempt). With prior they know each message as
// leased, as the engine's do, so that a store may write them as
// Deliveries; without, a store writes them whole. For the benchmarks and
// tests of stores.
func Delivered(claimed []*courier.Message, now time.Time, prior bool) []courier.Change {
	changes := make([]courier.Change, len(claimed))
	ep := &courier.Endpoint{Name: "receiver"}
	for i, m := range claimed {
		next, _ := courier.AfterAttempt(m, courier.DefaultPolicy(), ep, courier.Result{Status: 204}, now, 0)
		changes[i] = courier.Change{Message: next, From: courier.StateInflight, Token: m.TotalAttempts,
			Attempt: &courier.Attempt{MessageID: m.ID, Subscription: m.Subscription, N: m.TotalAttempts, Endpoint: ep.Name,
				Route: m.Route, StartedAt: now, Duration: time.Millisecond, Outcome: courier.OutcomeDelivered, Status: 204}}
		if prior {
			changes[i].Prior = m
		}
	}
	return changes
}

// BenchApply measures writing the outcomes of delivered attempts to
// stores that queued makes with n messages queued on the route "bench" at
// now: it claims 100 of them and writes them delivered (Delivered), b.N
// times, as the engine's completer does, and reports clock's count across
// the writes alone per outcome as the metric unit. "delivery" gives the
// store the messages as leased (prior), as the engine does, so that it
// writes a Delivery by its few columns; "whole" does not, so that every
// column is written. A store's benchmark gives the clock that tells its
// cost: wall time where the work is in a database server, the process's
// CPU where it is in the process.
func BenchApply(b *testing.B, queued func(b *testing.B, n int, now time.Time) courier.Store, clock func() time.Duration, unit string) {
	for _, kind := range []string{"delivery", "whole"} {
		b.Run(kind, func(b *testing.B) {
			now := time.Now()
			BenchApplyOn(b, queued(b, b.N*100, now), now, kind == "delivery", clock, unit)
		})
	}
}

// BenchApplyOn is one kind of BenchApply (prior: "delivery") on s, which
// has b.N*100 messages queued at now.
func BenchApplyOn(b *testing.B, s courier.Store, now time.Time, prior bool, clock func() time.Duration, unit string) {
	claim := courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Owner: "bench",
		Routes: []courier.RouteQuota{{Route: "bench", Limit: 100}}}
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		got, err := s.ClaimDue(context.Background(), claim)
		if err != nil || len(got) != 100 {
			b.Fatalf("claimed %d, %v", len(got), err)
		}
		changes := Delivered(got, now, prior)
		start := clock()
		applied, err := s.Apply(context.Background(), changes)
		elapsed += clock() - start
		if err != nil || len(applied) != 100 || !applied[99] {
			b.Fatalf("applied %v, %v", applied, err)
		}
	}
	b.ReportMetric(float64(elapsed.Nanoseconds())/float64(b.N*100), unit)
}
