package courier_test

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestHeld(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	single := &courier.Route{Name: "r", Endpoints: []string{"a"}, Strategy: courier.StrategySingle}
	failover := &courier.Route{Name: "r", Endpoints: []string{"a", "b"}, Strategy: courier.StrategyFailover}
	lookup := &courier.Route{Name: "r", Lookup: &courier.Lookup{}}
	off := courier.EndpointHealth{State: courier.HealthOff, UpdatedAt: now.Add(-time.Hour)}
	suspended := func(until time.Duration) courier.EndpointHealth {
		return courier.EndpointHealth{State: courier.HealthSuspended, SuspendedUntil: now.Add(until), UpdatedAt: now.Add(-time.Minute)}
	}
	queued := func(due time.Duration) *courier.Message {
		return &courier.Message{ID: "m", State: courier.StateQueued, NextAttemptAt: now.Add(due)}
	}
	for _, tt := range []struct {
		name   string
		m      *courier.Message
		r      *courier.Route
		health map[string]courier.EndpointHealth
		want   []courier.HeldBy // nil: not held
	}{
		{"active endpoint", queued(-7 * time.Second), single, nil, nil},
		{"off", queued(-7 * time.Second), single, map[string]courier.EndpointHealth{"a": off},
			[]courier.HeldBy{{Endpoint: "a", State: courier.HealthOff, Since: off.UpdatedAt}}},
		{"suspended past its due time", queued(-7 * time.Second), single, map[string]courier.EndpointHealth{"a": suspended(30 * time.Second)},
			[]courier.HeldBy{{Endpoint: "a", State: courier.HealthSuspended, Until: now.Add(30 * time.Second), Since: now.Add(-time.Minute)}}},
		{"suspension over, probe not yet back", queued(-7 * time.Second), single, map[string]courier.EndpointHealth{"a": suspended(-time.Second)},
			[]courier.HeldBy{{Endpoint: "a", State: courier.HealthSuspended, Until: now.Add(-time.Second), Since: now.Add(-time.Minute)}}},
		{"retry due after the suspension ends", queued(10 * time.Minute), single, map[string]courier.EndpointHealth{"a": suspended(30 * time.Second)}, nil},
		{"retry due before the suspension ends", queued(10 * time.Second), single, map[string]courier.EndpointHealth{"a": suspended(30 * time.Second)},
			[]courier.HeldBy{{Endpoint: "a", State: courier.HealthSuspended, Until: now.Add(30 * time.Second), Since: now.Add(-time.Minute)}}},
		{"timeout still sends", queued(0), single, map[string]courier.EndpointHealth{"a": {State: courier.HealthTimeout}}, nil},
		{"failover with a backup that sends", queued(0), failover, map[string]courier.EndpointHealth{"a": off}, nil},
		{"failover, both held: the suspended one first", queued(0), failover,
			map[string]courier.EndpointHealth{"a": off, "b": suspended(time.Minute)},
			[]courier.HeldBy{{Endpoint: "b", State: courier.HealthSuspended, Until: now.Add(time.Minute), Since: now.Add(-time.Minute)},
				{Endpoint: "a", State: courier.HealthOff, Since: off.UpdatedAt}}},
		{"suspended message", &courier.Message{State: courier.StateSuspended}, single, map[string]courier.EndpointHealth{"a": off}, nil},
		{"in flight", &courier.Message{State: courier.StateInflight}, single, map[string]courier.EndpointHealth{"a": off}, nil},
		{"waiting for its key", &courier.Message{State: courier.StateQueued, OrderingKey: "k"}, single, map[string]courier.EndpointHealth{"a": off}, nil},
		{"route not configured", queued(0), nil, nil, nil},
		{"lookup route, never tried", queued(0), lookup, map[string]courier.EndpointHealth{"lookup:x": off}, nil},
		{"lookup route, its endpoint off", &courier.Message{State: courier.StateQueued, Endpoint: "lookup:x", NextAttemptAt: now}, lookup,
			map[string]courier.EndpointHealth{"lookup:x": off}, []courier.HeldBy{{Endpoint: "lookup:x", State: courier.HealthOff, Since: off.UpdatedAt}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := courier.Held(tt.m, tt.r, func(name string) courier.EndpointHealth { return tt.health[name] }, now)
			switch {
			case tt.want == nil && got != nil:
				t.Fatalf("held by %+v, want not held", got.Endpoints)
			case tt.want == nil:
				return
			case got == nil:
				t.Fatalf("not held, want held by %+v", tt.want)
			}
			if len(got.Endpoints) != len(tt.want) {
				t.Fatalf("held by %+v, want %+v", got.Endpoints, tt.want)
			}
			for i := range tt.want {
				g, w := got.Endpoints[i], tt.want[i]
				if g.Endpoint != w.Endpoint || g.State != w.State || !g.Until.Equal(w.Until) || !g.Since.Equal(w.Since) {
					t.Errorf("endpoint %d: %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestShownError(t *testing.T) {
	for _, tt := range []struct {
		state courier.State
		want  string
	}{
		{courier.StateDelivered, ""},
		{courier.StateQueued, "HTTP 503"},
		{courier.StateSuspended, "HTTP 503"},
		{courier.StateDiscarded, "HTTP 503"},
	} {
		m := &courier.Message{State: tt.state, LastError: "HTTP 503", LastClass: courier.ClassHTTP5xx}
		if got, _ := courier.ShownError(m); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.state, got, tt.want)
		}
	}
}
