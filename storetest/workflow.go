package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	courier "github.com/courier-gw/courier"
)

// bigResponse returns a response of exactly courier.MaxStepResponse bytes,
// valid UTF-8, full of what an encoding of it must escape or keep whole:
// quotes, backslashes, newlines, tabs, control characters, markup and
// text outside ASCII.
func bigResponse() string {
	const chunk = "{\"quote\": \"say \\\"hi\\\"\", 'single'}\r\n\tback\\slash </tag> & <b>ü é 中文 ✓ 🚀</b>\x00\x01\x1f\u2028\n"
	s := strings.Repeat(chunk, courier.MaxStepResponse/len(chunk)+1)[:courier.MaxStepResponse]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1] // a rune cut in half at the end
	}
	return s + strings.Repeat("x", courier.MaxStepResponse-len(s))
}

// sameWorkflow compares the workflow fields of a message read back from
// the store in some way (where) with what was written.
func sameWorkflow(t *testing.T, where string, got, want *courier.Message) {
	t.Helper()
	if got.Workflow != want.Workflow || got.Step != want.Step || got.FailedStep != want.FailedStep {
		t.Errorf("%s: %s has workflow %q step %d failed step %d, want %q %d %d", where, got.ID,
			got.Workflow, got.Step, got.FailedStep, want.Workflow, want.Step, want.FailedStep)
	}
	if len(got.StepResponses) != len(want.StepResponses) {
		t.Errorf("%s: %s has responses of steps %v, want %v", where, got.ID, stepsOf(got.StepResponses), stepsOf(want.StepResponses))
		return
	}
	for k, w := range want.StepResponses {
		g, ok := got.StepResponses[k]
		if !ok || g != w {
			t.Errorf("%s: %s: the response of step %d differs: %s", where, got.ID, k, firstDiff(g, w))
		}
	}
}

func stepsOf(m map[int]string) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	return out
}

// firstDiff says where two long strings part, without printing them whole.
func firstDiff(got, want string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	excerpt := func(s string) string { return s[i:min(len(s), i+16)] }
	return fmt.Sprintf("got %d bytes, want %d; from byte %d got %q, want %q", len(got), len(want), i, excerpt(got), excerpt(want))
}

// sameWorkflowIn finds message id among msgs, read from the store in some
// way (where, which failed when err is set), and compares its workflow
// fields with want.
func sameWorkflowIn(t *testing.T, where string, msgs []*courier.Message, err error, id string, want *courier.Message) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	got := byID(msgs, id)
	if got == nil {
		t.Errorf("%s returned %s, want %s among them", where, ids(msgs), id)
		return
	}
	sameWorkflow(t, where, got, want)
}

// testWorkflow follows a message of a workflow route through every way a
// store writes and reads it: its workflow, step, failed step and the
// responses of its steps come back as written, and a message outside any
// workflow has none of them.
func testWorkflow(t *testing.T, s courier.Store) {
	ctx := context.Background()
	big := bigResponse()

	// A message on step 2 of workflow "order", with the response of step 1.
	wf := &courier.Message{ID: "wf", Type: "order", Route: courier.StepRoute("order", 2), Payload: []byte(`{"n":1}`),
		ContentType: "application/json"}
	courier.Accept(wf, courier.DefaultPolicy(), false, base)
	wf.Workflow, wf.Step, wf.StepResponses = "order", 2, map[int]string{1: `{"reservation":"R-1"}`}
	plain := &courier.Message{ID: "plain", Type: "invoice", Route: "acme", Payload: []byte(`{"n":2}`), ContentType: "application/json"}
	courier.Accept(plain, courier.DefaultPolicy(), false, base)
	mustIngest(t, s, wf, plain)
	none := &courier.Message{}
	sameWorkflow(t, "Message after Ingest", mustGet(t, s, "wf"), wf)
	sameWorkflow(t, "Message after Ingest", mustGet(t, s, "plain"), none)
	if res := mustIngest(t, s, wf); res[0].Status != courier.IngestExists || res[0].Message == nil {
		t.Fatalf("ingest again: %+v, want exists with the stored message", res[0])
	} else {
		sameWorkflow(t, "Ingest again", res[0].Message, wf)
	}

	// Step 2 is claimed and delivered, with a response of the largest size
	// kept: the message moves on to step 3, due at once (as AfterStep).
	now := base.Add(time.Second)
	claimed := claim(t, s, now, courier.RouteQuota{Route: courier.StepRoute("order", 2), Limit: 10},
		courier.RouteQuota{Route: "acme", Limit: 10})
	if len(claimed) != 2 {
		t.Fatalf("claimed %s, want wf and plain", ids(claimed))
	}
	var m *courier.Message
	for _, c := range claimed {
		if c.ID == "wf" {
			m = c
			sameWorkflow(t, "ClaimDue", c, wf)
		} else {
			sameWorkflow(t, "ClaimDue", c, none)
		}
	}
	if m == nil {
		t.Fatalf("claimed %s, want wf among them", ids(claimed))
	}
	next := *m
	next.StepResponses = map[int]string{1: m.StepResponses[1], 2: big}
	next.Route, next.Step, next.State, next.Attempts = courier.StepRoute("order", 3), 3, courier.StateQueued, 0
	next.LeaseUntil, next.LeaseOwner, next.Endpoint = time.Time{}, "", "shipping"
	next.RoundStartedAt, next.NextAttemptAt, next.TimerAt, next.UpdatedAt = now, now, now, now
	applyOne(t, s, &next, m.TotalAttempts)
	sameWorkflow(t, "Message after Apply", mustGet(t, s, "wf"), &next)
	if got := mustGet(t, s, "wf"); got.Route != courier.StepRoute("order", 3) {
		t.Errorf("after Apply: route %q, want %q", got.Route, courier.StepRoute("order", 3))
	}

	due, err := s.DueTimers(ctx, now, 100)
	sameWorkflowIn(t, "DueTimers", due, err, "wf", &next)

	// Step 3 is claimed, and its lease lapses.
	claimed = claim(t, s, now, courier.RouteQuota{Route: courier.StepRoute("order", 3), Limit: 10})
	if len(claimed) != 1 {
		t.Fatalf("claimed %s for step 3, want [wf]", ids(claimed))
	}
	sameWorkflow(t, "ClaimDue of step 3", claimed[0], &next)
	lapsed, err := s.ExpiredLeases(ctx, now.Add(2*time.Minute), 100)
	sameWorkflowIn(t, "ExpiredLeases", lapsed, err, "wf", &next)

	// Step 3 fails for good: the compensation of step 2 begins; it runs
	// out and the message is suspended.
	m = claimed[0]
	undo := *m
	undo.FailedStep, undo.Route, undo.State = 3, courier.UndoRoute("order", 2), courier.StateQueued
	undo.LeaseUntil, undo.LeaseOwner, undo.UpdatedAt = time.Time{}, "", now
	undo.Step = 2
	applyOne(t, s, &undo, m.TotalAttempts)
	claimed = claim(t, s, now, courier.RouteQuota{Route: courier.UndoRoute("order", 2), Limit: 10})
	if len(claimed) != 1 {
		t.Fatalf("claimed %s for the compensation of step 2, want [wf]", ids(claimed))
	}
	sameWorkflow(t, "ClaimDue of a compensation", claimed[0], &undo)
	m = claimed[0]
	failed := *m
	failed.State, failed.Reason, failed.FinishedAt = courier.StateSuspended, courier.ReasonCompensationFailed, now
	failed.LeaseUntil, failed.LeaseOwner, failed.NextAttemptAt, failed.TimerAt, failed.UpdatedAt = time.Time{}, "", time.Time{}, time.Time{}, now
	applyOne(t, s, &failed, m.TotalAttempts)

	page, err := s.Messages(ctx, courier.MessageFilter{})
	sameWorkflowIn(t, "Messages", page.Messages, err, "wf", &failed)
	sameWorkflowIn(t, "Messages", page.Messages, err, "plain", none)

	// A resubmit resumes the workflow where it stopped.
	got, err := s.Resubmit(ctx, "wf", "", courier.Action{At: now.Add(time.Hour), Who: "alice"})
	if err != nil {
		t.Fatalf("Resubmit: %v", err)
	}
	sameWorkflow(t, "Resubmit", got, &failed)
	sameWorkflow(t, "Message after Resubmit", mustGet(t, s, "wf"), &failed)
	if got.Route != courier.UndoRoute("order", 2) {
		t.Errorf("after Resubmit: route %q, want %q", got.Route, courier.UndoRoute("order", 2))
	}
}

// testWorkflowResubmitElsewhere: a workflow message resubmitted to another
// route leaves its workflow and goes there as a message of its own; a
// compensated one is not resubmitted.
func testWorkflowResubmitElsewhere(t *testing.T, s courier.Store) {
	ctx := context.Background()
	now := time.Now().Truncate(time.Microsecond)
	mk := func(id string, reason courier.Reason) {
		m := &courier.Message{ID: id, Type: "order", Route: courier.StepRoute("order", 3), Payload: []byte("x"), ContentType: "text/plain",
			Workflow: "order", Step: 3, StepResponses: map[int]string{1: "a"}}
		courier.Accept(m, courier.DefaultPolicy(), false, now)
		m.State, m.Reason, m.FinishedAt = courier.StateSuspended, reason, now
		if reason == courier.ReasonCompensated {
			m.FailedStep = 3
		}
		mustIngest(t, s, m)
	}
	mk("wf-noroute", courier.ReasonNoRoute)
	mk("wf-done", courier.ReasonCompensated)
	got, err := s.Resubmit(ctx, "wf-noroute", "plain", courier.Action{At: now, Who: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Route != "plain" || got.Workflow != "" || got.Step != 0 || got.FailedStep != 0 || got.State != courier.StateQueued {
		t.Fatalf("resubmitted to another route: route %q workflow %q step %d failed %d %s", got.Route, got.Workflow, got.Step, got.FailedStep, got.State)
	}
	var ce *courier.Error
	if _, err := s.Resubmit(ctx, "wf-done", "", courier.Action{At: now, Who: "alice"}); !errors.As(err, &ce) || ce.Code != courier.CodeConflict {
		t.Fatalf("resubmit of a compensated workflow: %v; want a conflict", err)
	}
}

// applyOne applies one change decided on an inflight message and fails
// unless it applied.
func applyOne(t *testing.T, s courier.Store, m *courier.Message, token int) {
	t.Helper()
	MustApply(t, s, courier.Change{Message: m, From: courier.StateInflight, Token: token})
}
