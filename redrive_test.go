package courier

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRedrivePace(t *testing.T) {
	t.Parallel()
	route := &Route{Name: "r", Endpoints: []string{"a"}, Redrive: &Redrive{OnRecovery: true}}
	limited := &Endpoint{Name: "a", MaxConcurrency: 8}
	unlimited := &Endpoint{Name: "a"}
	active := EndpointHealth{Endpoint: "a", State: HealthActive}
	tests := []struct {
		name      string
		route     *Route
		ep        *Endpoint
		h         EndpointHealth
		queued    int
		wantLimit int
		wantStop  string
	}{
		{"empty queue: a batch of the concurrency", route, limited, active, 0, 8, ""},
		{"half a batch queued: the next", route, limited, active, 4, 8, ""},
		{"more than half a batch queued: wait", route, limited, active, 5, 0, ""},
		{"no limit: the default batch", route, unlimited, EndpointHealth{Endpoint: "a"}, 0, DefaultRedriveBatch, ""},
		{"failing: wait", route, limited, EndpointHealth{Endpoint: "a", State: HealthTimeout}, 0, 0, ""},
		{"suspended again: stop", route, limited, EndpointHealth{Endpoint: "a", State: HealthSuspended}, 0, 0, "endpoint a is suspended again"},
		{"switched off: stop", route, limited, EndpointHealth{Endpoint: "a", State: HealthOff}, 0, 0, "endpoint a was switched off"},
		{"route removed", nil, limited, active, 0, 0, "the route was removed"},
		{"route no longer re-drives", &Route{Name: "r", Endpoints: []string{"a"}}, limited, active, 0, 0, "the route no longer re-drives on recovery"},
		{"endpoint removed", route, nil, active, 0, 0, "endpoint a is no longer one of the route's"},
	}
	for _, tt := range tests {
		limit, stop := RedrivePace(tt.route, tt.ep, tt.h, tt.queued)
		if limit != tt.wantLimit || stop != tt.wantStop {
			t.Errorf("%s: got %d %q, want %d %q", tt.name, limit, stop, tt.wantLimit, tt.wantStop)
		}
	}
}

func TestRedriveOp(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 3, 1, 12, 0, 0, 1500, time.UTC)
	route := &Route{Name: "r", Endpoints: []string{"a", "b"}, Redrive: &Redrive{OnRecovery: true}}
	op, ok := route.RedriveOp("b", at)
	if !ok {
		t.Fatal("RedriveOp: not re-driven")
	}
	if op.ID != RedriveID("r", "b", at) || op.Who != SystemWho || op.Kind != ActionResubmit || op.Filter.Route != "r" ||
		op.Filter.State != StateSuspended || !slices.Equal(op.Filter.Reasons, DefaultRedriveReasons) ||
		!op.Filter.CreatedAfter.Equal(at.Truncate(time.Microsecond).Add(-DefaultRedriveMaxAge)) || op.Redrive.Endpoint != "b" {
		t.Errorf("RedriveOp: %+v", op)
	}
	if !strings.Contains(op.ActionDetail(), "re-drive after the recovery of endpoint b") {
		t.Errorf("ActionDetail: %q", op.ActionDetail())
	}
	if again, _ := route.RedriveOp("b", at); again.ID != op.ID {
		t.Errorf("the same recovery gives another id: %s, %s", again.ID, op.ID)
	}
	if other, _ := route.RedriveOp("b", at.Add(time.Second)); other.ID == op.ID {
		t.Errorf("another recovery gives the same id %s", op.ID)
	}
	// Rejected and invalid messages are never taken, whatever the setting says.
	route.Redrive.Reasons = []Reason{ReasonRejected, ReasonExhausted, ReasonInvalid}
	if op, _ := route.RedriveOp("a", at); !slices.Equal(op.Filter.Reasons, []Reason{ReasonExhausted}) {
		t.Errorf("reasons: %v", op.Filter.Reasons)
	}
	if _, ok := route.RedriveOp("c", at); ok {
		t.Error("a re-drive for an endpoint not of the route")
	}
	if _, ok := (&Route{Name: "r", Endpoints: []string{"a"}}).RedriveOp("a", at); ok {
		t.Error("a re-drive for a route without redrive")
	}
	if long := RedriveID(strings.Repeat("r", 200), "a", at); len(long) > MaxIDLen {
		t.Errorf("RedriveID is %d long", len(long))
	}
}
