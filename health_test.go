package courier_test

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// rules is an endpoint with the default health rules of docs/design.md §4.
func rules() *courier.Endpoint {
	return &courier.Endpoint{Name: "acme",
		TimeoutOn:               []courier.ErrorClass{courier.ClassTimeout, courier.ClassConnectTimeout, courier.ClassConnectionClosed, courier.ClassHTTP5xx},
		SuspendOn:               []courier.ErrorClass{courier.ClassDNS, courier.ClassConnectRefused, courier.ClassTLS, courier.ClassHTTP429},
		RetriesBeforeSuspension: 3,
		Suspension:              courier.Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour},
	}
}

func TestAfterOutcome(t *testing.T) {
	now := t0
	active := courier.EndpointHealth{Endpoint: "acme", State: courier.HealthActive}
	timeout2 := courier.EndpointHealth{Endpoint: "acme", State: courier.HealthTimeout, Failures: 2}
	timeout3 := courier.EndpointHealth{Endpoint: "acme", State: courier.HealthTimeout, Failures: 3}
	suspended2 := courier.EndpointHealth{Endpoint: "acme", State: courier.HealthSuspended, Suspensions: 2, SuspendedUntil: now.Add(-time.Second)}
	off := courier.EndpointHealth{Endpoint: "acme", State: courier.HealthOff}
	ok := courier.Result{Status: 204}
	res := func(c courier.ErrorClass) courier.Result { return courier.Result{Class: c} }
	tests := []struct {
		name         string
		h            courier.EndpointHealth
		r            courier.Result
		probe        bool
		state        courier.HealthState
		failures     int
		suspensions  int
		suspendedFor time.Duration
	}{
		{"success stays active", active, ok, false, courier.HealthActive, 0, 0, 0},
		{"zero value is active", courier.EndpointHealth{}, ok, false, courier.HealthActive, 0, 0, 0},
		{"refused suspends at once", active, res(courier.ClassConnectRefused), false, courier.HealthSuspended, 0, 1, 30 * time.Second},
		{"dns suspends at once", active, res(courier.ClassDNS), false, courier.HealthSuspended, 0, 1, 30 * time.Second},
		{"first 5xx: timeout", active, res(courier.ClassHTTP5xx), false, courier.HealthTimeout, 1, 0, 0},
		{"third timeout-class failure", timeout2, res(courier.ClassTimeout), false, courier.HealthTimeout, 3, 0, 0},
		{"fourth in a row suspends", timeout3, res(courier.ClassConnectionClosed), false, courier.HealthSuspended, 0, 1, 30 * time.Second},
		{"success in timeout: active, reset", timeout3, ok, false, courier.HealthActive, 0, 0, 0},
		{"4xx is the message's own: no change", timeout2, res(courier.ClassHTTP4xx), false, courier.HealthTimeout, 2, 0, 0},
		{"429 with retry-after suspends at least that long", active, courier.Result{Class: courier.ClassHTTP429, Status: 429, RetryAfter: 2 * time.Minute}, false, courier.HealthSuspended, 0, 1, 2 * time.Minute},
		{"503 with retry-after suspends, whatever the lists", active, courier.Result{Class: courier.ClassHTTP5xx, Status: 503, RetryAfter: 10 * time.Second}, false, courier.HealthSuspended, 0, 1, 30 * time.Second},
		{"500 with retry-after is only a timeout failure", active, courier.Result{Class: courier.ClassHTTP5xx, Status: 500, RetryAfter: time.Minute}, false, courier.HealthTimeout, 1, 0, 0},
		{"probe succeeds: active, counters reset", suspended2, ok, true, courier.HealthActive, 0, 0, 0},
		{"probe fails: suspended for the next duration", suspended2, res(courier.ClassConnectRefused), true, courier.HealthSuspended, 0, 3, 2 * time.Minute},
		{"probe times out: suspended again at once", suspended2, res(courier.ClassTimeout), true, courier.HealthSuspended, 0, 3, 2 * time.Minute},
		{"probe answered 4xx: the receiver is back", suspended2, res(courier.ClassHTTP4xx), true, courier.HealthActive, 0, 0, 0},
		{"no credentials: the receiver was not reached, no change", timeout2, res(courier.ClassAuth), false, courier.HealthTimeout, 2, 0, 0},
		{"probe without credentials: still suspended, the next attempt probes", suspended2, res(courier.ClassAuth), true, courier.HealthSuspended, 0, 2, -time.Second},
		{"probe without a lookup: still suspended", suspended2, res(courier.ClassLookup), true, courier.HealthSuspended, 0, 2, -time.Second},
		{"off stays off", off, res(courier.ClassConnectRefused), false, courier.HealthOff, 0, 0, 0},
		{"off stays off on success", off, ok, false, courier.HealthOff, 0, 0, 0},
		{"late failure of an attempt begun before the suspension", suspended2, res(courier.ClassConnectRefused), false, courier.HealthSuspended, 0, 2, -time.Second},
		{"late success of an attempt begun before the suspension", suspended2, ok, false, courier.HealthActive, 0, 0, 0},
	}
	for _, tt := range tests {
		got := rules().AfterOutcome(tt.h, tt.r, tt.probe, now)
		if got.State != tt.state || got.Failures != tt.failures || got.Suspensions != tt.suspensions {
			t.Errorf("%s: state %s failures %d suspensions %d; want %s %d %d", tt.name, got.State, got.Failures, got.Suspensions, tt.state, tt.failures, tt.suspensions)
		}
		if tt.state == courier.HealthSuspended && !got.SuspendedUntil.Equal(now.Add(tt.suspendedFor)) {
			t.Errorf("%s: suspended until %v, want %v", tt.name, got.SuspendedUntil, now.Add(tt.suspendedFor))
		}
		if !got.ProbeUntil.IsZero() {
			t.Errorf("%s: a probe is still marked as under way", tt.name)
		}
	}
}

func TestSuspensionGrowsToTheMaximum(t *testing.T) {
	e := rules()
	h := courier.EndpointHealth{}
	var got []time.Duration
	for i := 0; i < 9; i++ {
		now := t0.Add(time.Duration(i) * 2 * time.Hour)
		h = e.AfterOutcome(h, courier.Result{Class: courier.ClassConnectRefused}, h.State == courier.HealthSuspended, now)
		got = append(got, h.SuspendedUntil.Sub(now))
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("suspension %d lasts %v, want %v (all: %v)", i, got[i], want[i], got)
		}
	}
}

func TestSendable(t *testing.T) {
	now := t0
	tests := []struct {
		name      string
		h         courier.EndpointHealth
		ok, probe bool
	}{
		{"never seen", courier.EndpointHealth{}, true, false},
		{"active", courier.EndpointHealth{State: courier.HealthActive}, true, false},
		{"timeout still sends", courier.EndpointHealth{State: courier.HealthTimeout, Failures: 3}, true, false},
		{"suspended", courier.EndpointHealth{State: courier.HealthSuspended, SuspendedUntil: now.Add(time.Second)}, false, false},
		{"suspension over: one probe", courier.EndpointHealth{State: courier.HealthSuspended, SuspendedUntil: now}, true, true},
		{"probe under way: no second", courier.EndpointHealth{State: courier.HealthSuspended, SuspendedUntil: now.Add(-time.Minute), ProbeUntil: now.Add(time.Minute)}, false, false},
		{"probe lapsed: another", courier.EndpointHealth{State: courier.HealthSuspended, SuspendedUntil: now.Add(-time.Minute), ProbeUntil: now.Add(-time.Second)}, true, true},
		{"off", courier.EndpointHealth{State: courier.HealthOff}, false, false},
	}
	for _, tt := range tests {
		ok, probe := tt.h.Sendable(now)
		if ok != tt.ok || probe != tt.probe {
			t.Errorf("%s: Sendable = %v, %v; want %v, %v", tt.name, ok, probe, tt.ok, tt.probe)
		}
	}
	h := courier.EndpointHealth{Endpoint: "acme", State: courier.HealthSuspended, Suspensions: 4}
	if off := h.SwitchedOff(now); off.State != courier.HealthOff {
		t.Errorf("switched off: %+v", off)
	}
	if on := h.SwitchedOff(now).SwitchedOn(now); on.State != courier.HealthActive || on.Suspensions != 0 || on.Endpoint != "acme" {
		t.Errorf("switched on: %+v", on)
	}
}
