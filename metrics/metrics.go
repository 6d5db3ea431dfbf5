// Package metrics is courier's Prometheus instrumentation and its running
// statistics. The engine and the API report to a Metrics through their
// observer interfaces (they import no Prometheus); Metrics serves /metrics,
// and Stats for GET /v1/stats and the dashboard, of the server as a whole
// and of each tenant.
//
// The hot path (an attempt ends, a message is delivered) costs a few atomic
// additions and map lookups: the labelled children are created once and
// kept. The queue depth is never counted on a scrape: a background loop
// counts the live states through the store's partial indexes every
// Interval and the scrapes read the result.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Source is what the background count reads: courier.Store is one.
type Source interface {
	CountLive(ctx context.Context) ([]courier.RouteLive, error)
	Health(ctx context.Context) ([]courier.EndpointHealth, error)
	TenantUsage(ctx context.Context) ([]courier.TenantUsage, error)
}

// Options configure a Metrics. Source and TopologyFunc are required.
type Options struct {
	Source Source
	// TopologyFunc returns the topology in force, for the endpoints to
	// report on.
	TopologyFunc func() *courier.Topology
	// InFlightFunc returns the attempts running on an endpoint on this node
	// (the engine's InFlight); nil reports none.
	InFlightFunc func(endpoint string) int
	// ConcurrencyLimitFunc returns the attempts this node lets be in flight
	// to an endpoint (the engine's ConcurrencyLimit); nil reports none.
	ConcurrencyLimitFunc func(endpoint string) int
	// ThrottledFunc reports whether a tenant is held back now, by its
	// quotas or its fair share (the API's Throttled); nil reports none.
	ThrottledFunc func(tenant string) bool
	// IngestInFlightFunc returns the bytes and messages of the ingest
	// requests admitted on this node and not yet answered (the API's
	// InFlight); nil reports none.
	IngestInFlightFunc func() (bytes, messages int64)
	Clock              courier.Clock
	Logger             *slog.Logger
	// Interval is how often the live states and endpoint health are read
	// from the store (default 15s).
	Interval time.Duration
	// MaxTypes bounds the distinct message types used as label values
	// (default 200); later types are counted as "other", so that a sender
	// inventing types cannot grow the metrics without bound.
	MaxTypes int
}

// OtherType is the type label of the types past Options.MaxTypes.
const OtherType = "other"

// Metrics collects courier's metrics and statistics. It implements the
// engine's Observer and the API's Observer. Its methods are safe for
// concurrent use.
type Metrics struct {
	opts     Options
	registry *prometheus.Registry
	since    time.Time

	ingested  *vec[typeRoute, prometheus.Counter]
	delivered *vec[typeRoute, prometheus.Counter]
	suspended *vec[suspension, prometheus.Counter]
	discarded *vec[typeRoute, prometheus.Counter]
	attempts  *vec[attemptKey, prometheus.Counter]
	duration  *vec[string, prometheus.Observer]
	latency   *vec[string, prometheus.Observer]
	actions   *vec[courier.ActionKind, prometheus.Counter]
	suspends  *vec[string, prometheus.Counter]
	// outcomeWait is how long after the receivers' answers the outcomes
	// were written.
	outcomeWait prometheus.Histogram
	// ingestRefused counts the ingest requests refused by the API's
	// admission, by reason.
	ingestRefused *prometheus.CounterVec

	// all is what this node has seen of every tenant's messages; tenants
	// holds a *tally per tenant that had any.
	all     tally
	tenants sync.Map
	types   typeSet
	refused refusals

	mu sync.RWMutex
	// live are the live counts by tenant, and every tenant's under
	// courier.AllTenants; use is each tenant's use, as its quotas count it.
	live      map[string]courier.LiveCounts
	use       map[string]courier.TenantUsage
	countedAt time.Time
	health    map[string]healthEntry
	// healthSeq numbers the changes HealthChanged was told of, so that a
	// Refresh keeps those told while it read the store.
	healthSeq uint64

	startstop.Base // counts between Start and Stop
}

// tally is what this node has seen of the messages of a tenant, or of all,
// since it started: totals, and deliveries and failures minute by minute.
type tally struct {
	ingested, delivered, suspended, discarded atomic.Int64
	minutes                                   minuteRing
}

// tallies calls f with the tally of every tenant's messages and with that
// of the tenant of route (a message's route is its tenant's).
func (m *Metrics) tallies(route string, f func(*tally)) {
	f(&m.all)
	tenant := courier.TenantOf(route)
	t, ok := m.tenants.Load(tenant)
	if !ok {
		t, _ = m.tenants.LoadOrStore(tenant, new(tally))
	}
	f(t.(*tally))
}

// typeRoute labels the messages of a type on a route; subscription is that
// of a published message's delivery, empty for a message sent to a route.
type typeRoute struct{ typ, route, subscription string }

// healthEntry is an endpoint's health state as last learnt: seq is the
// healthSeq of the HealthChanged that told it, 0 when a Refresh read it.
type healthEntry struct {
	state courier.HealthState
	seq   uint64
}

type suspension struct {
	typ, route, subscription string
	reason                   courier.Reason
}

type attemptKey struct {
	endpoint string
	outcome  courier.Outcome
	class    courier.ErrorClass
}

// New returns a Metrics for the options, with its registry holding courier's
// metrics and the Go runtime's and process's.
func New(o Options) *Metrics {
	o.Clock = courier.ClockOrSystem(o.Clock)
	o.Logger = courier.LoggerOrDiscard(o.Logger)
	if o.Interval <= 0 {
		o.Interval = 15 * time.Second
	}
	if o.MaxTypes <= 0 {
		o.MaxTypes = 200
	}
	if o.InFlightFunc == nil {
		o.InFlightFunc = func(string) int { return 0 }
	}
	if o.IngestInFlightFunc == nil {
		o.IngestInFlightFunc = func() (int64, int64) { return 0, 0 }
	}
	m := &Metrics{opts: o, registry: prometheus.NewRegistry(), since: o.Clock.Now(), health: map[string]healthEntry{}}
	m.types.max = o.MaxTypes

	ingested := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_messages_ingested_total",
		Help: "Messages taken in (created, not repeated ingests), by type and route, and the deliveries of published ones by subscription."}, []string{"type", "route", "subscription"})
	delivered := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_messages_delivered_total",
		Help: "Messages (and deliveries of published ones) delivered, by type, route and subscription."}, []string{"type", "route", "subscription"})
	suspended := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_messages_suspended_total",
		Help: "Messages (and deliveries) suspended by the engine (waiting for an operator), by type, route, subscription and reason."}, []string{"type", "route", "subscription", "reason"})
	discarded := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_messages_discarded_total",
		Help: "Messages (and deliveries) discarded by their policy (on_exhausted: discard), by type, route and subscription."}, []string{"type", "route", "subscription"})
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_attempts_total",
		Help: "Delivery attempts by endpoint, outcome (delivered, failed, abandoned) and error class (empty when delivered)."},
		[]string{"endpoint", "outcome", "class"})
	duration := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "courier_attempt_duration_seconds",
		Help:    "How long delivery attempts took, by endpoint.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"endpoint"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "courier_delivery_latency_seconds",
		Help:    "Time from ingest to delivery of delivered messages, by route.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 4 * 3600, 24 * 3600}},
		[]string{"route"})
	actions := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_operator_actions_total",
		Help: "Operator actions through the API and dashboard, by kind; a bulk operation counts its messages as its batches are done."},
		[]string{"action"})
	suspends := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_endpoint_suspensions_total",
		Help: "Times this node saw an endpoint suspended by the outcomes of its attempts."}, []string{"endpoint"})

	m.ingested = newVec(func(k typeRoute) prometheus.Counter { return ingested.WithLabelValues(k.typ, k.route, k.subscription) })
	m.delivered = newVec(func(k typeRoute) prometheus.Counter { return delivered.WithLabelValues(k.typ, k.route, k.subscription) })
	m.suspended = newVec(func(k suspension) prometheus.Counter {
		return suspended.WithLabelValues(k.typ, k.route, k.subscription, string(k.reason))
	})
	m.discarded = newVec(func(k typeRoute) prometheus.Counter { return discarded.WithLabelValues(k.typ, k.route, k.subscription) })
	m.attempts = newVec(func(k attemptKey) prometheus.Counter {
		return attempts.WithLabelValues(k.endpoint, string(k.outcome), string(k.class))
	})
	m.duration = newVec(func(ep string) prometheus.Observer { return duration.WithLabelValues(ep) })
	m.latency = newVec(func(route string) prometheus.Observer { return latency.WithLabelValues(route) })
	m.actions = newVec(func(k courier.ActionKind) prometheus.Counter { return actions.WithLabelValues(string(k)) })
	m.suspends = newVec(func(ep string) prometheus.Counter { return suspends.WithLabelValues(ep) })

	m.outcomeWait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "courier_outcome_wait_seconds",
		Help:    "How long after the receiver's answer the outcome of an attempt was written: what a crash of this node in between would send again.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}})
	m.ingestRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "courier_ingest_refused_total",
		Help: "Ingest requests refused by admission before their body was read, by reason: bytes and messages (the node's bounds, 503), sender_bytes and sender_messages (an API key's share of them, 429)."},
		[]string{"reason"})
	for _, reason := range []string{"bytes", "messages", "sender_bytes", "sender_messages"} {
		m.ingestRefused.WithLabelValues(reason)
	}
	inFlightBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "courier_ingest_in_flight_bytes",
		Help: "The bytes of the bodies of the ingest requests this node has admitted and not yet answered."},
		func() float64 { b, _ := o.IngestInFlightFunc(); return float64(b) })
	inFlightMessages := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "courier_ingest_in_flight_messages",
		Help: "The messages of the ingest requests this node has admitted and not yet answered."},
		func() float64 { _, n := o.IngestInFlightFunc(); return float64(n) })
	m.registry.MustRegister(m.ingestRefused, inFlightBytes, inFlightMessages)

	m.registry.MustRegister(ingested, delivered, suspended, discarded, attempts, duration, latency, actions, suspends, m.outcomeWait,
		stateCollector{m}, tenantCollector{m}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// IngestRefused counts an ingest request refused by the API's admission:
// the API's AdmissionObserver.
func (m *Metrics) IngestRefused(reason string) { m.ingestRefused.WithLabelValues(reason).Inc() }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{
		ErrorLog: slog.NewLogLogger(m.opts.Logger.Handler(), slog.LevelWarn),
	})
}

// Registry returns the registry, for other collectors to join.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Start counts the live states now and then every Interval until Stop.
func (m *Metrics) Start(ctx context.Context) error {
	return m.StartWork(ctx, func(ctx context.Context) {
		startstop.Every(ctx, 0, m.opts.Interval, func(ctx context.Context) {
			if err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
				m.opts.Logger.Warn("could not count the messages for the metrics; will try again", "err", err)
			}
		})
	})
}

// Refresh counts the live states, and reads the tenants' use and the
// endpoints' health, now. A health change told by HealthChanged while the
// store was read is newer than what was read, and stays.
func (m *Metrics) Refresh(ctx context.Context) error {
	m.mu.RLock()
	seq := m.healthSeq
	m.mu.RUnlock()
	routes, err := m.opts.Source.CountLive(ctx)
	if err != nil {
		return err
	}
	use, err := m.opts.Source.TenantUsage(ctx)
	if err != nil {
		return err
	}
	hs, herr := m.opts.Source.Health(ctx)
	now := m.opts.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.live, m.countedAt = courier.LiveByTenant(routes), now
	m.use = make(map[string]courier.TenantUsage, len(use))
	for _, u := range use {
		m.use[u.Tenant] = u
	}
	if herr == nil {
		health := make(map[string]healthEntry, len(hs))
		for _, h := range hs {
			health[h.Endpoint] = healthEntry{state: h.State}
		}
		for name, e := range m.health {
			if e.seq > seq {
				health[name] = e
			}
		}
		m.health = health
	}
	return herr
}

// Ingested counts a message taken in by the API.
func (m *Metrics) Ingested(msg *courier.Message) {
	m.ingested.get(typeRoute{m.types.label(msg.Type), msg.Route, msg.Subscription}).Inc()
	m.tallies(msg.Route, func(t *tally) { t.ingested.Add(1) })
}

// Acted counts n messages or endpoints an operator action was applied to.
func (m *Metrics) Acted(kind courier.ActionKind, n int) {
	if n > 0 {
		m.actions.get(kind).Add(float64(n))
	}
}

// AttemptDone counts an attempt of msg by its endpoint, outcome and class,
// and its duration.
func (m *Metrics) AttemptDone(msg *courier.Message, endpoint string, r courier.Result, d time.Duration) {
	k := attemptKey{endpoint: endpoint, outcome: courier.OutcomeDelivered}
	if !r.Delivered() {
		k.outcome, k.class = courier.OutcomeFailed, r.Class
		now := m.opts.Clock.Now()
		m.tallies(msg.Route, func(t *tally) { t.minutes.add(now, 0, 1) })
	}
	m.attempts.get(k).Inc()
	m.duration.get(endpoint).Observe(d.Seconds())
}

// Applied counts the messages delivered, suspended and discarded by the
// engine, the latency of deliveries, and attempts abandoned by lapsed
// leases.
func (m *Metrics) Applied(c courier.Change) {
	msg := c.Message
	if c.Attempt != nil && c.Attempt.Outcome == courier.OutcomeAbandoned {
		m.attempts.get(attemptKey{endpoint: c.Attempt.Endpoint, outcome: courier.OutcomeAbandoned}).Inc()
	}
	if c.From == msg.State {
		return
	}
	switch msg.State {
	case courier.StateDelivered:
		m.delivered.get(typeRoute{m.types.label(msg.Type), msg.Route, msg.Subscription}).Inc()
		end := msg.FinishedAt
		if end.IsZero() {
			end = m.opts.Clock.Now()
		}
		m.latency.get(msg.Route).Observe(end.Sub(msg.CreatedAt).Seconds())
		m.tallies(msg.Route, func(t *tally) {
			t.delivered.Add(1)
			t.minutes.add(end, 1, 0)
		})
	case courier.StateSuspended:
		m.suspended.get(suspension{m.types.label(msg.Type), msg.Route, msg.Subscription, msg.Reason}).Inc()
		m.tallies(msg.Route, func(t *tally) { t.suspended.Add(1) })
	case courier.StateDiscarded:
		m.discarded.get(typeRoute{m.types.label(msg.Type), msg.Route, msg.Subscription}).Inc()
		m.tallies(msg.Route, func(t *tally) { t.discarded.Add(1) })
	}
}

// HealthChanged keeps the endpoint's state for the next scrape and counts
// its suspensions. The engine tells it of the outcomes of attempts, the API
// of an operator's switch.
// OutcomeWritten observes how long after the receiver's answer an outcome
// was written.
func (m *Metrics) OutcomeWritten(wait time.Duration) { m.outcomeWait.Observe(wait.Seconds()) }

func (m *Metrics) HealthChanged(endpoint string, before, after courier.EndpointHealth) {
	if after.State == courier.HealthSuspended && (before.State != courier.HealthSuspended || after.Suspensions != before.Suspensions) {
		m.suspends.get(endpoint).Inc()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if before.State == after.State && stateOf(m.health, endpoint) == after.State {
		return // nothing new, neither here nor in the store
	}
	// The map is replaced, never changed: scrapes keep it after the lock.
	m.healthSeq++
	health := maps.Clone(m.health)
	health[endpoint] = healthEntry{state: after.State, seq: m.healthSeq}
	m.health = health
}

// stateOf returns an endpoint's state in health; one without an entry is
// active.
func stateOf(health map[string]healthEntry, endpoint string) courier.HealthState {
	if e, ok := health[endpoint]; ok && e.state != "" {
		return e.state
	}
	return courier.HealthActive
}

// Stats returns a tenant's messages in the live states as last counted,
// this node's totals of its messages since it started, and its last hour
// minute by minute; those of every tenant for courier.AllTenants.
func (m *Metrics) Stats(tenant string) courier.Stats {
	m.mu.RLock()
	s := courier.Stats{CountedAt: m.countedAt, Live: m.live[tenant]}
	m.mu.RUnlock()
	t := &m.all
	if tenant != courier.AllTenants {
		t = new(tally)
		if v, ok := m.tenants.Load(tenant); ok {
			t = v.(*tally)
		}
	}
	s.Since = m.since
	s.Ingested = t.ingested.Load()
	s.Delivered = t.delivered.Load()
	s.Suspended = t.suspended.Load()
	s.Discarded = t.discarded.Load()
	s.Minutes = t.minutes.lastHour(m.opts.Clock.Now())
	return s
}

// StatsFunc is Stats in the form the API takes it.
func (m *Metrics) StatsFunc(_ context.Context, tenant string) (courier.Stats, error) {
	s := m.Stats(tenant)
	if s.CountedAt.IsZero() {
		// Not yet counted (the first count failed): say so rather than show zeros.
		return courier.Stats{}, courier.Errorf(courier.CodeUnavailable, "the messages have not been counted yet")
	}
	return s, nil
}

// errNoTopology is reported by a scrape before the topology is known.
var errNoTopology = errors.New("metrics: no topology")

// stateCollector reports, at each scrape, the live states as last counted
// and each endpoint's health and attempts in flight.
type stateCollector struct{ m *Metrics }

var (
	descLive = prometheus.NewDesc("courier_queue_messages",
		"Messages in each live state (queued, inflight, suspended), as last counted in the store.", []string{"state"}, nil)
	descCounted = prometheus.NewDesc("courier_queue_counted_timestamp_seconds",
		"When courier_queue_messages was counted, in Unix seconds.", nil, nil)
	descHealth = prometheus.NewDesc("courier_endpoint_health",
		"1 for the endpoint's health state (active, timeout, suspended, off), 0 for the others.", []string{"endpoint", "state"}, nil)
	descInFlight = prometheus.NewDesc("courier_endpoint_inflight",
		"Attempts running on the endpoint on this node.", []string{"endpoint"}, nil)
	descLimit = prometheus.NewDesc("courier_endpoint_concurrency_limit",
		"Attempts this node lets be in flight to the endpoint: its max_concurrency, or with auto the limit learnt from its answers.", []string{"endpoint"}, nil)
)

var healthStates = []courier.HealthState{courier.HealthActive, courier.HealthTimeout, courier.HealthSuspended, courier.HealthOff}

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descLive
	ch <- descCounted
	ch <- descHealth
	ch <- descInFlight
	ch <- descLimit
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	m.mu.RLock()
	live, counted := m.live[courier.AllTenants], m.countedAt
	health := m.health
	m.mu.RUnlock()
	if !counted.IsZero() {
		ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, float64(live.Queued), string(courier.StateQueued))
		ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, float64(live.Inflight), string(courier.StateInflight))
		ch <- prometheus.MustNewConstMetric(descLive, prometheus.GaugeValue, float64(live.Suspended), string(courier.StateSuspended))
		ch <- prometheus.MustNewConstMetric(descCounted, prometheus.GaugeValue, float64(counted.UnixMilli())/1000)
	}
	t := m.opts.TopologyFunc()
	if t == nil {
		ch <- prometheus.NewInvalidMetric(descHealth, errNoTopology)
		return
	}
	for name := range t.Endpoints {
		state := stateOf(health, name)
		for _, s := range healthStates {
			v := 0.0
			if s == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descHealth, prometheus.GaugeValue, v, name, string(s))
		}
		ch <- prometheus.MustNewConstMetric(descInFlight, prometheus.GaugeValue, float64(m.opts.InFlightFunc(name)), name)
		if m.opts.ConcurrencyLimitFunc != nil {
			ch <- prometheus.MustNewConstMetric(descLimit, prometheus.GaugeValue, float64(m.opts.ConcurrencyLimitFunc(name)), name)
		}
	}
}
