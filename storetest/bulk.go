package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func suspendedMsg(t *testing.T, s courier.Store, id, typ string) {
	t.Helper()
	m := &courier.Message{ID: id, Type: typ, Route: "acme", Payload: []byte(id), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, base)
	m.State, m.Reason, m.FinishedAt, m.TimerAt = courier.StateSuspended, courier.ReasonExhausted, base, time.Time{}
	mustIngest(t, s, m)
}

func testBulk(t *testing.T, s courier.Store) {
	ctx := context.Background()
	for _, id := range []string{"i1", "i2", "i3"} {
		suspendedMsg(t, s, id, "invoice")
	}
	suspendedMsg(t, s, "o1", "order")
	queuedAt(t, s, "q1", "acme", 0, base)

	op := courier.BulkOp{ID: "op-1", Kind: courier.ActionResubmit, Filter: courier.MessageFilter{Type: "invoice"},
		Route: "globex", Who: "alice", CreatedAt: base}
	started, err := s.StartBulk(ctx, op)
	if err != nil || started.ID != "op-1" || started.Done || started.Count != 0 {
		t.Fatalf("StartBulk: %+v %v", started, err)
	}
	// A message suspended after the operation began is not part of it.
	suspendedMsg(t, s, "i4-later", "invoice")
	// Repeating the start returns the same operation; other settings conflict.
	if again, err := s.StartBulk(ctx, op); err != nil || again.ID != "op-1" {
		t.Fatalf("repeat StartBulk: %+v %v", again, err)
	}
	other := op
	other.Route = "acme"
	if _, err := s.StartBulk(ctx, other); courier.ErrorCode(err) != courier.CodeConflict {
		t.Fatalf("StartBulk with the same id and other settings: %v", err)
	}
	if pending, err := s.PendingBulks(ctx); err != nil || len(pending) != 1 || pending[0].ID != "op-1" {
		t.Fatalf("pending: %+v %v", pending, err)
	}

	at := base.Add(time.Hour)
	got, err := s.RunBulk(ctx, "op-1", 2, at)
	if err != nil || got.Count != 2 || got.Done {
		t.Fatalf("first batch: %+v %v", got, err)
	}
	got, err = s.RunBulk(ctx, "op-1", 2, at)
	if err != nil || got.Count != 3 || !got.Done {
		t.Fatalf("second batch: %+v %v", got, err)
	}
	got, err = s.RunBulk(ctx, "op-1", 2, at)
	if err != nil || got.Count != 3 || !got.Done {
		t.Fatalf("a finished operation does nothing more: %+v %v", got, err)
	}
	for _, id := range []string{"i1", "i2", "i3"} {
		m := mustGet(t, s, id)
		if m.State != courier.StateQueued || m.Route != "globex" || m.ResubmitCount != 1 {
			t.Errorf("%s after bulk resubmit: %s route %s count %d", id, m.State, m.Route, m.ResubmitCount)
		}
		actions, _ := s.Actions(ctx, id)
		if len(actions) != 1 || actions[0].Who != "alice" || actions[0].Kind != courier.ActionResubmit || !strings.Contains(actions[0].Detail, "op-1") {
			t.Errorf("%s actions: %+v", id, actions)
		}
	}
	for id, want := range map[string]courier.State{"o1": courier.StateSuspended, "q1": courier.StateQueued, "i4-later": courier.StateSuspended} {
		if m := mustGet(t, s, id); m.State != want {
			t.Errorf("%s: %s, want it untouched (%s)", id, m.State, want)
		}
	}
	if b, err := s.Bulk(ctx, "op-1"); err != nil || !b.Done || b.Count != 3 || b.Who != "alice" {
		t.Fatalf("Bulk: %+v %v", b, err)
	}
	if pending, _ := s.PendingBulks(ctx); len(pending) != 0 {
		t.Fatalf("pending after done: %+v", pending)
	}
	if _, err := s.Bulk(ctx, "nope"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("missing operation: %v", err)
	}

	// A bulk discard of queued messages.
	if _, err := s.StartBulk(ctx, courier.BulkOp{ID: "op-2", Kind: courier.ActionDiscard,
		Filter: courier.MessageFilter{State: courier.StateQueued, Type: "t"}, Who: "bob", CreatedAt: base}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.RunBulk(ctx, "op-2", 100, at); err != nil || got.Count != 1 || !got.Done {
		t.Fatalf("bulk discard: %+v %v", got, err)
	}
	if m := mustGet(t, s, "q1"); m.State != courier.StateDiscarded {
		t.Errorf("q1 after bulk discard: %s", m.State)
	}
}

// testBulkRedrive checks a re-drive's operation: the reasons it takes,
// oldest first within its age, the actions it records as courier, and
// its stop.
func testBulkRedrive(t *testing.T, s courier.Store) {
	ctx := context.Background()
	suspended := func(id string, reason courier.Reason, created time.Time) {
		t.Helper()
		m := &courier.Message{ID: id, Type: "invoice", Route: "acme", Payload: []byte(id), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, created)
		m.State, m.Reason, m.FinishedAt, m.TimerAt = courier.StateSuspended, reason, created, time.Time{}
		mustIngest(t, s, m)
	}
	recovered := base.Add(10 * time.Hour)
	suspended("too-old", courier.ReasonExhausted, recovered.Add(-73*time.Hour))
	suspended("e1", courier.ReasonExhausted, base.Add(time.Hour))
	suspended("rejected", courier.ReasonRejected, base.Add(2*time.Hour))
	suspended("x1", courier.ReasonExpired, base.Add(3*time.Hour))
	suspended("invalid", courier.ReasonInvalid, base.Add(4*time.Hour))
	suspended("e2", courier.ReasonExhausted, base.Add(5*time.Hour))
	suspended("poison", courier.ReasonPoison, base.Add(6*time.Hour))

	route := &courier.Route{Name: "acme", Endpoints: []string{"hook"}, Redrive: &courier.Redrive{OnRecovery: true}}
	op, ok := route.RedriveOp("hook", recovered)
	if !ok {
		t.Fatal("RedriveOp: the route does not re-drive")
	}
	if _, err := s.StartBulk(ctx, op); err != nil {
		t.Fatal(err)
	}
	// Another node that sees the same recovery finds the same operation.
	if again, err := s.StartBulk(ctx, op); err != nil || again.ID != op.ID || again.Redrive == nil || again.Redrive.Endpoint != "hook" {
		t.Fatalf("repeat StartBulk: %+v %v", again, err)
	}
	at := recovered.Add(time.Minute)
	got, err := s.RunBulk(ctx, op.ID, 2, at)
	if err != nil || got.Count != 2 || got.Done {
		t.Fatalf("first batch: %+v %v", got, err)
	}
	// Oldest first: the first batch took e1 and x1, not e2.
	if m := mustGet(t, s, "e2"); m.State != courier.StateSuspended {
		t.Errorf("e2 after the first batch: %s, want suspended (oldest first)", m.State)
	}
	if got, err = s.RunBulk(ctx, op.ID, 2, at); err != nil || got.Count != 3 || !got.Done {
		t.Fatalf("second batch: %+v %v", got, err)
	}
	for _, id := range []string{"e1", "x1", "e2"} {
		if m := mustGet(t, s, id); m.State != courier.StateQueued {
			t.Errorf("%s after the re-drive: %s, want queued", id, m.State)
		}
		actions, _ := s.Actions(ctx, id)
		if len(actions) != 1 || actions[0].Who != courier.SystemWho || actions[0].Kind != courier.ActionResubmit ||
			!strings.Contains(actions[0].Detail, "re-drive after the recovery of endpoint hook") {
			t.Errorf("%s actions: %+v", id, actions)
		}
	}
	for _, id := range []string{"too-old", "rejected", "invalid", "poison"} {
		if m := mustGet(t, s, id); m.State != courier.StateSuspended {
			t.Errorf("%s after the re-drive: %s, want it left suspended", id, m.State)
		}
	}

	// A stop ends the operation: no batch more, and its reason is kept.
	route.Redrive.Reasons = []courier.Reason{courier.ReasonPoison, courier.ReasonExhausted}
	op2, _ := route.RedriveOp("hook", recovered.Add(time.Hour))
	if _, err := s.StartBulk(ctx, op2); err != nil {
		t.Fatal(err)
	}
	stopped, err := s.StopBulk(ctx, op2.ID, "endpoint hook is suspended again", at)
	if err != nil || !stopped.Done || stopped.Stopped != "endpoint hook is suspended again" || stopped.Count != 0 {
		t.Fatalf("StopBulk: %+v %v", stopped, err)
	}
	if got, err := s.RunBulk(ctx, op2.ID, 10, at); err != nil || got.Count != 0 || !got.Done {
		t.Fatalf("a stopped operation does nothing more: %+v %v", got, err)
	}
	if m := mustGet(t, s, "poison"); m.State != courier.StateSuspended {
		t.Errorf("poison after a stopped re-drive: %s", m.State)
	}
	if again, err := s.StopBulk(ctx, op2.ID, "another reason", at); err != nil || again.Stopped != "endpoint hook is suspended again" {
		t.Fatalf("StopBulk of a stopped operation: %+v %v", again, err)
	}
	if pending, _ := s.PendingBulks(ctx); len(pending) != 0 {
		t.Fatalf("pending after the stop: %+v", pending)
	}
	if _, err := s.StopBulk(ctx, "nope", "x", at); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("StopBulk of a missing operation: %v", err)
	}
}
