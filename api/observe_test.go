package api_test

import (
	"context"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/metrics"
)

// countingObserver keeps what the API reports.
type countingObserver struct {
	mu       sync.Mutex
	ingested []string
	acted    map[courier.ActionKind]int
}

func (o *countingObserver) Ingested(m *courier.Message) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ingested = append(o.ingested, m.ID)
}

func (o *countingObserver) Acted(kind courier.ActionKind, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.acted == nil {
		o.acted = map[courier.ActionKind]int{}
	}
	o.acted[kind] += n
}

// healthObserver is a countingObserver that is also told of health changes.
type healthObserver struct {
	countingObserver
	changes []string
}

func (o *healthObserver) HealthChanged(endpoint string, before, after courier.EndpointHealth) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changes = append(o.changes, fmt.Sprintf("%s %s>%s", endpoint, before.State, after.State))
}

// TestBulkCountedOnce: a bulk operation's messages are counted once, as the
// runner does them, however often its request is repeated.
func TestBulkCountedOnce(t *testing.T) {
	obs := &countingObserver{}
	ts := newTestServer(t, func(o *api.Options) {
		o.Observer = obs
		o.Bulk = engine.NewBulk(o.Store, nil, nil, nil, obs.Acted)
	})
	for i := range 3 {
		suspendMessage(t, ts.store, fmt.Sprintf("s%d", i), "invoice", courier.ReasonRejected)
	}
	for i := range 3 {
		status, body, _ := ts.call(t, "POST", "/v1/messages/discard", `{"operation_id":"op-1"}`)
		if op := decode[api.Operation](t, body); status != 200 || op.Count != 3 || !op.Done {
			t.Fatalf("bulk discard, request %d: %d %s", i+1, status, body)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if got := obs.acted[courier.ActionDiscard]; got != 3 {
		t.Errorf("%d discards counted for an operation on 3 messages asked for 3 times, want 3", got)
	}
}

// TestSwitchTellsHealth: an operator's switch is told to the observer with
// the health it leaves, and the metrics show it at once, without waiting
// for their next count.
func TestSwitchTellsHealth(t *testing.T) {
	good := courier.NewEndpoint("good", courier.TransportHTTP)
	httptransport.Of(good).URL = "https://good.example/in"
	top := testTopology()
	top.Endpoints = map[string]*courier.Endpoint{"good": good}

	obs := &healthObserver{}
	ts := newTestServer(t, func(o *api.Options) { o.Topology, o.Observer = top, obs })
	for _, verb := range []string{"off", "on"} {
		if status, body, _ := ts.call(t, "POST", "/v1/endpoints/good/"+verb, ""); status != 200 {
			t.Fatalf("switch %s: %d %s", verb, status, body)
		}
	}
	obs.mu.Lock()
	if got := strings.Join(obs.changes, ", "); got != "good active>off, good off>active" {
		t.Errorf("health changes told: %q", got)
	}
	obs.mu.Unlock()

	m := metrics.New(metrics.Options{Source: ts.store, TopologyFunc: func() *courier.Topology { return top }})
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	ts2 := newTestServer(t, func(o *api.Options) { o.Store, o.Topology, o.Observer = ts.store, top, m })
	if status, body, _ := ts2.call(t, "POST", "/v1/endpoints/good/off", ""); status != 200 {
		t.Fatalf("switch off: %d %s", status, body)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `courier_endpoint_health{endpoint="good",state="off"} 1`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("the metrics after the switch lack %s:\n%s", want, grepLines(rec.Body.String(), "courier_endpoint_health"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestObserverHearsIngestsAndActions: created messages are reported once
// (not their repeats), and operator actions by kind.
func TestObserverHearsIngestsAndActions(t *testing.T) {
	obs := &countingObserver{}
	ts := newTestServer(t, func(o *api.Options) { o.Observer = obs })
	ts.call(t, "PUT", "/v1/messages/a", invoiceBody)
	ts.call(t, "PUT", "/v1/messages/a", invoiceBody) // a repeat: stored before
	ts.call(t, "POST", "/v1/messages/batch", `{"messages":[{"id":"b","type":"t","route":"acme","payload":1},{"id":"bad","type":"t","route":"nowhere","payload":1}]}`)
	suspendMessage(t, ts.store, "s", "invoice", courier.ReasonRejected)
	if status, body, _ := ts.call(t, "POST", "/v1/messages/s/resubmit", ""); status != 200 {
		t.Fatalf("resubmit: %d %s", status, body)
	}
	if status, body, _ := ts.call(t, "POST", "/v1/messages/a/discard", ""); status != 200 {
		t.Fatalf("discard: %d %s", status, body)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if strings.Join(obs.ingested, ",") != "a,b" {
		t.Errorf("ingested %v, want [a b]", obs.ingested)
	}
	if obs.acted[courier.ActionResubmit] != 1 || obs.acted[courier.ActionDiscard] != 1 {
		t.Errorf("actions %v", obs.acted)
	}
}

func TestStats(t *testing.T) {
	ts := newTestServer(t)
	ts.call(t, "PUT", "/v1/messages/q1", invoiceBody)
	ts.call(t, "PUT", "/v1/messages/q2", invoiceBody)
	suspendMessage(t, ts.store, "s1", "invoice", courier.ReasonRejected)
	status, body, _ := ts.call(t, "GET", "/v1/stats", "")
	if status != 200 {
		t.Fatalf("stats: %d %s", status, body)
	}
	st := decode[api.Stats](t, body)
	if st.States[courier.StateQueued] != 2 || st.States[courier.StateSuspended] != 1 || st.States[courier.StateInflight] != 0 {
		t.Errorf("states %v, want 2 queued, 1 suspended", st.States)
	}
	if st.CountedAt.IsZero() || st.Node != nil {
		t.Errorf("without a stats source: counted_at %v, node %+v; want counted now and no node figures", st.CountedAt, st.Node)
	}
}

// TestStatsRates: the rates are per second over the last five minutes,
// the current one counting as far as it has gone.
func TestStatsRates(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 30, 30, 0, time.UTC)
	minutes := make([]courier.MinuteStats, 60)
	for i := range minutes {
		minutes[i] = courier.MinuteStats{Start: now.Truncate(time.Minute).Add(time.Duration(i-59) * time.Minute), Delivered: 10, Failed: 1}
	}
	ts := newTestServer(t, func(o *api.Options) {
		o.Clock = clocktest.New(now)
		o.StatsFunc = func(context.Context, string) (courier.Stats, error) {
			return courier.Stats{CountedAt: now, Live: courier.LiveCounts{Queued: 7}, Since: now.Add(-time.Hour),
				Delivered: 600, Minutes: minutes}, nil
		}
	})
	status, body, _ := ts.call(t, "GET", "/v1/stats", "")
	if status != 200 {
		t.Fatalf("stats: %d %s", status, body)
	}
	st := decode[api.Stats](t, body)
	if st.States[courier.StateQueued] != 7 || st.Node == nil || st.Node.Delivered != 600 || len(st.Minutes) != 60 {
		t.Fatalf("stats: %s", body)
	}
	if st.LastHour.Delivered != 600 || st.LastHour.Failed != 60 {
		t.Errorf("last hour %+v, want 600 delivered, 60 failed", st.LastHour)
	}
	// 50 deliveries in 4.5 minutes.
	if st.Rates == nil || st.Rates.Window != "4m30s" || st.Rates.Delivered != 50.0/270 {
		t.Errorf("rates %+v, want 50 in 4m30s", st.Rates)
	}
}

// TestRoutesRedacted: the configuration as loaded, without its secrets.
func TestRoutesRedacted(t *testing.T) {
	top := testTopology()
	hook := courier.NewEndpoint("acme-primary", courier.TransportHTTP)
	hook.Settings = &httptransport.Settings{URL: "https://user:pw@hooks.example/in?token=abc", Secrets: []string{"whsec_c2VjcmV0"}}
	mail := courier.NewEndpoint("globex", courier.TransportSMTP)
	mail.Settings = &smtptransport.Settings{Addr: "mail.example:587", From: "c@example", To: []string{"ops@example"}, Username: "u", Password: "hunter2"}
	top.Endpoints = map[string]*courier.Endpoint{"acme-primary": hook, "globex": mail}
	top.Policies["invoice"].Schedule = []time.Duration{time.Minute, 5 * time.Minute}
	top.Policies["invoice"].Fallback = &courier.Fallback{Route: "globex"}
	ts := newTestServer(t, func(o *api.Options) { o.Topology = top })

	status, body, _ := ts.call(t, "GET", "/v1/routes", "")
	if status != 200 {
		t.Fatalf("routes: %d %s", status, body)
	}
	for _, secret := range []string{"hunter2", "whsec_c2VjcmV0", "abc", ":pw@"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("GET /v1/routes shows the secret %q: %s", secret, body)
		}
	}
	cfg := decode[api.Config](t, body)
	if len(cfg.Routes) != 2 || cfg.Routes[0].Name != "acme" || cfg.Routes[0].Endpoints[0] != "acme-primary" {
		t.Errorf("routes %+v", cfg.Routes)
	}
	shown := decode[struct {
		Endpoints []struct {
			HTTP *httptransport.Wire `json:"http"`
			SMTP *smtptransport.Wire `json:"smtp"`
		} `json:"endpoints"`
	}](t, body).Endpoints
	if len(shown) != 2 || shown[0].HTTP == nil || shown[0].HTTP.Secrets[0] != courier.Redacted ||
		shown[1].SMTP == nil || shown[1].SMTP.Password != courier.Redacted || shown[1].SMTP.Addr != "mail.example:587" {
		t.Errorf("endpoints %s", body)
	}
	var invoice api.PolicyConfig
	for _, p := range cfg.Policies {
		if p.Name == "invoice" {
			invoice = p
		}
	}
	if strings.Join(invoice.Schedule, ",") != "1m0s,5m0s" || invoice.Backoff != nil || invoice.Fallback == nil || invoice.Fallback.Route != "globex" || invoice.Priority != 8 {
		t.Errorf("invoice policy %+v", invoice)
	}

	c := api.NewClient(ts.URL, "")
	got, err := c.Routes(context.Background())
	if err != nil || len(got.Endpoints) != 2 {
		t.Errorf("client Routes: %+v %v", got, err)
	}
	if st, err := c.Stats(context.Background()); err != nil || st.States == nil {
		t.Errorf("client Stats: %+v %v", st, err)
	}
}

// TestMessageShowsActions: one message is shown with the operator actions
// on it.
func TestMessageShowsActions(t *testing.T) {
	ts := newKeyedServer(t)
	suspendMessage(t, ts.store, "s", "invoice", courier.ReasonRejected)
	if status, body, _ := ts.callAs(t, "ops", "POST", "/v1/messages/s/resubmit", `{"route":"globex"}`); status != 200 {
		t.Fatalf("resubmit: %d %s", status, body)
	}
	status, body, _ := ts.callAs(t, "ops", "GET", "/v1/messages/s", "")
	if status != 200 {
		t.Fatalf("get: %d %s", status, body)
	}
	m := decode[api.Message](t, body)
	if len(m.Actions) != 1 || m.Actions[0].Kind != courier.ActionResubmit || m.Actions[0].Who != "ops" || m.Actions[0].Detail == "" {
		t.Errorf("actions %+v, want the resubmit by ops to globex", m.Actions)
	}
}

// TestMetricsServed: GET /metrics is the metrics handler, for operators.
func TestMetricsServed(t *testing.T) {
	ts := newKeyedServer(t, func(o *api.Options) {
		o.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("courier_up 1\n")) })
	})
	if status, body, _ := ts.callAs(t, "ops", "GET", "/metrics", ""); status != 200 || string(body) != "courier_up 1\n" {
		t.Errorf("metrics as operator: %d %s", status, body)
	}
	status, body, _ := ts.callAs(t, "", "GET", "/metrics", "")
	wantError(t, status, body, 401, courier.CodeUnauthenticated, "API key")
}

func TestIdentify(t *testing.T) {
	keyed := api.NewServer(api.Options{Keys: testKeys(t)})
	if !keyed.KeysRequired() {
		t.Error("a server with keys does not require them")
	}
	if name, role, err := keyed.Identify(testSecrets["ops"]); err != nil || name != "ops" || role != courier.RoleOperator {
		t.Errorf("Identify(ops) = %q %q %v", name, role, err)
	}
	if _, _, err := keyed.Identify("wrong"); courier.ErrorCode(err) != courier.CodeUnauthenticated {
		t.Errorf("Identify(wrong) = %v, want unauthenticated", err)
	}
	open := api.NewServer(api.Options{})
	if name, role, err := open.Identify(""); open.KeysRequired() || err != nil || name != "local" || role != courier.RoleAdmin {
		t.Errorf("without keys: required %v, Identify = %q %q %v", open.KeysRequired(), name, role, err)
	}
}

// TestStatsRatesOfANewNode: a node up for less than the window divides by
// the time it has run.
func TestStatsRatesOfANewNode(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 30, 30, 0, time.UTC)
	minutes := make([]courier.MinuteStats, 60)
	for i := range minutes {
		minutes[i].Start = now.Truncate(time.Minute).Add(time.Duration(i-59) * time.Minute)
	}
	minutes[59].Delivered, minutes[58].Delivered = 30, 60
	ts := newTestServer(t, func(o *api.Options) {
		o.Clock = clocktest.New(now)
		o.StatsFunc = func(context.Context, string) (courier.Stats, error) {
			return courier.Stats{CountedAt: now, Since: now.Add(-90 * time.Second), Minutes: minutes}, nil
		}
	})
	_, body, _ := ts.call(t, "GET", "/v1/stats", "")
	st := decode[api.Stats](t, body)
	if st.Rates == nil || st.Rates.Window != "1m30s" || st.Rates.Delivered != 1 {
		t.Errorf("rates %+v, want 90 deliveries in the 1m30s the node has run", st.Rates)
	}
}
