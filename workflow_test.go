package courier_test

import (
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// drone is the drone delivery workflow of the issue: four steps, the first
// and last with nothing to undo.
func drone() *courier.Topology {
	eps := map[string]*courier.Endpoint{}
	for _, n := range []string{"accounts", "packages", "packages-cancel", "drones", "drones-cancel", "deliveries", "ops"} {
		eps[n] = courier.NewEndpoint(n, courier.TransportHTTP)
	}
	pol := courier.DefaultPolicy()
	pol.Name, pol.MaxAttempts, pol.MaxAge = "delivery", 3, time.Hour
	pol.Escalate = []courier.Escalation{{After: 24 * time.Hour, Notify: "ops"}}
	undo := courier.DefaultPolicy()
	undo.Name, undo.MaxAttempts = "undo", 2
	return &courier.Topology{Endpoints: eps,
		Routes: map[string]*courier.Route{"schedule": {Name: "schedule", Workflow: &courier.Workflow{
			Steps: []courier.WorkflowStep{{Endpoint: "accounts"}, {Endpoint: "packages", Compensate: "packages-cancel"},
				{Endpoint: "drones", Compensate: "drones-cancel"}, {Endpoint: "deliveries"}},
			CompensationPolicy: "undo"}}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy(), "delivery": pol, "undo": undo}}
}

func TestWorkflowSteps(t *testing.T) {
	top := drone()
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	m := &courier.Message{ID: "d-1", Type: "delivery", Route: "schedule", Payload: []byte(`{}`)}
	courier.Accept(m, top.Policy(m.Type), false, now)
	top.StartWorkflow(m)
	if m.Route != "schedule:step-1" || m.Step != 1 || m.Workflow != "schedule" {
		t.Fatalf("started on %s step %d of %q", m.Route, m.Step, m.Workflow)
	}
	ok := courier.Result{Status: 200, Response: `{"id":1}`, Body: `{"id": 1}`}
	rejected := courier.Result{Class: courier.ClassHTTP4xx, Status: 400, Error: "HTTP 400"}
	down := courier.Result{Class: courier.ClassHTTP5xx, Status: 503, Error: "HTTP 503"}
	ep := func(name string) *courier.Endpoint { return top.Endpoints[name] }
	step := func(m *courier.Message, e string, r courier.Result) *courier.Message {
		t.Helper()
		m.State = courier.StateInflight
		next, _ := top.AfterAttempt(m, ep(e), r, now, 0.5)
		return next
	}

	// Steps 1 and 2 go through; each keeps its response for the later ones.
	m = step(m, "accounts", ok)
	if m.State != courier.StateQueued || m.Route != "schedule:step-2" || m.Step != 2 || m.Attempts != 0 || m.StepResponses[1] != `{"id": 1}` {
		t.Fatalf("after step 1: %s on %s step %d, attempts %d, responses %v", m.State, m.Route, m.Step, m.Attempts, m.StepResponses)
	}
	ctx := top.StepContext(m)
	if ctx == nil || ctx.Step != 2 || ctx.Steps != 4 || ctx.Compensate || ctx.Responses[1] != `{"id": 1}` {
		t.Fatalf("step context %+v", ctx)
	}
	m = step(m, "packages", ok)
	// Step 3 fails transiently (retried by the type's policy), then for good.
	m = step(m, "drones", down)
	if m.State != courier.StateQueued || m.Route != "schedule:step-3" || m.Attempts != 1 || !m.NextAttemptAt.After(now) {
		t.Fatalf("after a 503 on step 3: %s on %s, attempts %d", m.State, m.Route, m.Attempts)
	}
	m = step(m, "drones", rejected)
	// Compensation starts with the step before: 2 (step 3 itself failed).
	if m.State != courier.StateQueued || m.Route != "schedule:undo-2" || m.Step != 2 || m.FailedStep != 3 || m.Attempts != 0 {
		t.Fatalf("after step 3 rejected: %s on %s step %d failed %d", m.State, m.Route, m.Step, m.FailedStep)
	}
	if p := top.PolicyFor(m); p.Name != "undo" {
		t.Fatalf("compensation goes by policy %s", p.Name)
	}
	if ctx := top.StepContext(m); !ctx.Compensate || ctx.Step != 2 || ctx.Responses[2] == "" {
		t.Fatalf("compensation context %+v", ctx)
	}
	if got := courier.StepStates(m, top.Routes["schedule"].Workflow); strings.Join(stateNames(got), " ") != "not_undoable undoing failed pending" {
		t.Fatalf("step states while undoing 2: %v", got)
	}
	// A compensation is retried on any failure, also a 4xx.
	m = step(m, "packages-cancel", rejected)
	if m.State != courier.StateQueued || m.Route != "schedule:undo-2" || m.Attempts != 1 {
		t.Fatalf("after a failed compensation: %s on %s", m.State, m.Route)
	}
	m = step(m, "packages-cancel", ok)
	// Step 1 has nothing to undo: all is undone.
	if m.State != courier.StateSuspended || m.Reason != courier.ReasonCompensated || !strings.Contains(m.LastError, "step 3 of 4 failed") {
		t.Fatalf("after undoing 2: %s %s %q", m.State, m.Reason, m.LastError)
	}
	if got := courier.StepStates(m, top.Routes["schedule"].Workflow); strings.Join(stateNames(got), " ") != "not_undoable undone failed pending" {
		t.Fatalf("step states when compensated: %v", got)
	}
}

func TestWorkflowCompensationRunsOut(t *testing.T) {
	top := drone()
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	m := &courier.Message{ID: "d-2", Type: "delivery", Route: "schedule:undo-3", Workflow: "schedule", Step: 3, FailedStep: 4,
		State: courier.StateInflight, RoundStartedAt: now, CreatedAt: now}
	down := courier.Result{Class: courier.ClassConnectRefused, Error: "refused"}
	next, _ := top.AfterAttempt(m, top.Endpoints["drones-cancel"], down, now, 0.5)
	next.State = courier.StateInflight
	next, notices := top.AfterAttempt(next, top.Endpoints["drones-cancel"], down, now, 0.5)
	if next.State != courier.StateSuspended || next.Reason != courier.ReasonCompensationFailed || !strings.Contains(next.LastError, "compensation of step 3 of 4 ran out") {
		t.Fatalf("after the undo policy ran out: %s %s %q", next.State, next.Reason, next.LastError)
	}
	if len(notices) != 1 || notices[0].Route != courier.NoticeRoute("ops") {
		t.Fatalf("notices %+v; want one to ops", notices)
	}
	if got := courier.StepStates(next, top.Routes["schedule"].Workflow); strings.Join(stateNames(got), " ") != "not_undoable done undo_failed failed" {
		t.Fatalf("step states: %v", got)
	}
}

func TestWorkflowLastStepDelivers(t *testing.T) {
	top := drone()
	now := time.Now()
	m := &courier.Message{ID: "d-3", Type: "delivery", Route: "schedule:step-4", Workflow: "schedule", Step: 4, State: courier.StateInflight,
		StepResponses: map[int]string{1: "a", 2: "b", 3: "c"}}
	next, _ := top.AfterAttempt(m, top.Endpoints["deliveries"], courier.Result{Status: 204}, now, 0.5)
	if next.State != courier.StateDelivered || len(next.StepResponses) != 4 || len(m.StepResponses) != 3 {
		t.Fatalf("after the last step: %s, responses %v (the input's %v must not change)", next.State, next.StepResponses, m.StepResponses)
	}
	// A step that keeps losing its worker fails for good: its steps are undone.
	m = &courier.Message{ID: "d-4", Type: "delivery", Route: "schedule:step-3", Workflow: "schedule", Step: 3, Abandoned: courier.MaxAbandoned - 1, State: courier.StateInflight}
	next, _ = top.AfterAbandon(m, now)
	if next.Route != "schedule:undo-2" || next.FailedStep != 3 || !strings.Contains(next.LastError, "poison") {
		t.Fatalf("after a poison step: %s failed %d %q", next.Route, next.FailedStep, next.LastError)
	}
	// max_age ends a retrying step too.
	m = &courier.Message{ID: "d-5", Type: "delivery", Route: "schedule:step-2", Workflow: "schedule", Step: 2, State: courier.StateQueued,
		RoundStartedAt: now.Add(-2 * time.Hour), CreatedAt: now.Add(-2 * time.Hour), TimerAt: now}
	next, _, changed := top.OnTimer(m, now)
	if !changed || next.State != courier.StateSuspended || next.Reason != courier.ReasonCompensated {
		t.Fatalf("after max_age on step 2 (step 1 has nothing to undo): %s %s changed %v", next.State, next.Reason, changed)
	}
}

// A step waiting for its ordering key has not started its round: max_age
// does not end it, and its timer is only its escalation.
func TestWorkflowWaitingStepKeepsItsRound(t *testing.T) {
	top := drone()
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	m := &courier.Message{ID: "d-6", Type: "delivery", Route: "schedule:step-1", Workflow: "schedule", Step: 1, State: courier.StateQueued,
		OrderingKey: "drone-7", RoundStartedAt: now.Add(-2 * time.Hour), CreatedAt: now.Add(-2 * time.Hour), TimerAt: now}
	if !m.Waiting() {
		t.Fatal("the message does not wait for its key")
	}
	next, _, _ := top.OnTimer(m, now)
	if next.State != courier.StateQueued || next.FailedStep != 0 || next.Route != "schedule:step-1" {
		t.Fatalf("a waiting step after max_age: %s on %s, failed step %d, %q", next.State, next.Route, next.FailedStep, next.LastError)
	}
	if want := m.CreatedAt.Add(24 * time.Hour); !next.TimerAt.Equal(want) {
		t.Fatalf("timer at %v; want the escalation at %v", next.TimerAt, want)
	}
}

func stateNames(ss []courier.StepState) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// TestWorkflowDecisions walks the branches of a workflow's decisions that
// the walks above do not reach, each through the engine's entry points.
func TestWorkflowDecisions(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	wf := func(route string, step, failed int, state courier.State) *courier.Message {
		return &courier.Message{ID: "d-7", Type: "delivery", Route: route, Workflow: "schedule", Step: step, FailedStep: failed,
			State: state, CreatedAt: now, RoundStartedAt: now}
	}
	attempt := func(ep string, r courier.Result) func(*courier.Topology, *courier.Message) (*courier.Message, []*courier.Message) {
		return func(top *courier.Topology, m *courier.Message) (*courier.Message, []*courier.Message) {
			return top.AfterAttempt(m, top.Endpoints[ep], r, now, 0.5)
		}
	}
	abandon := func(top *courier.Topology, m *courier.Message) (*courier.Message, []*courier.Message) {
		return top.AfterAbandon(m, now)
	}
	timer := func(top *courier.Topology, m *courier.Message) (*courier.Message, []*courier.Message) {
		n, notices, _ := top.OnTimer(m, now)
		return n, notices
	}
	down := courier.Result{Class: courier.ClassHTTP5xx, Status: 503, Error: "HTTP 503"}
	for _, tc := range []struct {
		name    string
		m       func() *courier.Message
		decide  func(*courier.Topology, *courier.Message) (*courier.Message, []*courier.Message)
		route   string
		state   courier.State
		reason  courier.Reason
		failed  int
		due     bool // due again at once
		err     string
		notices string
	}{
		{name: "a step out of attempts is undone from the step before",
			m: func() *courier.Message {
				m := wf("schedule:step-3", 3, 0, courier.StateInflight)
				m.Attempts = 2
				return m
			},
			decide: attempt("drones", down), route: "schedule:undo-2", state: courier.StateQueued, failed: 3, due: true, err: "exhausted: HTTP 503"},
		{name: "a compensation done goes on to the one below",
			m:      func() *courier.Message { return wf("schedule:undo-3", 3, 4, courier.StateInflight) },
			decide: attempt("drones-cancel", courier.Result{Status: 200}), route: "schedule:undo-2", state: courier.StateQueued, failed: 4, due: true},
		{name: "a step past its expires_at fails for good",
			m: func() *courier.Message {
				m := wf("schedule:step-3", 3, 0, courier.StateQueued)
				m.ExpiresAt = now
				return m
			},
			decide: timer, route: "schedule:undo-2", state: courier.StateQueued, failed: 3, due: true, err: "expired: past its expires_at"},
		{name: "a compensation goes on past the sender's expires_at",
			m: func() *courier.Message {
				m := wf("schedule:undo-2", 2, 3, courier.StateQueued)
				m.ExpiresAt = now.Add(-time.Hour)
				return m
			},
			decide: timer, route: "schedule:undo-2", state: courier.StateQueued, failed: 3},
		{name: "a compensation past its max_age runs out",
			m: func() *courier.Message {
				m := wf("schedule:undo-2", 2, 3, courier.StateQueued)
				m.RoundStartedAt = now.Add(-49 * time.Hour)
				return m
			},
			decide: timer, route: "schedule:undo-2", state: courier.StateSuspended, reason: courier.ReasonCompensationFailed, failed: 3,
			err: "not done within max_age", notices: "suspended>ops"},
		{name: "a step late by its type's escalation tells of it",
			m: func() *courier.Message {
				m := wf("schedule:step-2", 2, 0, courier.StateQueued)
				m.CreatedAt = now.Add(-25 * time.Hour)
				return m
			},
			decide: timer, route: "schedule:step-2", state: courier.StateQueued, notices: "escalation>ops"},
		{name: "a step that lost its worker is due again at once",
			m:      func() *courier.Message { return wf("schedule:step-2", 2, 0, courier.StateInflight) },
			decide: abandon, route: "schedule:step-2", state: courier.StateQueued, due: true, err: "abandoned"},
		{name: "a compensation that keeps losing its worker runs out",
			m: func() *courier.Message {
				m := wf("schedule:undo-2", 2, 3, courier.StateInflight)
				m.Abandoned = courier.MaxAbandoned - 1
				return m
			},
			decide: abandon, route: "schedule:undo-2", state: courier.StateSuspended, reason: courier.ReasonCompensationFailed, failed: 3,
			err: "attempts in a row were abandoned", notices: "suspended>ops"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, ns := tc.decide(drone(), tc.m())
			if n.Route != tc.route || n.State != tc.state || n.Reason != tc.reason || n.FailedStep != tc.failed {
				t.Fatalf("decided %s %s (%s), failed step %d; want %s %s (%s), failed step %d",
					n.Route, n.State, n.Reason, n.FailedStep, tc.route, tc.state, tc.reason, tc.failed)
			}
			if tc.due && !n.NextAttemptAt.Equal(now) {
				t.Errorf("due at %v; want at once", n.NextAttemptAt)
			}
			if !strings.Contains(n.LastError, tc.err) {
				t.Errorf("last error %q; want it to say %q", n.LastError, tc.err)
			}
			if got := strings.Join(notices(t, ns), ","); got != tc.notices {
				t.Errorf("notices %q; want %q", got, tc.notices)
			}
		})
	}
}
