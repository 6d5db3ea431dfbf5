package courier_test

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestKeyGroupAdmitsAndNext(t *testing.T) {
	for _, tt := range []struct {
		name   string
		g      courier.KeyGroup
		seq    int64 // a joining message's ingest order
		admits bool
		next   int64
	}{
		{"empty group", courier.KeyGroup{}, 10, true, 0},
		{"an active member", courier.KeyGroup{Active: true, OldestWaiting: 5}, 10, false, 0},
		{"an older suspended member blocks", courier.KeyGroup{OldestSuspended: 3}, 10, false, 0},
		{"a younger suspended member does not", courier.KeyGroup{OldestSuspended: 12}, 10, true, 0},
		{"an older waiting member goes first", courier.KeyGroup{OldestWaiting: 4}, 10, false, 4},
		{"a younger waiting member waits behind it", courier.KeyGroup{OldestWaiting: 11}, 10, true, 11},
		{"the oldest waiting is behind a suspended one", courier.KeyGroup{OldestSuspended: 2, OldestWaiting: 4}, 10, false, 0},
		{"the suspended one is behind the oldest waiting", courier.KeyGroup{OldestSuspended: 6, OldestWaiting: 4}, 10, false, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.g.Admits(tt.seq); got != tt.admits {
				t.Errorf("Admits(%d) = %v, want %v", tt.seq, got, tt.admits)
			}
			if got := tt.g.Next(); got != tt.next {
				t.Errorf("Next() = %d, want %d", got, tt.next)
			}
		})
	}
}

func TestJoinsKeyAndPromoted(t *testing.T) {
	for _, tt := range []struct {
		m    courier.Message
		want bool
	}{
		{courier.Message{OrderingKey: "k", State: courier.StateQueued}, true},
		{courier.Message{OrderingKey: "k", State: courier.StateQueued, OrderSkipped: true}, false},
		{courier.Message{State: courier.StateQueued}, false},
		{courier.Message{OrderingKey: "k", State: courier.StateSuspended}, false},
	} {
		if got := courier.JoinsKey(&tt.m); got != tt.want {
			t.Errorf("JoinsKey(%+v) = %v", tt.m, got)
		}
	}
	m := &courier.Message{ID: "w", State: courier.StateQueued, RoundStartedAt: t0, DeliverAfter: t0.Add(time.Hour)}
	p := courier.Promoted(m, t0.Add(time.Minute))
	if !p.NextAttemptAt.Equal(t0.Add(time.Hour)) || !p.RoundStartedAt.Equal(t0.Add(time.Minute)) || !p.TimerAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("promoted before its deliver_after: %+v", p)
	}
	if p = courier.Promoted(m, t0.Add(2*time.Hour)); !p.NextAttemptAt.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("promoted after its deliver_after: due %v", p.NextAttemptAt)
	}
	if !m.NextAttemptAt.IsZero() {
		t.Error("Promoted changed its argument")
	}
}

func TestOperatorActions(t *testing.T) {
	now := t0.Add(time.Hour)
	suspended := &courier.Message{ID: "s", Route: "a", State: courier.StateSuspended, Reason: courier.ReasonRejected, Attempts: 3,
		Abandoned: 1, ResubmitCount: 1, OrderingKey: "k", OrderSkipped: true, Workflow: "w", Step: 2, FailedStep: 2, FinishedAt: t0}
	r, err := courier.Resubmit(suspended, "", now)
	if err != nil || r.State != courier.StateQueued || r.Reason != "" || r.Attempts != 0 || r.Abandoned != 0 || r.ResubmitCount != 2 ||
		r.Route != "a" || r.Workflow != "w" || r.Step != 2 || !r.OrderSkipped || !r.NextAttemptAt.Equal(now) ||
		!r.RoundStartedAt.Equal(now) || !r.TimerAt.Equal(now) || !r.FinishedAt.IsZero() {
		t.Errorf("resubmitted in place: %+v, %v", r, err)
	}
	r, err = courier.Resubmit(suspended, "b", now)
	if err != nil || r.Route != "b" || r.Workflow != "" || r.Step != 0 || r.FailedStep != 0 || r.OrderSkipped {
		t.Errorf("resubmitted to another route: %+v, %v", r, err)
	}
	if r, _ = courier.Resubmit(suspended, "a", now); !r.OrderSkipped {
		t.Error("resubmitted to its own route by name, it joined its key's order again")
	}
	compensated := *suspended
	compensated.Reason = courier.ReasonCompensated
	if _, err := courier.Resubmit(&compensated, "", now); courier.ErrorCode(err) != courier.CodeConflict {
		t.Errorf("resubmitting a compensated message: %v", err)
	}
	for _, st := range []courier.State{courier.StateQueued, courier.StateInflight, courier.StateDelivered} {
		if _, err := courier.Resubmit(&courier.Message{ID: "x", State: st}, "", now); courier.ErrorCode(err) != courier.CodeConflict {
			t.Errorf("resubmitting a %s message: %v", st, err)
		}
	}
	for _, st := range []courier.State{courier.StateQueued, courier.StateSuspended} {
		d, err := courier.Discard(&courier.Message{ID: "x", State: st, NextAttemptAt: now, TimerAt: now}, now)
		if err != nil || d.State != courier.StateDiscarded || !d.NextAttemptAt.IsZero() || !d.TimerAt.IsZero() || !d.FinishedAt.Equal(now) {
			t.Errorf("discarding a %s message: %+v, %v", st, d, err)
		}
	}
	for _, st := range []courier.State{courier.StateInflight, courier.StateDelivered, courier.StateDiscarded} {
		if _, err := courier.Discard(&courier.Message{ID: "x", State: st}, now); courier.ErrorCode(err) != courier.CodeConflict {
			t.Errorf("discarding a %s message: %v", st, err)
		}
	}
}

func TestSuspendQueued(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, st := range []courier.State{courier.StateQueued, courier.StateInflight, courier.StateSuspended, courier.StateDelivered} {
		m := &courier.Message{ID: "m", State: st, NextAttemptAt: now.Add(-time.Minute), TimerAt: now.Add(time.Hour), Attempts: 2}
		n, ok := courier.SuspendQueued(m, courier.ReasonNoRoute, "route r was removed", now)
		if ok != (st == courier.StateQueued) {
			t.Fatalf("%s: ok %v", st, ok)
		}
		if !ok {
			continue
		}
		if n.State != courier.StateSuspended || n.Reason != courier.ReasonNoRoute || n.LastError != "route r was removed" ||
			!n.NextAttemptAt.IsZero() || !n.TimerAt.IsZero() || !n.UpdatedAt.Equal(now) || !n.FinishedAt.Equal(now) || n.Attempts != 2 {
			t.Errorf("suspended: %+v", n)
		}
		if m.State != courier.StateQueued {
			t.Errorf("the message read was changed: %s", m.State)
		}
	}
}
