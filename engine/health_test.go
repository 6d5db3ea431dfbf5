package engine_test

import (
	"context"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// withRules gives an endpoint the default health rules of docs/design.md §4 with
// short suspensions.
func withRules(ep *courier.Endpoint, initial, max time.Duration) *courier.Endpoint {
	ep.TimeoutOn = []courier.ErrorClass{courier.ClassTimeout, courier.ClassConnectTimeout, courier.ClassConnectionClosed, courier.ClassHTTP5xx}
	ep.SuspendOn = []courier.ErrorClass{courier.ClassDNS, courier.ClassConnectRefused, courier.ClassTLS, courier.ClassHTTP429}
	ep.RetriesBeforeSuspension = 3
	ep.Suspension = courier.Backoff{Initial: initial, Factor: 2, Max: max}
	return ep
}

// suspendingOn makes a failure of class suspend ep at once, instead of
// counting towards its timeout state.
func suspendingOn(ep *courier.Endpoint, class courier.ErrorClass) *courier.Endpoint {
	ep.SuspendOn = append(ep.SuspendOn, class)
	ep.TimeoutOn = slices.DeleteFunc(ep.TimeoutOn, func(c courier.ErrorClass) bool { return c == class })
	return ep
}

func (h *harness) health(name string) courier.EndpointHealth {
	h.t.Helper()
	all, err := h.store.Health(context.Background())
	if err != nil {
		h.t.Fatal(err)
	}
	for _, eh := range all {
		if eh.Endpoint == name {
			return eh
		}
	}
	return courier.EndpointHealth{Endpoint: name, State: courier.HealthActive}
}

func (h *harness) waitHealth(name string, want courier.HealthState) courier.EndpointHealth {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		eh := h.health(name)
		if eh.State == want {
			return eh
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("endpoint %s is %+v, want %s", name, eh, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Refused connections suspend the endpoint at once; its messages are then
// held: queued, not attempted, their attempt count untouched.
func TestRefusedSuspendsAndHolds(t *testing.T) {
	addr := closedPort(t)
	watch := &claimWatch{routes: map[string]int{}}
	h := newHarness(t, func(h *harness) {
		ep := withRules(h.httpEndpoint("down", "/"), time.Hour, time.Hour)
		httptransport.Of(ep).URL = "http://" + addr + "/in"
		h.top.Endpoints["down"] = ep
		h.route("down", "down")
		h.policy(schedulePolicy("t", 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond))
		h.wrap = func(s courier.Store) courier.Store { watch.Store = s; return watch }
	})
	h.send("first", "t", "down")
	eh := h.waitHealth("down", courier.HealthSuspended)
	if eh.Suspensions != 1 || eh.SuspendedUntil.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("after one refused connection: %+v", eh)
	}
	for i := 0; i < 5; i++ {
		h.send(fmt.Sprintf("held-%d", i), "t", "down")
	}
	watch.waitSweeps(t, watch.swept()+10) // many poll rounds
	for i := 0; i < 5; i++ {
		m, err := h.store.Message(context.Background(), fmt.Sprintf("held-%d", i))
		if err != nil || m.State != courier.StateQueued || m.Attempts != 0 || m.TotalAttempts != 0 {
			t.Fatalf("held message: %+v %v", m, err)
		}
	}
	if m, _ := h.store.Message(context.Background(), "first"); m.Attempts != 1 || m.State != courier.StateQueued {
		t.Fatalf("the message that hit the refusal: %+v (want queued after one attempt, retrying later)", m)
	}
}

// Black-holed requests: active, then timeout, then suspended after
// retries_before_suspension more failures.
func TestBlackHoleTimeoutThenSuspended(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		ep := withRules(h.httpEndpoint("hole", "/hole"), time.Hour, time.Hour)
		ep.Timeout, ep.MaxConcurrency = 150*time.Millisecond, 1
		h.top.Endpoints["hole"] = ep
		h.route("hole", "hole")
		h.policy(schedulePolicy("t", time.Hour))
		h.sink.Script("/hole", sink.BlackHole(), sink.Repeat)
	})
	var states []courier.HealthState
	for i := 0; i < 4; i++ {
		before := h.health("hole")
		h.send(fmt.Sprintf("m-%d", i), "t", "hole")
		h.waitState(fmt.Sprintf("m-%d", i), courier.StateQueued)
		deadline := time.Now().Add(20 * time.Second)
		for {
			if m, _ := h.store.Message(context.Background(), fmt.Sprintf("m-%d", i)); m.Attempts == 1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("m-%d was not attempted", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The health update follows the outcome; each timeout changes the
		// health (it counts, or suspends).
		for h.health("hole") == before {
			if time.Now().After(deadline) {
				t.Fatalf("the health stayed %+v after m-%d timed out", before, i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		states = append(states, h.health("hole").State)
	}
	want := fmt.Sprint([]courier.HealthState{courier.HealthTimeout, courier.HealthTimeout, courier.HealthTimeout, courier.HealthSuspended})
	if fmt.Sprint(states) != want {
		t.Fatalf("states after each black-holed attempt: %v, want %s", states, want)
	}
	if c := h.attempts("m-0"); len(c) != 1 || c[0].Class != courier.ClassTimeout {
		t.Fatalf("attempt: %+v", c)
	}
}

// A suspended endpoint gets exactly one probe at a time, and the
// suspensions grow by the factor up to the maximum; a success ends it.
func TestOneProbeAndGrowingSuspensions(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.top.Endpoints["flaky"] = suspendingOn(withRules(h.httpEndpoint("flaky", "/flaky"), 100*time.Millisecond, 400*time.Millisecond), courier.ClassConnectionClosed)
		h.route("flaky", "flaky")
		h.policy(schedulePolicy("t", 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond))
		// Five resets, then it works.
		h.sink.Script("/flaky", sink.Reset(), sink.Reset(), sink.Reset(), sink.Reset(), sink.Reset(), sink.Respond(204), sink.Repeat)
	})
	// One message makes the endpoint suspended; the rest wait behind it.
	h.send("m-00", "t", "flaky")
	h.waitHealth("flaky", courier.HealthSuspended)
	for i := 1; i < 20; i++ {
		h.send(fmt.Sprintf("m-%02d", i), "t", "flaky")
	}
	for i := 0; i < 20; i++ {
		h.waitState(fmt.Sprintf("m-%02d", i), courier.StateDelivered)
	}
	a := h.sink.Arrivals("/flaky")
	if len(a) != 25 {
		t.Fatalf("%d arrivals, want 25 (5 failures, 20 deliveries)", len(a))
	}
	// Arrivals 1 to 5 are the probes, each alone, after suspensions of 100,
	// 200, 400 and 400 (the maximum) ms; the fifth succeeds.
	for i, want := range []time.Duration{100, 200, 400, 400, 400} {
		if gap := a[i+1].Time.Sub(a[i].Time); gap < want*time.Millisecond {
			t.Errorf("probe %d came %v after the attempt before, want at least %v (one probe per suspension)", i+1, gap, want*time.Millisecond)
		}
	}
	if got := h.health("flaky"); got.State != courier.HealthActive || got.Suspensions != 0 {
		t.Errorf("after the probe succeeded: %+v", got)
	}
}

// A failover route moves to the backup while the primary is suspended and
// returns to the primary when it is back.
func TestFailoverAndReturn(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		// Suspended long enough that the retry of a (10 ms later) meets it
		// suspended however loaded the machine is.
		h.top.Endpoints["primary"] = suspendingOn(withRules(h.httpEndpoint("primary", "/primary"), 2*time.Second, 4*time.Second), courier.ClassHTTP5xx)
		h.top.Endpoints["backup"] = withRules(h.httpEndpoint("backup", "/backup"), time.Second, time.Second)
		h.route("acme", "primary", "backup")
		h.policy(schedulePolicy("t", 10*time.Millisecond, 10*time.Millisecond))
		h.sink.Script("/primary", sink.Respond(503), sink.Respond(204), sink.Repeat)
	})
	h.send("a", "t", "acme")
	suspended := h.waitHealth("primary", courier.HealthSuspended)
	m := h.waitState("a", courier.StateDelivered)
	if m.Endpoint != "backup" {
		t.Fatalf("a was delivered by %s, want the backup after the primary failed", m.Endpoint)
	}
	h.send("b", "t", "acme")
	if m := h.waitState("b", courier.StateDelivered); m.Endpoint != "backup" {
		t.Fatalf("b went to %s while the primary was suspended", m.Endpoint)
	}
	time.Sleep(time.Until(suspended.SuspendedUntil) + 50*time.Millisecond) // the suspension ends
	h.send("c", "t", "acme")
	if m := h.waitState("c", courier.StateDelivered); m.Endpoint != "primary" {
		t.Fatalf("c went to %s, want the primary once its suspension ended (the probe)", m.Endpoint)
	}
	h.waitHealth("primary", courier.HealthActive)
	h.send("d", "t", "acme")
	if m := h.waitState("d", courier.StateDelivered); m.Endpoint != "primary" {
		t.Fatalf("d went to %s, want the recovered primary", m.Endpoint)
	}
}

// Switched off, an endpoint's messages are held; switched on, they go.
func TestOffHoldsAndOnReleases(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		// Off before the engine starts: a switch takes effect with the next
		// claim round, and a round already past its read of the health
		// could still send what arrives meanwhile.
		if _, err := h.store.UpdateHealth(context.Background(), "acme", func(eh courier.EndpointHealth) courier.EndpointHealth { return eh.SwitchedOff(time.Now()) }, nil); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		h.send(fmt.Sprintf("m-%d", i), "t", "acme")
	}
	h.countStays("/acme", 0, "while the endpoint is off")
	if _, err := h.store.UpdateHealth(ctx, "acme", func(eh courier.EndpointHealth) courier.EndpointHealth { return eh.SwitchedOn(time.Now()) }, nil); err != nil {
		t.Fatal(err)
	}
	h.engine.Wake()
	for i := 0; i < 3; i++ {
		if m := h.waitState(fmt.Sprintf("m-%d", i), courier.StateDelivered); m.Attempts != 1 || m.TotalAttempts != 1 {
			t.Errorf("held message delivered after %d attempts (%d in all); want the one that delivered it", m.Attempts, m.TotalAttempts)
		}
	}
}

// min_interval spaces the starts of attempts on an endpoint.
func TestMinIntervalAtTheSink(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		ep := h.httpEndpoint("paced", "/paced")
		ep.MinInterval = 200 * time.Millisecond
		h.top.Endpoints["paced"] = ep
		h.route("paced", "paced")
	})
	// A first message opens the connection, whose setup would otherwise
	// blur the first gap.
	h.send("warm-up", "t", "paced")
	h.waitState("warm-up", courier.StateDelivered)
	h.deliverEach("m-%d", 6, "paced")
	// The engine spaces the actual starts by at least 200 ms (TestPacer
	// checks that exactly). When each request then reaches the sink's handler
	// varies by tens of milliseconds on a loaded machine (the race detector,
	// other packages' tests), so single gaps are checked loosely and the
	// average closely. Without pacing the gaps are near zero.
	a := h.sink.Arrivals("/paced")[1:]
	for i := 1; i < len(a); i++ {
		if gap := a[i].Time.Sub(a[i-1].Time); gap < 150*time.Millisecond {
			t.Errorf("arrivals %d and %d are %v apart, min_interval 200ms", i-1, i, gap)
		}
	}
	if mean := a[len(a)-1].Time.Sub(a[0].Time) / time.Duration(len(a)-1); mean < 190*time.Millisecond {
		t.Errorf("arrivals are %v apart on average, min_interval 200ms", mean)
	}
}

// rate 50/s: in no one-second window do more than 50 attempts (plus one at
// the edge) arrive.
func TestRateAtTheSink(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		ep := h.httpEndpoint("rated", "/rated")
		ep.Rate = courier.Rate{N: 50, Per: time.Second}
		h.top.Endpoints["rated"] = ep
		h.route("rated", "rated")
	})
	const n = 120
	h.deliverEach("m-%03d", n, "rated")
	a := h.sink.Arrivals("/rated")
	if len(a) != n {
		t.Fatalf("%d arrivals, want %d", len(a), n)
	}
	most := 0
	for i := range a {
		in := 0
		for j := i; j < len(a) && a[j].Time.Sub(a[i].Time) < time.Second; j++ {
			in++
		}
		most = max(most, in)
	}
	// 50, one token at the window's edge, and one for the jitter of when
	// requests reach the sink's handler (see TestMinIntervalAtTheSink).
	// Without pacing all 120 arrive within a fraction of a second.
	if most > 52 {
		t.Fatalf("%d arrivals in one second at rate 50/s", most)
	}
}

// Round robin spreads evenly, weighted by the weights; a transient failure
// on one endpoint makes the retry go to another.
func TestSpreadingStrategies(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		for _, name := range []string{"a", "b", "c", "d"} {
			// Room for every message at once: an endpoint whose slots are
			// all taken hands the next message to another.
			h.top.Endpoints[name] = h.httpEndpoint(name, "/"+name)
			h.top.Endpoints[name].MaxConcurrency = 64
		}
		h.top.Routes["rr"] = &courier.Route{Name: "rr", Endpoints: []string{"a", "b"}, Strategy: courier.StrategyRoundRobin}
		h.top.Routes["w"] = &courier.Route{Name: "w", Endpoints: []string{"c", "d"}, Strategy: courier.StrategyWeighted,
			Weights: map[string]int{"c": 3, "d": 1}}
	})
	for i := 0; i < 40; i++ {
		h.send(fmt.Sprintf("rr-%d", i), "t", "rr")
		h.send(fmt.Sprintf("w-%d", i), "t", "w")
	}
	for i := 0; i < 40; i++ {
		h.waitState(fmt.Sprintf("rr-%d", i), courier.StateDelivered)
		h.waitState(fmt.Sprintf("w-%d", i), courier.StateDelivered)
	}
	if a, b := h.sink.Count("/a"), h.sink.Count("/b"); a != 20 || b != 20 {
		t.Errorf("round robin over a and b: %d and %d, want 20 each", a, b)
	}
	if c, d := h.sink.Count("/c"), h.sink.Count("/d"); c != 30 || d != 10 {
		t.Errorf("weighted 3:1 over c and d: %d and %d, want 30 and 10", c, d)
	}
}

func TestRetryPrefersAnotherEndpoint(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		// A 500 is a timeout_on class: a stays sendable (timeout state), yet
		// the retry should go to b.
		h.top.Endpoints["a"] = withRules(h.httpEndpoint("a", "/a"), time.Hour, time.Hour)
		h.top.Endpoints["b"] = withRules(h.httpEndpoint("b", "/b"), time.Hour, time.Hour)
		h.top.Routes["rr"] = &courier.Route{Name: "rr", Endpoints: []string{"a", "b"}, Strategy: courier.StrategyRoundRobin}
		h.top.Routes["fo"] = &courier.Route{Name: "fo", Endpoints: []string{"a", "b"}, Strategy: courier.StrategyFailover}
		h.policy(schedulePolicy("t", 10*time.Millisecond, 10*time.Millisecond))
		h.sink.Script("/a", sink.Respond(500), sink.Repeat)
	})
	for _, route := range []string{"rr", "fo"} {
		for i := 0; i < 4; i++ {
			id := fmt.Sprintf("%s-%d", route, i)
			h.send(id, "t", route)
			m := h.waitState(id, courier.StateDelivered)
			if m.Endpoint != "b" {
				t.Errorf("%s delivered by %s", id, m.Endpoint)
			}
			if hist := h.attempts(id); len(hist) > 2 {
				t.Errorf("%s took %d attempts: after failing on a, the retry should go to b", id, len(hist))
			}
		}
	}
}

// Queued messages of a route that is not (or no longer) configured are
// suspended with reason no_route: at start, and when a reload drops it.
func TestRemovedRouteSuspendsItsMessages(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.top.Endpoints["held"] = h.httpEndpoint("held", "/held")
		h.route("keep", "held")
		h.route("drop", "held")
		// A message of a route this configuration never had, as after an
		// edit while courier was down.
		m := &courier.Message{ID: "orphan", Type: "t", Route: "gone", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		if _, err := h.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
		// The endpoint is off, so that the other messages stay queued.
		if _, err := h.store.UpdateHealth(context.Background(), "held", func(eh courier.EndpointHealth) courier.EndpointHealth {
			return eh.SwitchedOff(time.Now())
		}, nil); err != nil {
			t.Fatal(err)
		}
	})
	if m := h.waitState("orphan", courier.StateSuspended); m.Reason != courier.ReasonNoRoute || !strings.Contains(m.LastError, "gone") {
		t.Fatalf("orphan: %+v", m)
	}
	h.send("k", "t", "keep")
	h.send("d", "t", "drop")
	next := &courier.Topology{Endpoints: h.top.Endpoints, Policies: h.top.Policies,
		Routes: map[string]*courier.Route{"keep": h.top.Routes["keep"]}}
	h.engine.SetTopology(next)
	if m := h.waitState("d", courier.StateSuspended); m.Reason != courier.ReasonNoRoute {
		t.Fatalf("message of the dropped route: %+v", m)
	}
	if m, _ := h.store.Message(context.Background(), "k"); m.State != courier.StateQueued {
		t.Fatalf("message of the kept route: %s", m.State)
	}

	// A route this node has not heard of yet (another node made it a
	// moment ago, and took a message for it) is not taken for a removed
	// one by a change that did not remove it.
	m := &courier.Message{ID: "new", Type: "t", Route: "made-elsewhere", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := h.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	later := &courier.Topology{Endpoints: maps.Clone(h.top.Endpoints), Policies: h.top.Policies, Routes: next.Routes}
	later.Endpoints["extra"] = h.httpEndpoint("extra", "/extra")
	h.engine.SetTopology(later)
	if m, _ := h.store.Message(context.Background(), "new"); m.State != courier.StateQueued {
		t.Fatalf("a message of a route this node does not know yet was %s by an unrelated change", m.State)
	}
}

// Deliveries to a healthy endpoint change nothing in its health, so none is
// written and health_changed keeps the time of the last change; a delivery
// after a failure clears the failure.
func TestDeliveriesLeaveHealthyHealthAsItIs(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.top.Endpoints["ep"] = withRules(h.httpEndpoint("ep", "/ep"), time.Hour, time.Hour)
		h.route("r", "ep")
		h.policy(schedulePolicy("t", 10*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond))
		h.sink.Script("/ep", sink.Respond(204), sink.Respond(204), sink.Respond(503), sink.Respond(204), sink.Repeat)
	})
	// Two deliveries to a healthy endpoint: nothing to write.
	for _, id := range []string{"a", "b"} {
		h.send(id, "t", "r")
		h.waitState(id, courier.StateDelivered)
	}
	all, err := h.store.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 0 {
		t.Fatalf("deliveries to a healthy endpoint wrote its health: %+v", all)
	}
	// A 503 counts a failure; the retry's delivery clears it.
	h.send("c", "t", "r")
	h.waitState("c", courier.StateDelivered)
	cleared := h.waitHealth("ep", courier.HealthActive)
	if cleared.Failures != 0 || cleared.UpdatedAt.IsZero() {
		t.Fatalf("after the failure and the delivery: %+v", cleared)
	}
	// Later deliveries leave that as it is.
	h.send("d", "t", "r")
	h.waitState("d", courier.StateDelivered)
	if got := h.health("ep"); !got.UpdatedAt.Equal(cleared.UpdatedAt) || got.State != courier.HealthActive {
		t.Fatalf("a delivery to a healthy endpoint rewrote its health: %+v, was %+v", got, cleared)
	}
}

// An attempt is decided under the topology it was claimed and sent under:
// a reload while it runs, whose policy would suspend the message at its
// first failure, does not decide an attempt sent under the old one.
func TestAttemptDecidedUnderItsOwnTopology(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.top.Endpoints["slow"] = withRules(h.httpEndpoint("slow", "/slow"), time.Hour, time.Hour)
		h.route("r", "slow")
		h.policy(schedulePolicy("t", time.Hour))
		h.sink.Script("/slow", sink.Delay(500*time.Millisecond, 500))
	})
	h.send("m", "t", "r")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for h.sink.Concurrent("/slow") == 0 {
		if ctx.Err() != nil {
			t.Fatal("the attempt never reached the sink")
		}
		time.Sleep(5 * time.Millisecond)
	}
	strict := courier.DefaultPolicy()
	strict.Name, strict.MaxAttempts = "t", 1
	next := &courier.Topology{Endpoints: h.top.Endpoints, Routes: h.top.Routes,
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy(), "t": strict}}
	h.engine.SetTopology(next)
	var m *courier.Message
	for {
		var err error
		if m, err = h.store.Message(context.Background(), "m"); err == nil && m.State != courier.StateInflight {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the attempt never ended: %+v, %v", m, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if m.State != courier.StateQueued || m.NextAttemptAt.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("after the reload the attempt was decided by the new policy: %s, next attempt %v", m.State, m.NextAttemptAt)
	}
}
