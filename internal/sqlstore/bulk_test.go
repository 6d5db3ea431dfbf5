package sqlstore

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestSameBulk(t *testing.T) {
	op := courier.BulkOp{ID: "b", Kind: courier.ActionResubmit, Route: "other",
		Filter: courier.MessageFilter{State: courier.StateSuspended, Route: "acme"}}
	tests := []struct {
		name   string
		change func(*courier.BulkOp)
		want   bool
	}{
		{"the same", func(*courier.BulkOp) {}, true},
		{"the same, started by someone else later", func(o *courier.BulkOp) { o.Who, o.CreatedAt = "bob", time.Unix(1, 0) }, true},
		{"another kind", func(o *courier.BulkOp) { o.Kind = courier.ActionDiscard }, false},
		{"another route", func(o *courier.BulkOp) { o.Route = "" }, false},
		{"another filter", func(o *courier.BulkOp) { o.Filter.Route = "globex" }, false},
	}
	for _, tt := range tests {
		other := op
		tt.change(&other)
		if got := SameBulk(op, other); got != tt.want {
			t.Errorf("%s: SameBulk = %v, want %v", tt.name, got, tt.want)
		}
	}
	f, err := EncodeSettings(op)
	if err != nil {
		t.Fatal(err)
	}
	var back courier.BulkOp
	if err := DecodeSettings([]byte(f), &back); err != nil || !reflect.DeepEqual(back.Filter, op.Filter) || back.Replay != nil {
		t.Errorf("filter %s decodes to %+v, %v; want %+v", f, back, err, op.Filter)
	}
	if err := DecodeSettings([]byte("{"), &back); err == nil {
		t.Error("DecodeSettings of broken JSON succeeded")
	}
	// A filter kept before replays existed reads as it was.
	if err := DecodeSettings([]byte(`{"State":"suspended","Route":"acme"}`), &back); err != nil || back.Filter.Route != "acme" || back.Filter.State != courier.StateSuspended {
		t.Errorf("an older filter: %+v, %v", back.Filter, err)
	}
	replay := courier.BulkOp{Kind: courier.ActionReplay, Replay: &courier.Replay{Subscription: courier.Subscription{Name: "s", Types: []string{"order.*"}, Route: "erp"},
		Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC), Again: true}}
	f, _ = EncodeSettings(replay)
	if err := DecodeSettings([]byte(f), &back); err != nil || back.Replay == nil || back.Replay.Subscription.Route != "erp" || !back.Replay.Again || !back.Replay.Until.Equal(replay.Replay.Until) {
		t.Errorf("replay %s decodes to %+v, %v", f, back.Replay, err)
	}
}

func TestStartBulk(t *testing.T) {
	op := courier.BulkOp{ID: "b", Kind: courier.ActionResubmit, Route: "other", Filter: courier.MessageFilter{Route: "acme"}}
	stored := map[string]courier.BulkOp{}
	var filters []string
	readErr := errors.New("connection lost")
	start := func(op courier.BulkOp, failRead bool) (courier.BulkOp, error) {
		return StartBulk(op, func(fn func(tx string) error) error { return fn("tx") },
			func(tx, filter string) error {
				filters = append(filters, filter)
				if _, taken := stored[op.ID]; !taken {
					stored[op.ID] = op
				}
				return nil
			},
			func(tx string) (courier.BulkOp, error) {
				if failRead {
					return courier.BulkOp{}, readErr
				}
				return stored[op.ID], nil
			})
	}
	if got, err := start(op, false); err != nil || got.ID != "b" || got.Route != "other" {
		t.Fatalf("first start: %+v, %v", got, err)
	}
	if want, _ := EncodeSettings(op); len(filters) != 1 || filters[0] != want {
		t.Errorf("inserted with filters %q, want %q", filters, want)
	}
	if got, err := start(op, false); err != nil || got.ID != "b" {
		t.Errorf("repeated start: %+v, %v; want the operation", got, err)
	}
	other := op
	other.Route = ""
	if got, err := start(other, false); courier.ErrorCode(err) != courier.CodeConflict || got.ID != "" {
		t.Errorf("start with other settings: %+v, %v; want a conflict", got, err)
	}
	if _, err := start(op, true); !errors.Is(err, readErr) {
		t.Errorf("start whose read fails: %v, want its error", err)
	}
}

func TestBulkBatch(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	suspended := &courier.Message{ID: "x", State: courier.StateSuspended, Route: "acme"}
	tests := []struct {
		name        string
		op          courier.BulkOp
		fail        map[string]error // what act answers for a message
		wantN       int
		wantErr     bool
		wantActions string
		wantState   courier.State // what decide makes of a suspended message
	}{
		{
			name:        "resubmit to another route",
			op:          courier.BulkOp{ID: "b1", Kind: courier.ActionResubmit, Who: "ops", Route: "other"},
			wantN:       3,
			wantActions: "[a:bulk operation b1, route=other b:bulk operation b1, route=other c:bulk operation b1, route=other]",
			wantState:   courier.StateQueued,
		},
		{
			name:        "discard, leaving alone what it is not for",
			op:          courier.BulkOp{ID: "b2", Kind: courier.ActionDiscard, Who: "ops"},
			fail:        map[string]error{"b": courier.Errorf(courier.CodeConflict, "delivered already")},
			wantN:       2,
			wantActions: "[a:bulk operation b2 c:bulk operation b2]",
			wantState:   courier.StateDiscarded,
		},
		{
			name:        "a failure stops the batch",
			op:          courier.BulkOp{ID: "b3", Kind: courier.ActionDiscard, Who: "ops"},
			fail:        map[string]error{"b": errors.New("disk on fire")},
			wantN:       1,
			wantErr:     true,
			wantActions: "[a:bulk operation b3]",
			wantState:   courier.StateDiscarded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var actions []string
			n, err := BulkBatch(tt.op, []string{"a", "b", "c"}, now,
				func(id string, decide Decide) error {
					next, err := decide(suspended)
					if err != nil {
						t.Fatalf("decide: %v", err)
					}
					if next.State != tt.wantState {
						t.Errorf("decided %s for a suspended message, want %s", next.State, tt.wantState)
					}
					return tt.fail[id]
				},
				func(a courier.Action) error {
					if a.Who != tt.op.Who || a.Kind != tt.op.Kind || !a.At.Equal(now) {
						t.Errorf("action %+v, want by %s, of kind %s, at %v", a, tt.op.Who, tt.op.Kind, now)
					}
					actions = append(actions, a.Subject+":"+a.Detail)
					return nil
				})
			if n != tt.wantN || (err != nil) != tt.wantErr {
				t.Errorf("BulkBatch = %d, %v; want %d, error %v", n, err, tt.wantN, tt.wantErr)
			}
			if got := fmt.Sprint(actions); got != tt.wantActions {
				t.Errorf("actions %s, want %s", got, tt.wantActions)
			}
		})
	}
}

func TestOperatorActions(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	suspended := &courier.Message{ID: "m", State: courier.StateSuspended, Route: "acme"}
	tests := []struct {
		name       string
		act        func() (courier.Action, Decide)
		wantAction courier.Action
		wantState  courier.State
		wantRoute  string
	}{
		{"discard", func() (courier.Action, Decide) {
			return Discard("m", courier.Action{At: at, Who: "ops", Detail: "why"})
		},
			courier.Action{At: at, Who: "ops", Kind: courier.ActionDiscard, Subject: "m", Detail: "why"}, courier.StateDiscarded, "acme"},
		{"resubmit", func() (courier.Action, Decide) {
			return Resubmit("m", "", courier.Action{At: at, Who: "ops", Detail: "stale"})
		},
			courier.Action{At: at, Who: "ops", Kind: courier.ActionResubmit, Subject: "m"}, courier.StateQueued, "acme"},
		{"resubmit elsewhere", func() (courier.Action, Decide) { return Resubmit("m", "other", courier.Action{At: at, Who: "ops"}) },
			courier.Action{At: at, Who: "ops", Kind: courier.ActionResubmit, Subject: "m", Detail: "route=other"}, courier.StateQueued, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, decide := tt.act()
			if a != tt.wantAction {
				t.Errorf("action %+v, want %+v", a, tt.wantAction)
			}
			next, err := decide(suspended)
			if err != nil || next.State != tt.wantState || next.Route != tt.wantRoute {
				t.Fatalf("decided %+v, %v; want %s on %s", next, err, tt.wantState, tt.wantRoute)
			}
		})
	}
}
