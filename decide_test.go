package courier_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func TestNextDelay(t *testing.T) {
	backoff := &courier.Policy{Backoff: courier.Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour}}
	jitter := &courier.Policy{Backoff: courier.Backoff{Initial: 100 * time.Second, Factor: 2, Max: time.Hour, Jitter: 0.2}}
	schedule := &courier.Policy{Schedule: []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute}}
	tests := []struct {
		name       string
		p          *courier.Policy
		k          int
		rnd        float64
		retryAfter time.Duration
		want       time.Duration
	}{
		{"first retry", backoff, 1, 0.5, 0, 30 * time.Second},
		{"second", backoff, 2, 0.5, 0, time.Minute},
		{"seventh reaches the cap", backoff, 8, 0.5, 0, time.Hour},
		{"far beyond the cap", backoff, 400, 0.5, 0, time.Hour},
		{"jitter low end", jitter, 1, 0, 0, 80 * time.Second},
		{"jitter middle", jitter, 1, 0.5, 0, 100 * time.Second},
		{"jitter high end", jitter, 2, 1, 0, 240 * time.Second},
		{"jitter is on the base, not compounded", jitter, 3, 0.5, 0, 400 * time.Second},
		{"retry-after raises", backoff, 1, 0.5, 2 * time.Minute, 2 * time.Minute},
		{"retry-after lower than the delay", backoff, 2, 0.5, time.Second, time.Minute},
		{"schedule 1", schedule, 1, 0.9, 0, time.Minute},
		{"schedule 3", schedule, 3, 0.9, 0, 30 * time.Minute},
		{"schedule past its end repeats the last", schedule, 7, 0, 0, 30 * time.Minute},
		{"schedule with retry-after", schedule, 1, 0, 3 * time.Minute, 3 * time.Minute},
	}
	for _, tt := range tests {
		if got := tt.p.NextDelay(tt.k, tt.rnd, tt.retryAfter); got != tt.want {
			t.Errorf("%s: NextDelay(%d) = %v, want %v", tt.name, tt.k, got, tt.want)
		}
	}
	if got := schedule.AttemptLimit(); got != 4 {
		t.Errorf("a schedule of 3 allows %d attempts, want 4", got)
	}
}

// accepted returns a message as ingested at t0 and claimed once.
func accepted(p *courier.Policy) *courier.Message {
	m := &courier.Message{ID: "inv-1", Type: "invoice", Route: "acme", Payload: []byte("{}"), ContentType: "application/json"}
	courier.Accept(m, p, false, t0)
	m.State, m.TotalAttempts = courier.StateInflight, 1
	return m
}

func endpoint() *courier.Endpoint { return &courier.Endpoint{Name: "acme-primary"} }

func notices(t *testing.T, ns []*courier.Message) []string {
	t.Helper()
	var kinds []string
	for _, n := range ns {
		var b courier.NoticeBody
		if err := json.Unmarshal(n.Payload, &b); err != nil {
			t.Fatal(err)
		}
		if n.Type != courier.NoticeType || !strings.HasPrefix(n.Route, "courier.notice.") || !courier.ValidID(n.ID) {
			t.Errorf("notice %+v is not a courier.notice on a notice route", n)
		}
		kinds = append(kinds, b.Notice+">"+strings.TrimPrefix(n.Route, "courier.notice."))
	}
	return kinds
}

func TestAfterAttempt(t *testing.T) {
	policy := func() *courier.Policy {
		p := courier.DefaultPolicy()
		p.Backoff.Jitter = 0
		p.MaxAttempts = 3
		return p
	}
	fail503 := courier.Result{Class: courier.ClassHTTP5xx, Status: 503, Error: "HTTP 503"}
	now := t0.Add(time.Minute)

	t.Run("delivered", func(t *testing.T) {
		m := accepted(policy())
		n, ns := courier.AfterAttempt(m, policy(), endpoint(), courier.Result{Status: 204}, now, 0.5)
		if n.State != courier.StateDelivered || n.Attempts != 1 || !n.FinishedAt.Equal(now) || !n.NextAttemptAt.IsZero() || !n.TimerAt.IsZero() || n.Endpoint != "acme-primary" || len(ns) != 0 {
			t.Fatalf("%+v %v", n, ns)
		}
		if m.State != courier.StateInflight {
			t.Fatal("AfterAttempt changed its input")
		}
	})
	t.Run("transient retries with the delay", func(t *testing.T) {
		n, _ := courier.AfterAttempt(accepted(policy()), policy(), endpoint(), fail503, now, 0.5)
		if n.State != courier.StateQueued || n.Attempts != 1 || !n.NextAttemptAt.Equal(now.Add(30*time.Second)) ||
			n.LastError != "HTTP 503" || n.LastClass != courier.ClassHTTP5xx {
			t.Fatalf("%+v", n)
		}
		if !n.TimerAt.Equal(t0.Add(48 * time.Hour)) {
			t.Errorf("timer %v, want the max_age deadline", n.TimerAt)
		}
	})
	t.Run("retry-after floors the delay", func(t *testing.T) {
		r := courier.Result{Class: courier.ClassHTTP429, Status: 429, RetryAfter: 2 * time.Minute}
		n, _ := courier.AfterAttempt(accepted(policy()), policy(), endpoint(), r, now, 0.5)
		if !n.NextAttemptAt.Equal(now.Add(2 * time.Minute)) {
			t.Fatalf("due %v", n.NextAttemptAt)
		}
	})
	t.Run("permanent suspends at once", func(t *testing.T) {
		r := courier.Result{Class: courier.ClassHTTP4xx, Status: 422, Error: "HTTP 422"}
		n, _ := courier.AfterAttempt(accepted(policy()), policy(), endpoint(), r, now, 0.5)
		if n.State != courier.StateSuspended || n.Reason != courier.ReasonRejected || n.Attempts != 1 || !n.FinishedAt.Equal(now) {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("endpoint rules decide what is permanent", func(t *testing.T) {
		e := endpoint()
		e.PermanentClasses = []courier.ErrorClass{courier.ClassHTTP5xx}
		n, _ := courier.AfterAttempt(accepted(policy()), policy(), e, fail503, now, 0.5)
		if n.State != courier.StateSuspended || n.Reason != courier.ReasonRejected {
			t.Fatalf("5xx listed permanent: %+v", n)
		}
		n, _ = courier.AfterAttempt(accepted(policy()), policy(), e, courier.Result{Class: courier.ClassHTTP4xx}, now, 0.5)
		if n.State != courier.StateQueued {
			t.Fatalf("4xx not listed permanent: %+v", n)
		}
	})
	t.Run("exhausted after max attempts", func(t *testing.T) {
		m := accepted(policy())
		m.Attempts = 2
		n, _ := courier.AfterAttempt(m, policy(), endpoint(), fail503, now, 0.5)
		if n.State != courier.StateSuspended || n.Reason != courier.ReasonExhausted || n.Attempts != 3 {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("exhausted with discard", func(t *testing.T) {
		p := policy()
		p.OnExhausted = courier.ExhaustedDiscard
		m := accepted(p)
		m.Attempts = 2
		n, _ := courier.AfterAttempt(m, p, endpoint(), fail503, now, 0.5)
		if n.State != courier.StateDiscarded || !n.FinishedAt.Equal(now) {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("exhausted falls back once, counters anew, with notices", func(t *testing.T) {
		p := policy()
		p.Fallback = &courier.Fallback{Route: "vans"}
		p.Escalate = []courier.Escalation{{After: 24 * time.Hour, Notify: "ops-mail"}, {After: 36 * time.Hour, Notify: "ops-mail"}}
		m := accepted(p)
		m.Attempts = 2
		n, ns := courier.AfterAttempt(m, p, endpoint(), fail503, now, 0.5)
		if n.State != courier.StateQueued || n.Route != "vans" || n.FallbackFrom != "acme" || n.Attempts != 0 ||
			!n.NextAttemptAt.Equal(now) || !n.RoundStartedAt.Equal(now) {
			t.Fatalf("%+v", n)
		}
		// With an ordering key it joins its key's order on the fallback
		// route (the store makes it wait there if it must).
		k := accepted(p)
		k.Attempts, k.OrderingKey = 2, "customer-42"
		if n, _ := courier.AfterAttempt(k, p, endpoint(), fail503, now, 0.5); n.Route != "vans" || n.OrderSkipped {
			t.Fatalf("fallback of a message with an ordering key: %+v", n)
		}
		if got := notices(t, ns); len(got) != 1 || got[0] != "fallback>ops-mail" {
			t.Errorf("notices %v, want one fallback notice to ops-mail (once per endpoint)", got)
		}
		// The fallback round runs out too: no second fallback, suspended.
		n.State, n.Attempts, n.TotalAttempts = courier.StateInflight, 2, 5
		n2, ns := courier.AfterAttempt(n, p, endpoint(), fail503, now.Add(time.Hour), 0.5)
		if n2.State != courier.StateSuspended || n2.Reason != courier.ReasonExhausted || n2.Route != "vans" {
			t.Fatalf("second exhaustion: %+v", n2)
		}
		if got := notices(t, ns); len(got) != 1 || got[0] != "suspended>ops-mail" {
			t.Errorf("notices %v, want one suspension notice", got)
		}
	})
	t.Run("max_age passes while retrying", func(t *testing.T) {
		n, _ := courier.AfterAttempt(accepted(policy()), policy(), endpoint(), fail503, t0.Add(49*time.Hour), 0.5)
		if n.State != courier.StateSuspended || n.Reason != courier.ReasonExpired || !strings.Contains(n.LastError, "max_age") {
			t.Fatalf("%+v", n)
		}
	})
	t.Run("notices cause no notices", func(t *testing.T) {
		p := policy()
		p.Escalate = []courier.Escalation{{After: time.Minute, Notify: "ops-mail"}}
		p.Fallback = &courier.Fallback{Route: "vans"}
		m := accepted(p)
		m.Type, m.Attempts = courier.NoticeType, 2
		n, ns := courier.AfterAttempt(m, p, endpoint(), fail503, now.Add(time.Hour), 0.5)
		if n.State != courier.StateSuspended || n.Route != "acme" || len(ns) != 0 {
			t.Fatalf("a failing notice: %+v, notices %v", n, ns)
		}
	})
}

func TestOnTimer(t *testing.T) {
	p := courier.DefaultPolicy()
	p.Escalate = []courier.Escalation{{After: 24 * time.Hour, Notify: "ops-mail"}, {After: 30 * time.Hour, Notify: "ops-web"}}
	p.Fallback = &courier.Fallback{After: 40 * time.Hour, Route: "vans"}
	m := accepted(p)
	m.State = courier.StateQueued
	if !m.TimerAt.Equal(t0.Add(24 * time.Hour)) {
		t.Fatalf("timer after ingest %v, want the first escalation", m.TimerAt)
	}

	n, ns, changed := courier.OnTimer(m, p, t0.Add(time.Hour))
	if changed || len(ns) != 0 || !n.TimerAt.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("before anything is due: changed %v notices %v timer %v", changed, ns, n.TimerAt)
	}
	n, ns, changed = courier.OnTimer(m, p, t0.Add(25*time.Hour))
	if !changed || n.Escalated != 1 || !n.TimerAt.Equal(t0.Add(30*time.Hour)) || n.State != courier.StateQueued {
		t.Fatalf("first escalation: %+v", n)
	}
	if got := notices(t, ns); len(got) != 1 || got[0] != "escalation>ops-mail" {
		t.Fatalf("notices %v", got)
	}
	again, ns, _ := courier.OnTimer(n, p, t0.Add(26*time.Hour))
	if len(ns) != 0 || again.Escalated != 1 {
		t.Fatalf("an escalation fired twice: %v", ns)
	}
	// Late: both remaining escalations and the fallback fire at once.
	n, ns, _ = courier.OnTimer(n, p, t0.Add(41*time.Hour))
	if got := notices(t, ns); strings.Join(got, ",") != "fallback>ops-mail,fallback>ops-web,escalation>ops-web" {
		t.Fatalf("late timer notices %v", got)
	}
	if n.Route != "vans" || n.FallbackFrom != "acme" || n.Escalated != 2 || !n.TimerAt.Equal(t0.Add(41*time.Hour+48*time.Hour)) {
		t.Fatalf("after fallback by time: %+v", n)
	}
	// The fallback round's max_age passes: no second fallback.
	n, _, _ = courier.OnTimer(n, p, t0.Add(90*time.Hour))
	if n.State != courier.StateSuspended || n.Reason != courier.ReasonExpired {
		t.Fatalf("max_age of the fallback round: %+v", n)
	}

	// expires_at suspends at once, without fallback.
	e := accepted(p)
	e.State, e.ExpiresAt = courier.StateQueued, t0.Add(2*time.Hour)
	n, _, changed = courier.OnTimer(e, p, t0.Add(2*time.Hour))
	if !changed || n.State != courier.StateSuspended || n.Reason != courier.ReasonExpired || n.Route != "acme" {
		t.Fatalf("expires_at: %+v", n)
	}
}

// TestOnTimerWaiting: a message waiting for its ordering key has not begun
// its round: max_age and the fallback's time do not apply to it, only its
// expires_at (which takes it out of its key's order) and the escalations.
// Its round, once promoted, has the whole max_age and fallback time.
func TestOnTimerWaiting(t *testing.T) {
	p := courier.DefaultPolicy()
	p.Escalate = []courier.Escalation{{After: 24 * time.Hour, Notify: "ops-mail"}}
	p.Fallback = &courier.Fallback{After: 40 * time.Hour, Route: "vans"}
	waiting := func() *courier.Message {
		m := accepted(p)
		m.State, m.TotalAttempts, m.OrderingKey, m.NextAttemptAt = courier.StateQueued, 0, "customer-42", time.Time{}
		return m
	}
	if !waiting().Waiting() {
		t.Fatal("the test message does not wait")
	}

	late := t0.Add(100 * time.Hour) // past max_age, the fallback's time and the escalation
	n, ns, changed := courier.OnTimer(waiting(), p, late)
	if !changed || n.State != courier.StateQueued || n.Route != "acme" || n.FallbackFrom != "" || !n.Waiting() || n.Escalated != 1 {
		t.Fatalf("a waiting message long past max_age and the fallback's time: %+v", n)
	}
	if got := notices(t, ns); strings.Join(got, ",") != "escalation>ops-mail" {
		t.Fatalf("notices %v, want the escalation only", got)
	}
	if !n.TimerAt.IsZero() {
		t.Fatalf("timer of a waiting message with nothing left to fire: %v, want none", n.TimerAt)
	}

	e := waiting()
	e.ExpiresAt = t0.Add(2 * time.Hour)
	if n, _, _ := courier.OnTimer(e, p, t0.Add(time.Hour)); !n.TimerAt.Equal(e.ExpiresAt) {
		t.Fatalf("timer of a waiting message with an expiry: %v, want %v", n.TimerAt, e.ExpiresAt)
	}
	n, _, _ = courier.OnTimer(e, p, e.ExpiresAt)
	if n.State != courier.StateSuspended || n.Reason != courier.ReasonExpired || !n.OrderSkipped || n.HoldsKey() {
		t.Fatalf("a waiting message past its expires_at: %+v; want suspended out of its key's order", n)
	}
	courier.KeepOrder(n, &courier.Route{Name: "acme", OrderedOnFailure: courier.OrderedBlock})
	if !n.OrderSkipped {
		t.Fatal("KeepOrder on a blocking route put the expired waiting message back in its key's order")
	}

	// Promoted at late, the round begins: due, with max_age and the
	// fallback's time from then.
	pr := waiting()
	pr.NextAttemptAt, pr.RoundStartedAt, pr.TimerAt, pr.Escalated = late, late, late, 1
	n, _, _ = courier.OnTimer(pr, p, late)
	if n.State != courier.StateQueued || n.Route != "acme" || !n.TimerAt.Equal(late.Add(40*time.Hour)) {
		t.Fatalf("a promoted message: %+v; want queued, its timer at the fallback's time from its promotion", n)
	}
	n, _, _ = courier.OnTimer(n, p, late.Add(40*time.Hour))
	if n.Route != "vans" || n.FallbackFrom != "acme" || n.OrderSkipped {
		t.Fatalf("fallback of a promoted message: %+v; want on vans, in its key's order there", n)
	}
}

func TestAfterAbandon(t *testing.T) {
	p := courier.DefaultPolicy()
	m := accepted(p)
	now := t0.Add(time.Minute)
	for i := 1; i < courier.MaxAbandoned; i++ {
		n, _ := courier.AfterAbandon(m, p, now)
		if n.State != courier.StateQueued || n.Attempts != 0 || n.Abandoned != i || !n.NextAttemptAt.Equal(now) {
			t.Fatalf("abandon %d: %+v", i, n)
		}
		m = n
		m.State = courier.StateInflight
	}
	n, _ := courier.AfterAbandon(m, p, now)
	if n.State != courier.StateSuspended || n.Reason != courier.ReasonPoison {
		t.Fatalf("abandon %d: %+v", courier.MaxAbandoned, n)
	}
	// A real outcome resets the count.
	m.Abandoned = 2
	n, _ = courier.AfterAttempt(m, p, endpoint(), courier.Result{Class: courier.ClassTimeout}, now, 0.5)
	if n.Abandoned != 0 {
		t.Errorf("abandoned count after a real attempt: %d", n.Abandoned)
	}
}

func TestNoticeRoute(t *testing.T) {
	top := &courier.Topology{Endpoints: map[string]*courier.Endpoint{"ops-mail": {Name: "ops-mail"}}, Routes: map[string]*courier.Route{}}
	r := top.Route(courier.NoticeRoute("ops-mail"))
	if r == nil || len(r.Endpoints) != 1 || r.Endpoints[0] != "ops-mail" {
		t.Fatalf("notice route: %+v", r)
	}
	if top.Route(courier.NoticeRoute("nobody")) != nil || top.Route("acme") != nil {
		t.Error("a route that does not exist was found")
	}
	m := &courier.Message{Type: "t", Route: courier.NoticeRoute("ops-mail")}
	if top.Validate(m, "") == nil {
		t.Error("a sender may ingest to a notice route")
	}
}

// A prepared topology answers the same implicit routes as one that makes
// them on each lookup, and no others.
func TestPreparedImplicitRoutes(t *testing.T) {
	top := &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"a": {Name: "a"}, "b": {Name: "b"}, "undo-b": {Name: "undo-b"}},
		Routes: map[string]*courier.Route{"w": {Name: "w", OrderedOnFailure: courier.OrderedSkip, Workflow: &courier.Workflow{Steps: []courier.WorkflowStep{
			{Endpoint: "a"}, {Endpoint: "b", Compensate: "undo-b"}}}}},
	}
	names := []string{courier.NoticeRoute("a"), courier.NoticeRoute("nobody"), courier.StepRoute("w", 1), courier.StepRoute("w", 2), courier.StepRoute("w", 3),
		courier.UndoRoute("w", 1), courier.UndoRoute("w", 2), "w", "other", "w:step:x"}
	before := map[string]*courier.Route{}
	for _, n := range names {
		before[n] = top.Route(n)
	}
	top.Prepare()
	for _, n := range names {
		got, want := top.Route(n), before[n]
		if (got == nil) != (want == nil) || got != nil && (got.Name != want.Name || !slices.Equal(got.Endpoints, want.Endpoints) ||
			got.OrderedOnFailure != want.OrderedOnFailure) {
			t.Errorf("route %q: prepared %+v, made %+v", n, got, want)
		}
	}
	if top.Route(courier.StepRoute("w", 2)) != top.Route(courier.StepRoute("w", 2)) {
		t.Error("a prepared implicit route is made anew on each lookup")
	}
}

// A numbered message that leaves its key's order sends a sequence_gap
// notice, with its key and number, to the endpoints its policy escalates
// to: the receiver will get the number after it without it. A message
// that holds its key (block), or has no number, sends none.
func TestSequenceGapNotice(t *testing.T) {
	p := courier.DefaultPolicy()
	p.Escalate = []courier.Escalation{{After: 24 * time.Hour, Notify: "ops-mail"}, {After: 48 * time.Hour, Notify: "ops-web"}}
	top := &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"ops-mail": {Name: "ops-mail"}, "ops-web": {Name: "ops-web"}, "erp": {Name: "erp"}},
		Routes: map[string]*courier.Route{
			"skip":  {Name: "skip", Endpoints: []string{"erp"}, OrderedOnFailure: courier.OrderedSkip},
			"block": {Name: "block", Endpoints: []string{"erp"}, OrderedOnFailure: courier.OrderedBlock},
		},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: p},
	}
	top.Prepare()
	inflight := func(route string, seq int64) *courier.Message {
		m := &courier.Message{ID: "m-3", Type: "invoice", Route: route, OrderingKey: "cust-1", Sequence: seq, PreviousID: "m-2"}
		courier.Accept(m, p, false, t0)
		m.State, m.TotalAttempts = courier.StateInflight, 1
		return m
	}
	poison := func(route string, seq int64) *courier.Message {
		m := inflight(route, seq)
		m.Abandoned = courier.MaxAbandoned - 1
		return m
	}
	rejected := courier.Result{Class: courier.ClassRejected, Status: 400, Error: "HTTP 400"}
	for _, tc := range []struct {
		name    string
		m       *courier.Message
		abandon bool // the worker is lost, rather than the attempt rejected
		want    string
		skips   bool
	}{
		{"skip leaves a gap", inflight("skip", 3), false, "suspended>ops-mail,suspended>ops-web,sequence_gap>ops-mail,sequence_gap>ops-web", true},
		{"block holds the key", inflight("block", 3), false, "suspended>ops-mail,suspended>ops-web", false},
		{"no number, no gap", inflight("skip", 0), false, "suspended>ops-mail,suspended>ops-web", true},
		{"poison on skip leaves a gap", poison("skip", 3), true, "suspended>ops-mail,suspended>ops-web,sequence_gap>ops-mail,sequence_gap>ops-web", true},
		{"poison on block holds the key", poison("block", 3), true, "suspended>ops-mail,suspended>ops-web", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var n *courier.Message
			var ns []*courier.Message
			if tc.abandon {
				n, ns = top.AfterAbandon(tc.m, t0.Add(time.Minute))
			} else {
				n, ns = top.AfterAttempt(tc.m, top.Endpoints["erp"], rejected, t0.Add(time.Minute), 0.5)
			}
			if n.State != courier.StateSuspended || n.OrderSkipped != tc.skips {
				t.Fatalf("decided %s, skipped %v; want suspended, skipped %v", n.State, n.OrderSkipped, tc.skips)
			}
			if got := strings.Join(notices(t, ns), ","); got != tc.want {
				t.Fatalf("notices %s, want %s", got, tc.want)
			}
			for _, notice := range ns {
				var b courier.NoticeBody
				if err := json.Unmarshal(notice.Payload, &b); err != nil {
					t.Fatal(err)
				}
				if b.Notice == courier.NoticeSequenceGap && (b.Sequence != 3 || b.OrderingKey != "cust-1" || b.MessageID != "m-3" || b.Route != "skip") {
					t.Errorf("gap notice %+v, want message m-3, sequence 3 of cust-1 on skip", b)
				}
			}
		})
	}

	// A waiting message that expires leaves the order even on a route
	// that blocks: a gap too.
	w := inflight("block", 5)
	w.State, w.TotalAttempts, w.NextAttemptAt = courier.StateQueued, 0, time.Time{}
	w.ExpiresAt = t0.Add(time.Hour)
	n, ns, _ := top.OnTimer(w, t0.Add(time.Hour))
	if !n.OrderSkipped || !strings.Contains(strings.Join(notices(t, ns), ","), "sequence_gap>ops-mail") {
		t.Fatalf("expired while waiting: skipped %v, notices %v; want a sequence_gap notice", n.OrderSkipped, notices(t, ns))
	}
	// Sent again, the same decision makes the same notice ids: stored once.
	_, again, _ := top.OnTimer(w, t0.Add(time.Hour))
	if len(again) != len(ns) || again[len(again)-1].ID != ns[len(ns)-1].ID {
		t.Errorf("the gap notice's id changed when decided again")
	}
}

// An attempt put off (its endpoint held, busy or paced once a lookup
// resolved it) queues the message again until then without spending one.
func TestPutBack(t *testing.T) {
	m := accepted(courier.DefaultPolicy())
	m.LeaseUntil, m.LeaseOwner = t0.Add(time.Minute), "node-1"
	now, until := t0.Add(time.Second), t0.Add(time.Hour)
	n := courier.PutBack(m, until, now)
	if n.State != courier.StateQueued || !n.NextAttemptAt.Equal(until) || !n.UpdatedAt.Equal(now) || n.LeaseOwner != "" || !n.LeaseUntil.IsZero() {
		t.Fatalf("put back: %s, due %v, updated %v, lease %q until %v; want queued until %v without a lease",
			n.State, n.NextAttemptAt, n.UpdatedAt, n.LeaseOwner, n.LeaseUntil, until)
	}
	if n.Attempts != m.Attempts || n.TotalAttempts != m.TotalAttempts || m.State != courier.StateInflight {
		t.Fatalf("attempts %d/%d, claimed message %s; want %d/%d, the claimed one unchanged", n.Attempts, n.TotalAttempts, m.State, m.Attempts, m.TotalAttempts)
	}
}
