package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/promtest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/metrics"
	dto "github.com/prometheus/client_model/go"
)

var now = time.Date(2026, 11, 21, 10, 30, 15, 0, time.UTC)

func topology() *courier.Topology {
	return &courier.Topology{Endpoints: map[string]*courier.Endpoint{
		"acme":   courier.NewEndpoint("acme", courier.TransportHTTP),
		"globex": courier.NewEndpoint("globex", courier.TransportHTTP),
	}}
}

// scrape fetches /metrics over HTTP and parses it as Prometheus does.
func scrape(t *testing.T, m *metrics.Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	return promtest.Parse(t, resp.Body)
}

func message(id, typ, route string, state courier.State, created time.Time) *courier.Message {
	return &courier.Message{ID: id, Type: typ, Route: route, State: state, CreatedAt: created, FinishedAt: now, Endpoint: route}
}

func TestScrape(t *testing.T) {
	store := sqlitetest.Open(t)
	for i := range 3 {
		m := &courier.Message{ID: fmt.Sprintf("q-%d", i), Type: "invoice", Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, now)
		if _, err := store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := store.UpdateHealth(context.Background(), "globex", func(h courier.EndpointHealth) courier.EndpointHealth {
		return h.SwitchedOff(now)
	}, nil); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{Source: store, TopologyFunc: topology, Clock: clocktest.New(now),
		InFlightFunc:         func(ep string) int { return map[string]int{"acme": 2}[ep] },
		ConcurrencyLimitFunc: func(ep string) int { return map[string]int{"acme": 23, "globex": 4}[ep] }})

	fams := scrape(t, m)
	if _, ok := promtest.Value(fams, "courier_queue_messages", "state", "queued"); ok {
		t.Error("queue depth reported before the first count")
	}
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}

	m.Ingested(&courier.Message{Type: "invoice", Route: "acme"})
	m.Ingested(&courier.Message{Type: "invoice", Route: "acme", Subscription: "erp-invoices"}) // a delivery of a published one
	for range 2 {
		m.AttemptDone(message("d", "invoice", "acme", courier.StateInflight, now), "acme", courier.Result{Status: 204}, 30*time.Millisecond)
		m.Applied(courier.Change{From: courier.StateInflight, Message: message("d", "invoice", "acme", courier.StateDelivered, now.Add(-2*time.Second)),
			Attempt: &courier.Attempt{Endpoint: "acme", Outcome: courier.OutcomeDelivered}})
	}
	m.AttemptDone(message("s", "invoice", "acme", courier.StateInflight, now), "acme", courier.Result{Class: courier.ClassHTTP4xx, Status: 400}, 10*time.Millisecond)
	rejected := message("s", "invoice", "acme", courier.StateSuspended, now)
	rejected.Reason = courier.ReasonRejected
	m.Applied(courier.Change{From: courier.StateInflight, Message: rejected,
		Attempt: &courier.Attempt{Endpoint: "acme", Outcome: courier.OutcomeFailed, Class: courier.ClassHTTP4xx}})
	m.Applied(courier.Change{From: courier.StateInflight, Message: message("a", "order", "acme", courier.StateQueued, now),
		Attempt: &courier.Attempt{Endpoint: "acme", Outcome: courier.OutcomeAbandoned}})
	m.HealthChanged("acme", courier.EndpointHealth{State: courier.HealthActive},
		courier.EndpointHealth{State: courier.HealthSuspended, Suspensions: 1})
	m.Acted(courier.ActionResubmit, 5)
	m.OutcomeWritten(20 * time.Millisecond)
	m.OutcomeWritten(30 * time.Millisecond)

	fams = scrape(t, m)
	promtest.Check(t, fams, []promtest.Sample{
		{Name: "courier_messages_ingested_total", Labels: []string{"type", "invoice", "route", "acme", "subscription", ""}, Value: 1},
		{Name: "courier_messages_ingested_total", Labels: []string{"type", "invoice", "route", "acme", "subscription", "erp-invoices"}, Value: 1},
		{Name: "courier_messages_delivered_total", Labels: []string{"type", "invoice", "route", "acme"}, Value: 2},
		{Name: "courier_messages_suspended_total", Labels: []string{"type", "invoice", "route", "acme", "reason", "rejected"}, Value: 1},
		{Name: "courier_attempts_total", Labels: []string{"endpoint", "acme", "outcome", "delivered", "class", ""}, Value: 2},
		{Name: "courier_attempts_total", Labels: []string{"endpoint", "acme", "outcome", "failed", "class", "http_4xx"}, Value: 1},
		{Name: "courier_attempts_total", Labels: []string{"endpoint", "acme", "outcome", "abandoned"}, Value: 1},
		{Name: "courier_attempt_duration_seconds", Labels: []string{"endpoint", "acme"}, Value: 3},
		{Name: "courier_delivery_latency_seconds", Labels: []string{"route", "acme"}, Value: 2},
		{Name: "courier_outcome_wait_seconds", Value: 2},
		{Name: "courier_queue_messages", Labels: []string{"state", "queued"}, Value: 3},
		{Name: "courier_queue_messages", Labels: []string{"state", "suspended"}, Value: 0},
		{Name: "courier_endpoint_health", Labels: []string{"endpoint", "acme", "state", "suspended"}, Value: 1},
		{Name: "courier_endpoint_health", Labels: []string{"endpoint", "acme", "state", "active"}, Value: 0},
		{Name: "courier_endpoint_health", Labels: []string{"endpoint", "globex", "state", "off"}, Value: 1},
		{Name: "courier_endpoint_inflight", Labels: []string{"endpoint", "acme"}, Value: 2},
		{Name: "courier_endpoint_concurrency_limit", Labels: []string{"endpoint", "acme"}, Value: 23},
		{Name: "courier_endpoint_concurrency_limit", Labels: []string{"endpoint", "globex"}, Value: 4},
		{Name: "courier_endpoint_suspensions_total", Labels: []string{"endpoint", "acme"}, Value: 1},
		{Name: "courier_operator_actions_total", Labels: []string{"action", "resubmit"}, Value: 5},
	})
	if f := fams["courier_delivery_latency_seconds"]; f != nil {
		if sum := f.Metric[0].Histogram.GetSampleSum(); sum != 4 {
			t.Errorf("latency sum = %v s, want 4 (two deliveries 2 s after ingest)", sum)
		}
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("no Go runtime metrics")
	}

	s := m.Stats(courier.AllTenants)
	if s.Live.Queued != 3 || s.Delivered != 2 || s.Suspended != 1 || s.Ingested != 2 || !s.CountedAt.Equal(now) {
		t.Errorf("stats: %+v", s)
	}
	if len(s.Minutes) != 60 {
		t.Fatalf("%d minutes, want 60", len(s.Minutes))
	}
	if last := s.Minutes[59]; last.Delivered != 2 || last.Failed != 1 || !last.Start.Equal(now.Truncate(time.Minute)) {
		t.Errorf("current minute: %+v", last)
	}
	if first := s.Minutes[0]; !first.Start.Equal(now.Truncate(time.Minute).Add(-59*time.Minute)) || first.Delivered != 0 {
		t.Errorf("first minute: %+v", first)
	}
}

// TestTypesBounded: types past the limit are counted as "other".
func TestTypesBounded(t *testing.T) {
	m := metrics.New(metrics.Options{Source: sqlitetest.Open(t), TopologyFunc: topology, MaxTypes: 2})
	for _, typ := range []string{"a", "b", "c", "d", "a"} {
		m.Ingested(&courier.Message{Type: typ, Route: "acme"})
	}
	fams := scrape(t, m)
	for typ, want := range map[string]float64{"a": 2, "b": 1, metrics.OtherType: 2} {
		if got, _ := promtest.Value(fams, "courier_messages_ingested_total", "type", typ); got != want {
			t.Errorf("ingested of type %s = %v, want %v", typ, got, want)
		}
	}
	if _, ok := promtest.Value(fams, "courier_messages_ingested_total", "type", "c"); ok {
		t.Error("a type past the limit has a series of its own")
	}
}

// TestHotPathAllocatesNothing: once a label set has been seen, reporting an
// attempt and a delivery allocates no memory.
func TestHotPathAllocatesNothing(t *testing.T) {
	m := metrics.New(metrics.Options{Source: sqlitetest.Open(t), TopologyFunc: topology})
	c := courier.Change{From: courier.StateInflight, Message: message("d", "invoice", "acme", courier.StateDelivered, now),
		Attempt: &courier.Attempt{Endpoint: "acme", Outcome: courier.OutcomeDelivered}}
	ok, failed := courier.Result{Status: 204}, courier.Result{Class: courier.ClassTimeout}
	report := func() {
		m.AttemptDone(c.Message, "acme", ok, time.Millisecond)
		m.AttemptDone(c.Message, "acme", failed, time.Millisecond)
		m.Applied(c)
	}
	report()
	if n := testing.AllocsPerRun(100, report); n != 0 {
		t.Errorf("%v allocations per reported delivery, want 0", n)
	}
}

// racingSource is a store whose health read is overtaken: while it reads,
// an endpoint is switched (and told through HealthChanged); it returns what
// it read before the switch.
type racingSource struct {
	courier.Store
	during func()
}

func (s racingSource) Health(ctx context.Context) ([]courier.EndpointHealth, error) {
	hs, err := s.Store.Health(ctx)
	if s.during != nil {
		s.during()
	}
	return hs, err
}

// TestRefreshKeepsNewerHealth: a health change told while a Refresh reads
// the store is not overwritten by the older state it read; the next
// Refresh takes the store's word again.
func TestRefreshKeepsNewerHealth(t *testing.T) {
	store := sqlitetest.Open(t)
	src := &racingSource{Store: store}
	m := metrics.New(metrics.Options{Source: src, TopologyFunc: topology, Clock: clocktest.New(now)})
	off := courier.EndpointHealth{Endpoint: "acme", State: courier.HealthOff}
	src.during = func() {
		if _, err := store.UpdateHealth(context.Background(), "acme", func(h courier.EndpointHealth) courier.EndpointHealth {
			return h.SwitchedOff(now)
		}, nil); err != nil {
			t.Error(err)
		}
		m.HealthChanged("acme", courier.EndpointHealth{Endpoint: "acme", State: courier.HealthActive}, off)
	}
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	src.during = nil
	health := func() string {
		t.Helper()
		for _, s := range []string{"active", "timeout", "suspended", "off"} {
			if v, ok := promtest.Value(scrape(t, m), "courier_endpoint_health", "endpoint", "acme", "state", s); ok && v == 1 {
				return s
			}
		}
		return ""
	}
	if got := health(); got != "off" {
		t.Errorf("after a switch during a refresh: acme is %s, want off", got)
	}
	// The store changes behind the metrics' back (another node): the next
	// refresh reads it.
	if _, err := store.UpdateHealth(context.Background(), "acme", func(h courier.EndpointHealth) courier.EndpointHealth {
		return h.SwitchedOn(now)
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := health(); got != "active" {
		t.Errorf("after the next refresh: acme is %s, want active as stored", got)
	}
	// A change told with the state unchanged but the metrics behind still
	// shows the state told.
	m.HealthChanged("globex", courier.EndpointHealth{State: courier.HealthSuspended}, courier.EndpointHealth{State: courier.HealthSuspended})
	if v, _ := promtest.Value(scrape(t, m), "courier_endpoint_health", "endpoint", "globex", "state", "suspended"); v != 1 {
		t.Errorf("globex told suspended is not shown suspended")
	}
}
