package engine_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
	"github.com/courier-gw/courier/postgres"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	filetransport "github.com/courier-gw/courier/transport/file"
	httptransport "github.com/courier-gw/courier/transport/http"
	natstransport "github.com/courier-gw/courier/transport/nats"
)

// harness is an engine on a real store delivering over real HTTP to a sink
// on loopback: SQLite, or PostgreSQL under TestOnPostgres.
type harness struct {
	t     *testing.T
	store courier.Store
	// wrap, when a test's build function sets it, stands between the
	// engine and the store, to watch what the engine asks of it.
	wrap   func(courier.Store) courier.Store
	sink   *sink.Sink
	engine *engine.Engine
	top    *courier.Topology
	reopen func() *postgres.Store // on PostgreSQL: the same database for another node
	// resolver resolves lookup routes' recipients, when a test sets it in
	// its build function.
	resolver courier.Resolver
	// poll, when a test's build function sets it, is the engine's poll
	// interval (and so the spacing of its sweeps) instead of 20 ms.
	poll time.Duration
	// alerts, when a test's build function sets it, is the engines'
	// alerts section.
	alerts *courier.Alerts
	// bulks are the engines' runners of bulk operations (and re-drives).
	bulks map[*engine.Engine]*engine.Bulk
	// logger, when a test's build function sets it, is the engines' logger.
	logger *slog.Logger
	// workers, when a test's build function sets it, bounds the engines'
	// attempts in flight.
	workers int
	nodes   int // engines started
}

// httpEndpoint is an endpoint on the sink's path.
func (h *harness) httpEndpoint(name, path string) *courier.Endpoint {
	return &courier.Endpoint{Name: name, Transport: courier.TransportHTTP, Timeout: 2 * time.Second, MaxConcurrency: 16,
		Settings: &httptransport.Settings{URL: h.sink.URL() + path, Method: http.MethodPost}}
}

func newHarness(t *testing.T, build func(h *harness)) *harness {
	t.Helper()
	store, limits, reopen := openStore(t)
	sk, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: store, sink: sk, reopen: reopen, top: &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{}, Routes: map[string]*courier.Route{},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}}
	build(h)
	t.Cleanup(sk.Close)
	t.Cleanup(func() { store.Close() })
	h.engine = h.startEngine(store, limits)
	return h
}

// startEngine starts an engine on the store with the harness's topology and
// real senders; it is stopped when the test ends, before the sink and the
// store close.
func (h *harness) startEngine(store courier.Store, limits courier.SharedLimits) *engine.Engine {
	t := h.t
	// The sink is on loopback, which the SSRF guard blocks unless allowed.
	tr := httptransport.New(httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	amqpSender := amqptransport.New(amqptransport.Options{})
	natsSender := natstransport.New(natstransport.Options{})
	if h.wrap != nil {
		store = h.wrap(store)
	}
	// On a shared store each node is present in it, under a name of its
	// own, as courier serve's nodes are.
	presence, _ := limits.(courier.Presence)
	h.nodes++
	e := engine.New(engine.Options{
		Store: store, Topology: h.top, Presence: presence, Owner: fmt.Sprintf("node-%d", h.nodes),
		Senders: map[courier.Transport]courier.Sender{
			courier.TransportHTTP: tr,
			courier.TransportFile: filetransport.New(filetransport.Options{}),
			courier.TransportAMQP: amqpSender,
			courier.TransportNATS: natsSender,
		},
		PollInterval: cmp.Or(h.poll, 20*time.Millisecond), TimerInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond,
		RandFunc: func() float64 { return 0.5 }, Limits: limits, Resolver: h.resolver, Alerts: h.alerts, Logger: h.logger,
		Workers: h.workers,
	})
	// The senders close once the engine has stopped (cleanups run last
	// first).
	t.Cleanup(func() {
		tr.Close()
		amqpSender.Close()
		natsSender.Close()
	})
	startstoptest.Start(t, e)
	// The node's bulk operations, as courier serve runs them: they stop
	// before the engine.
	bulk := engine.NewBulk(store, nil, nil, e.Wake, nil)
	e.Redrive(bulk)
	startstoptest.Start(t, bulk)
	if h.bulks == nil {
		h.bulks = map[*engine.Engine]*engine.Bulk{}
	}
	h.bulks[e] = bulk
	return e
}

// addNode starts another node on the harness's PostgreSQL database: a
// store and an engine of its own, as another courier serve process has.
func (h *harness) addNode() *engine.Engine {
	h.t.Helper()
	if h.reopen == nil {
		h.t.Fatal("several nodes need the PostgreSQL store: run the test under TestOnPostgres")
	}
	s := h.reopen()
	h.t.Cleanup(func() { s.Close() })
	return h.startEngine(s, s)
}

// addEngine starts another engine on the harness's own store: on SQLite,
// which one process keeps, it stands for another node in a test of what a
// node learns only through the store.
func (h *harness) addEngine() *engine.Engine {
	h.t.Helper()
	return h.startEngine(h.store, nil)
}

// direct adds an endpoint on the sink's path /name and a route of the same
// name to it alone.
func (h *harness) direct(name string) {
	h.top.Endpoints[name] = h.httpEndpoint(name, "/"+name)
	h.route(name, name)
}

func (h *harness) route(name string, endpoints ...string) {
	h.top.Routes[name] = &courier.Route{Name: name, Endpoints: endpoints, Strategy: courier.StrategySingle}
	if len(endpoints) > 1 {
		h.top.Routes[name].Strategy = courier.StrategyFailover
	}
}

func (h *harness) policy(p *courier.Policy) { h.top.Policies[p.Name] = p }

func (h *harness) send(id, typ, route string) {
	h.t.Helper()
	m := &courier.Message{ID: id, Type: typ, Route: route, Payload: []byte(`{"id":"` + id + `"}`), ContentType: "application/json"}
	courier.Accept(m, h.top.Policy(typ), false, time.Now())
	if _, err := h.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		h.t.Fatal(err)
	}
	h.engine.Due([]string{route})
}

// deliverEach sends n messages of type t to route, their ids format
// applied to 0 … n-1, and waits until each is delivered.
func (h *harness) deliverEach(format string, n int, route string) {
	h.t.Helper()
	for i := range n {
		h.send(fmt.Sprintf(format, i), "t", route)
	}
	for i := range n {
		h.waitState(fmt.Sprintf(format, i), courier.StateDelivered)
	}
}

// waitState waits until the message is in the state, and returns it.
func (h *harness) waitState(id string, want courier.State) *courier.Message {
	h.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := h.store.Message(context.Background(), id)
		if err == nil && m.State == want {
			return m
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: state %v (%v), want %s", id, m, err, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *harness) attempts(id string) []courier.Attempt {
	h.t.Helper()
	a, err := h.store.Attempts(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// countStays gives a request that should not come the time to arrive, and
// fails unless the sink has had exactly want on path; what says when.
func (h *harness) countStays(path string, want int, what string) {
	h.t.Helper()
	time.Sleep(300 * time.Millisecond)
	if n := h.sink.Count(path); n != want {
		h.t.Fatalf("%d requests to %s %s, want %d", n, path, what, want)
	}
}

func schedulePolicy(name string, delays ...time.Duration) *courier.Policy {
	p := courier.DefaultPolicy()
	p.Name, p.Schedule = name, delays
	return p
}

// steadyPolicy retries every interval, without jitter, up to maxAttempts
// attempts in all.
func steadyPolicy(name string, maxAttempts int, every time.Duration) *courier.Policy {
	p := courier.DefaultPolicy()
	p.Name, p.MaxAttempts = name, maxAttempts
	p.Backoff = courier.Backoff{Initial: every, Factor: 1, Max: every}
	return p
}

func TestRetriesOnTheScheduleUntilDelivered(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		h.policy(schedulePolicy("invoice", 200*time.Millisecond, 400*time.Millisecond, time.Minute))
		h.sink.Script("/acme", sink.Respond(500), sink.Respond(500), sink.Respond(200))
	})
	h.send("inv-1", "invoice", "acme")
	m := h.waitState("inv-1", courier.StateDelivered)
	arrivals := h.sink.Arrivals("/acme")
	if len(arrivals) != 3 {
		t.Fatalf("%d arrivals, want 3", len(arrivals))
	}
	for i, want := range []time.Duration{200 * time.Millisecond, 400 * time.Millisecond} {
		if gap := arrivals[i+1].Time.Sub(arrivals[i].Time); gap < want {
			t.Errorf("retry %d came %v after the attempt before, want at least %v", i+1, gap, want)
		}
	}
	for i, a := range arrivals {
		if got := a.Header.Get("Courier-Attempt"); got != fmt.Sprint(i+1) {
			t.Errorf("arrival %d: Courier-Attempt %q", i, got)
		}
		if a.Header.Get("webhook-id") != "inv-1" || a.Header.Get("Courier-Type") != "invoice" || string(a.Body) != `{"id":"inv-1"}` {
			t.Errorf("arrival %d: headers %v body %s", i, a.Header, a.Body)
		}
	}
	if m.Attempts != 3 || m.TotalAttempts != 3 || m.Endpoint != "acme" || m.FinishedAt.IsZero() {
		t.Errorf("delivered message: %+v", m)
	}
	hist := h.attempts("inv-1")
	if len(hist) != 3 {
		t.Fatalf("history of %d attempts, want 3", len(hist))
	}
	if a := h.engine.Activity("acme"); a.InFlight != 0 || a.LastHour["delivered"] != 1 || a.LastHour["http_5xx"] != 2 {
		t.Errorf("activity of acme: %+v, want 1 delivered and 2 http_5xx in the last hour", a)
	}
	for i, wantOutcome := range []courier.Outcome{courier.OutcomeFailed, courier.OutcomeFailed, courier.OutcomeDelivered} {
		a := hist[i]
		if a.N != i+1 || a.Outcome != wantOutcome || a.Endpoint != "acme" || a.Route != "acme" {
			t.Errorf("attempt %d: %+v", i+1, a)
		}
		if wantOutcome == courier.OutcomeFailed && (a.Class != courier.ClassHTTP5xx || a.Status != 500) {
			t.Errorf("attempt %d: class %s status %d", i+1, a.Class, a.Status)
		}
	}
}

func TestPermanentErrorSuspendsAtOnce(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		h.sink.Script("/acme", sink.Respond(400).WithBody(`{"error":"bad vat number"}`))
	})
	h.send("inv-1", "invoice", "acme")
	m := h.waitState("inv-1", courier.StateSuspended)
	if m.Reason != courier.ReasonRejected || m.Attempts != 1 || m.LastClass != courier.ClassHTTP4xx {
		t.Fatalf("%+v", m)
	}
	hist := h.attempts("inv-1")
	if len(hist) != 1 || !strings.Contains(hist[0].Response, "bad vat number") || hist[0].Status != 400 {
		t.Fatalf("history %+v", hist)
	}
	h.countStays("/acme", 1, "after a permanent error")
}

func TestExhaustedAfterMaxAttempts(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		p := courier.DefaultPolicy()
		p.Name, p.MaxAttempts = "order", 4
		p.Backoff = courier.Backoff{Initial: 20 * time.Millisecond, Factor: 2, Max: 100 * time.Millisecond}
		h.policy(p)
		h.sink.Script("/acme", sink.Respond(503), sink.Repeat)
	})
	h.send("o-1", "order", "acme")
	m := h.waitState("o-1", courier.StateSuspended)
	if m.Reason != courier.ReasonExhausted || m.Attempts != 4 {
		t.Fatalf("%+v", m)
	}
	hist := h.attempts("o-1")
	if len(hist) != 4 {
		t.Fatalf("%d attempts in the history, want 4", len(hist))
	}
	for _, a := range hist {
		if a.Outcome != courier.OutcomeFailed || a.Class != courier.ClassHTTP5xx || a.Status != 503 {
			t.Errorf("attempt %+v", a)
		}
	}
	h.countStays("/acme", 4, "after the last attempt")
}

func TestRetryAfterIsHonoured(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		h.policy(schedulePolicy("invoice", 10*time.Millisecond))
		h.sink.Script("/acme", sink.Respond(429).WithHeader("Retry-After", "2"), sink.Respond(204))
	})
	h.send("inv-1", "invoice", "acme")
	h.waitState("inv-1", courier.StateDelivered)
	a := h.sink.Arrivals("/acme")
	if len(a) != 2 {
		t.Fatalf("%d arrivals", len(a))
	}
	if gap := a[1].Time.Sub(a[0].Time); gap < 2*time.Second {
		t.Fatalf("retried %v after a 429 with Retry-After: 2", gap)
	}
}

func TestEscalationNoticeOnceAndFallbackDelivers(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.top.Endpoints["acme"] = h.httpEndpoint("acme", "/acme")
		h.top.Endpoints["vans"] = h.httpEndpoint("vans", "/vans")
		h.top.Endpoints["ops"] = h.httpEndpoint("ops", "/ops")
		h.route("acme", "acme")
		h.route("vans", "vans")
		p := schedulePolicy("invoice", 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond)
		p.Escalate = []courier.Escalation{{After: 150 * time.Millisecond, Notify: "ops"}}
		p.Fallback = &courier.Fallback{Route: "vans"} // when the schedule runs out
		h.policy(p)
		h.sink.Script("/acme", sink.Respond(503), sink.Repeat)
	})
	h.send("inv-1", "invoice", "acme")
	m := h.waitState("inv-1", courier.StateDelivered)
	if m.Route != "vans" || m.FallbackFrom != "acme" || m.Endpoint != "vans" {
		t.Fatalf("delivered %+v, want by the fallback route vans", m)
	}
	if n := h.sink.Count("/acme"); n != 6 {
		t.Errorf("%d attempts on the primary route, want 6 (schedule of 5 + 1)", n)
	}
	if n := h.sink.Count("/vans"); n != 1 {
		t.Errorf("%d deliveries on the fallback, want 1", n)
	}
	// The history shows both routes.
	hist := h.attempts("inv-1")
	if last := hist[len(hist)-1]; last.Route != "vans" || last.Outcome != courier.OutcomeDelivered || hist[0].Route != "acme" {
		t.Errorf("history %+v", hist)
	}
	// One escalation and one fallback notice reached ops, each once.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sink.Wait(ctx, "/ops", 2); err != nil {
		t.Fatalf("notices at ops: %d, %v", h.sink.Count("/ops"), err)
	}
	time.Sleep(300 * time.Millisecond)
	var kinds []string
	for _, a := range h.sink.Arrivals("/ops") {
		var b courier.NoticeBody
		if err := json.Unmarshal(a.Body, &b); err != nil {
			t.Fatal(err)
		}
		if b.MessageID != "inv-1" || a.Header.Get("Courier-Type") != courier.NoticeType {
			t.Errorf("notice %s: %+v", a.Body, a.Header)
		}
		kinds = append(kinds, b.Notice)
	}
	if len(kinds) != 2 || !(strings.Contains(strings.Join(kinds, ","), "escalation") && strings.Contains(strings.Join(kinds, ","), "fallback")) {
		t.Fatalf("notices %v, want one escalation and one fallback", kinds)
	}
}

func TestResubmitDeliversAndDiscardSendsNothing(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("acme")
		h.sink.Script("/acme", sink.Respond(422), sink.Respond(422), sink.Respond(204))
	})
	ctx := context.Background()
	h.send("a", "invoice", "acme")
	h.waitState("a", courier.StateSuspended)
	h.send("b", "invoice", "acme")
	h.waitState("b", courier.StateSuspended)

	if _, err := h.store.Resubmit(ctx, "a", "", courier.Action{At: time.Now(), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	h.engine.Wake()
	m := h.waitState("a", courier.StateDelivered)
	if m.ResubmitCount != 1 || m.Attempts != 1 || m.TotalAttempts != 2 {
		t.Errorf("resubmitted and delivered: %+v", m)
	}
	if hist := h.attempts("a"); len(hist) != 2 || hist[0].Outcome != courier.OutcomeFailed || hist[1].Outcome != courier.OutcomeDelivered {
		t.Errorf("history keeps the earlier attempt: %+v", hist)
	}

	if _, err := h.store.Discard(ctx, "b", courier.Action{At: time.Now(), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	h.countStays("/acme", h.sink.Count("/acme"), "after a discard")
}

func TestMaxConcurrencyAtTheSink(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("slow")
		h.top.Endpoints["slow"].MaxConcurrency = 2
		h.sink.Script("/slow", sink.Delay(50*time.Millisecond, 204), sink.Repeat)
	})
	h.deliverEach("m-%d", 12, "slow")
	if got := h.sink.MaxConcurrent("/slow"); got > 2 || got < 1 {
		t.Fatalf("%d requests open at once at the sink, max_concurrency 2", got)
	}
}

// Two routes on one endpoint: their claims may together take more than the
// endpoint's free slots, yet the receiver never sees more than
// max_concurrency requests at once.
func TestMaxConcurrencyAcrossRoutesSharingAnEndpoint(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		ep := h.httpEndpoint("shared", "/shared")
		ep.MaxConcurrency = 2
		h.top.Endpoints["shared"] = ep
		h.route("a", "shared")
		h.route("b", "shared")
		h.sink.Script("/shared", sink.Delay(30*time.Millisecond, 204), sink.Repeat)
	})
	for i := 0; i < 20; i++ {
		h.send(fmt.Sprintf("m-%d", i), "t", []string{"a", "b"}[i%2])
	}
	for i := 0; i < 20; i++ {
		h.waitState(fmt.Sprintf("m-%d", i), courier.StateDelivered)
	}
	if got := h.sink.MaxConcurrent("/shared"); got > 2 {
		t.Fatalf("%d requests open at once at an endpoint with max_concurrency 2", got)
	}
}

// A stop that runs out of time cuts off the attempts still under way, as a
// crash would: Stop returns soon after its context ends and says so, and
// nothing of the cut-off attempts is written. The messages stay leased
// until their leases lapse, with no attempt recorded against them.
func TestStopCutsOffAttemptsThatOutlastIt(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("slow")
		h.top.Endpoints["slow"].Timeout = 5 * time.Minute
		h.sink.Script("/slow", sink.BlackHole(), sink.Repeat)
	})
	ids := []string{"s-1", "s-2", "s-3"}
	for _, id := range ids {
		h.send(id, "t", "slow")
	}
	deadline := time.Now().Add(20 * time.Second)
	for h.sink.Count("/slow") < len(ids) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d attempts reached the receiver", h.sink.Count("/slow"), len(ids))
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := h.engine.Stop(ctx)
	// Without the cut-off, Stop would wait for the endpoint's timeout (five
	// minutes); with it, its context's 200 ms and the half second the cut-off
	// work gets to wind down, and some slack for a busy machine.
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "cut off") || took > 5*time.Second {
		t.Fatalf("Stop took %v and returned %v; want an error that says the attempts were cut off", took, err)
	}
	// The receiver goes away: the requests it held end with an error,
	// which must not be taken for the attempts' outcome.
	h.sink.Close()
	time.Sleep(500 * time.Millisecond)
	for _, id := range ids {
		m := h.waitState(id, courier.StateInflight)
		if hist := h.attempts(id); len(hist) != 0 || m.Attempts != 0 {
			t.Errorf("%s: %d attempts recorded (%d in the round) for an attempt a stop cut off, want none", id, len(hist), m.Attempts)
		}
	}
}
