package courier

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestHealthEvent(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	h := func(s HealthState) EndpointHealth {
		return EndpointHealth{State: s, UpdatedAt: at, SuspendedUntil: at.Add(time.Minute), Suspensions: 2}
	}
	tests := []struct {
		before, after HealthState
		want          EventKind // "" for none
	}{
		{HealthActive, HealthSuspended, EventEndpointSuspended},
		{"", HealthSuspended, EventEndpointSuspended},
		{HealthTimeout, HealthSuspended, EventEndpointSuspended},
		{HealthSuspended, HealthSuspended, ""}, // a failed probe: suspended again, no new event
		{HealthActive, HealthOff, EventEndpointOff},
		{HealthSuspended, HealthOff, EventEndpointOff},
		{HealthOff, HealthOff, ""},
		{HealthSuspended, HealthActive, EventEndpointRecovered},
		{HealthOff, HealthActive, EventEndpointRecovered},
		{HealthTimeout, HealthActive, ""}, // never held
		{HealthActive, HealthTimeout, ""},
		{HealthActive, HealthActive, ""},
	}
	for _, tt := range tests {
		ev, ok := HealthEvent("acme", h(tt.before), h(tt.after), "why")
		if got := map[bool]EventKind{true: ev.Kind}[ok]; got != tt.want {
			t.Errorf("%q → %q: event %q, want %q", tt.before, tt.after, got, tt.want)
			continue
		}
		if !ok {
			continue
		}
		if ev.Subject != "acme" || !ev.At.Equal(at.Truncate(time.Microsecond)) || ev.Details.Reason != "why" || ev.Details.State != tt.after {
			t.Errorf("%q → %q: %+v", tt.before, tt.after, ev)
		}
		if again, _ := HealthEvent("acme", h(tt.before), h(tt.after), "other words"); again.ID != ev.ID {
			t.Errorf("the same transition has ids %s and %s", ev.ID, again.ID)
		}
		if (ev.Kind == EventEndpointSuspended) != !ev.Details.SuspendedUntil.IsZero() {
			t.Errorf("%s: suspended_until %v", ev.Kind, ev.Details.SuspendedUntil)
		}
	}
	a, _ := HealthEvent("acme", h(HealthActive), h(HealthSuspended), "")
	later := h(HealthSuspended)
	later.UpdatedAt = at.Add(time.Second)
	b, _ := HealthEvent("acme", h(HealthActive), later, "")
	if a.ID == b.ID {
		t.Errorf("two suspensions at different times share id %s", a.ID)
	}
}

// Ten transitions of an endpoint in a minute send at most max_per_hour
// notices; the subject's count is its own, and an hour later notices go
// out again.
func TestAllowRateLimit(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, perHour := range []int{0, 1, 3, 6, 20} {
		a := &Alerts{Notify: []string{"ops"}, MaxPerHour: perHour}
		var recorded []Event
		sent := 0
		for i := range 10 {
			kind := []EventKind{EventEndpointSuspended, EventEndpointRecovered}[i%2]
			ev := newEvent(kind, "flap", start.Add(time.Duration(i)*6*time.Second), EventDetails{})
			ev.Notified = a.Allow(ev, recorded)
			if ev.Notified {
				sent++
			}
			recorded = append(recorded, ev)
		}
		want := min(10, perHour)
		if perHour == 0 {
			want = DefaultAlertsPerHour
		}
		if sent != want {
			t.Errorf("max_per_hour %d: %d of 10 transitions in a minute sent, want %d", perHour, sent, want)
		}
		// Another subject, and a route of the same name, have counts of their own.
		if other := newEvent(EventEndpointSuspended, "other", start.Add(time.Minute), EventDetails{}); !a.Allow(other, recorded) {
			t.Errorf("max_per_hour %d: another endpoint is held back", perHour)
		}
		if route := newEvent(EventRouteLagging, "flap", start.Add(time.Minute), EventDetails{}); !a.Allow(route, recorded) {
			t.Errorf("max_per_hour %d: a route of the endpoint's name is held back", perHour)
		}
		if later := newEvent(EventEndpointSuspended, "flap", start.Add(time.Hour+time.Minute), EventDetails{}); !a.Allow(later, recorded) {
			t.Errorf("max_per_hour %d: an hour later, still held back", perHour)
		}
	}
	if (&Alerts{}).Allow(newEvent(EventEndpointOff, "a", start, EventDetails{}), nil) {
		t.Error("alerts without notify endpoints allow notices")
	}
	var none *Alerts
	if none.Allow(newEvent(EventEndpointOff, "a", start, EventDetails{}), nil) || none.Lagging("r", start, start.Add(time.Hour)) {
		t.Error("nil alerts allow notices or lags")
	}
}

// The server's notify endpoints and a tenant's alert targets each send
// the first events of the hour up to their own max_per_hour, counted over
// the events that sent notices to anyone.
func TestTenantAlertsRateLimit(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct{ server, tenant int }{{2, 4}, {4, 2}, {3, 3}, {0, 1}} {
		a := &Alerts{Notify: []string{"ops"}, MaxPerHour: tc.server}
		ta := &TenantAlerts{Notify: []string{"acme/pager"}, MaxPerHour: tc.tenant}
		var recorded []Event
		toServer, toTenant := 0, 0
		for i := range 10 {
			ev := newEvent(EventEndpointSuspended, "acme/crm", start.Add(time.Duration(i)*time.Second), EventDetails{})
			s, tn := a.Allow(ev, recorded), ta.Allow(ev, recorded)
			if s {
				toServer++
			}
			if tn {
				toTenant++
			}
			ev.Notified = s || tn
			recorded = append(recorded, ev)
		}
		if toServer != perHour(tc.server) || toTenant != tc.tenant {
			t.Errorf("max_per_hour %d and the tenant's %d: %d sent to the server's and %d to the tenant's", tc.server, tc.tenant, toServer, toTenant)
		}
	}
	top := &Topology{Tenants: map[string]*Tenant{
		"acme": {Name: "acme", Alerts: TenantAlerts{Notify: []string{"acme/pager"}}},
		"beta": {Name: "beta"},
	}}
	for _, tc := range []struct {
		ev   Event
		want bool
	}{
		{newEvent(EventEndpointOff, "acme/crm", start, EventDetails{}), true},
		{newEvent(EventRouteLagging, "acme/orders", start, EventDetails{}), true},
		{newEvent(EventEndpointOff, "beta/crm", start, EventDetails{}), false},
		{newEvent(EventEndpointOff, "crm", start, EventDetails{}), false},
		{newEvent(EventReceiverStopped, "acme/inbox", start, EventDetails{}), false},
	} {
		if got := top.TenantAlerts(tc.ev) != nil; got != tc.want {
			t.Errorf("%s of %s: tenant alerts %v, want %v", tc.ev.Kind, tc.ev.Subject, got, tc.want)
		}
	}
}

func TestLagging(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	a := &Alerts{OldestDue: 10 * time.Minute}
	for _, tt := range []struct {
		route string
		since time.Time
		want  bool
	}{
		{"acme", now.Add(-11 * time.Minute), true},
		{"acme", now.Add(-10 * time.Minute), false},
		{"acme", now.Add(time.Minute), false}, // not due yet
		{"acme", time.Time{}, false},
		{NoticeRoute("ops"), now.Add(-time.Hour), false},
	} {
		if got := a.Lagging(tt.route, tt.since, now); got != tt.want {
			t.Errorf("Lagging(%s, %v) = %v, want %v", tt.route, tt.since, got, tt.want)
		}
	}
	if !(&Alerts{}).Lagging("acme", now.Add(-16*time.Minute), now) || (&Alerts{}).Lagging("acme", now.Add(-14*time.Minute), now) {
		t.Error("the default oldest_due is not 15m")
	}
	// Two nodes that look at different times record the same lag once.
	since := now.Add(-20 * time.Minute)
	x, y := LagEvent("acme", since, now), LagEvent("acme", since, now.Add(3*time.Second))
	if x.ID != y.ID || x.Details.OldestDueAge != 1200 || !x.Details.DueSince.Equal(since) {
		t.Errorf("lag events %+v and %+v", x, y)
	}
}

func TestEventNotices(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ev, _ := HealthEvent("acme-primary", EndpointHealth{}, EndpointHealth{State: HealthSuspended, UpdatedAt: at, SuspendedUntil: at.Add(time.Minute), Suspensions: 1}, "dns: no such host")
	a := &Alerts{Notify: []string{"ops-hook", "ops-mail"}, PublicURL: "https://courier.example.org/"}
	ns := a.Notices(ev, a.Notify)
	if len(ns) != 2 {
		t.Fatalf("%d notices, want one per endpoint", len(ns))
	}
	for i, n := range ns {
		ep := a.Notify[i]
		if n.ID != ev.ID+"."+ep || n.Type != NoticeType || n.Route != NoticeRoute(ep) || n.State != StateQueued || n.Priority != 9 ||
			n.Headers["Courier-Notice"] != string(EventEndpointSuspended) {
			t.Errorf("notice to %s: %+v", ep, n)
		}
		if !ValidID(n.ID) {
			t.Errorf("notice id %q is not a valid id", n.ID)
		}
	}
	var b EventBody
	if err := json.Unmarshal(ns[0].Payload, &b); err != nil {
		t.Fatal(err)
	}
	if b.Event != EventEndpointSuspended || b.Subject != "acme-primary" || b.Kind != "endpoint" || !b.At.Equal(at) ||
		b.Link != "https://courier.example.org/ui/endpoints#ep-acme-primary" || b.Details.Reason != "dns: no such host" ||
		!b.Details.SuspendedUntil.Equal(at.Add(time.Minute)) || !strings.Contains(b.Text, "suspended until") {
		t.Errorf("body %+v", b)
	}
	a.PublicURL = ""
	if body := string(a.Notices(ev, a.Notify)[0].Payload); strings.Contains(body, `"link"`) {
		t.Errorf("a link without public_url: %s", body)
	}
	long := ReceiverEvent(strings.Repeat("r", 200), "stopped by ops", at)
	for _, n := range a.Notices(long, []string{strings.Repeat("e", 100)}) {
		if !ValidID(n.ID) {
			t.Errorf("a long notice id %q is not a valid id", n.ID)
		}
	}
}

// TestEventText: what an event says, for people, names a switch's reason
// once.
func TestEventText(t *testing.T) {
	at := time.Date(2026, 11, 28, 5, 0, 0, 0, time.UTC)
	off := func(reason string) Event {
		ev, _ := HealthEvent("acme", EndpointHealth{}, EndpointHealth{State: HealthOff, UpdatedAt: at}, reason)
		return ev
	}
	for _, tc := range []struct {
		ev   Event
		want string
	}{
		{off("switched off by ops"), "endpoint acme was switched off by ops"},
		{off(""), "endpoint acme was switched off"},
		{off("maintenance"), "endpoint acme was switched off: maintenance"},
	} {
		if got := tc.ev.Text(); got != tc.want {
			t.Errorf("Text() = %q, want %q", got, tc.want)
		}
	}
}
