package metrics_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/promtest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/metrics"
)

// ingestAt stores a queued message of a tenant on its route "orders".
func ingestAt(t *testing.T, s courier.Store, tenant, id string, size int) {
	t.Helper()
	m := &courier.Message{ID: courier.QualifyID(tenant, id), Type: courier.Qualify(tenant, "invoice"),
		Route: courier.Qualify(tenant, "orders"), Payload: []byte(strings.Repeat("x", size)), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, now)
	if _, err := s.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
}

// TestStatsByTenant: a tenant's statistics count its messages alone, the
// live ones in the store and what this node saw of them; the server's
// count every tenant's.
func TestStatsByTenant(t *testing.T) {
	store := sqlitetest.Open(t)
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		ingestAt(t, store, "acme", id, 1)
	}
	ingestAt(t, store, courier.DefaultTenant, "d-1", 1)
	m := metrics.New(metrics.Options{Source: store, TopologyFunc: topology, Clock: clocktest.New(now)})
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	acme := message("acme~a-1", "acme/invoice", "acme/orders", courier.StateDelivered, now.Add(-time.Second))
	def := message("d-1", "invoice", "orders", courier.StateDelivered, now.Add(-time.Second))
	m.Ingested(acme)
	m.Ingested(acme)
	m.Ingested(def)
	m.AttemptDone(acme, "system/ap", courier.Result{Class: courier.ClassTimeout}, time.Millisecond)
	m.AttemptDone(acme, "system/ap", courier.Result{Status: 204}, time.Millisecond)
	m.Applied(courier.Change{From: courier.StateInflight, Message: acme})
	m.AttemptDone(def, "orders", courier.Result{Status: 204}, time.Millisecond)
	m.Applied(courier.Change{From: courier.StateInflight, Message: def})
	discarded := message("d-2", "invoice", "orders", courier.StateDiscarded, now)
	m.Applied(courier.Change{From: courier.StateQueued, Message: discarded})

	type figures struct {
		queued                         int
		ingested, delivered, discarded int64
		minuteDelivered, minuteFailed  int
	}
	for _, tt := range []struct {
		tenant string
		want   figures
	}{
		{"acme", figures{queued: 3, ingested: 2, delivered: 1, minuteDelivered: 1, minuteFailed: 1}},
		{courier.DefaultTenant, figures{queued: 1, ingested: 1, delivered: 1, discarded: 1, minuteDelivered: 1}},
		{"beta", figures{}},
		{courier.AllTenants, figures{queued: 4, ingested: 3, delivered: 2, discarded: 1, minuteDelivered: 2, minuteFailed: 1}},
	} {
		s, err := m.StatsFunc(context.Background(), tt.tenant)
		if err != nil {
			t.Fatal(err)
		}
		last := s.Minutes[len(s.Minutes)-1]
		got := figures{s.Live.Queued, s.Ingested, s.Delivered, s.Discarded, last.Delivered, last.Failed}
		if got != tt.want || len(s.Minutes) != 60 || !s.CountedAt.Equal(now) {
			t.Errorf("stats of %q: %+v (%d minutes, counted %v), want %+v", tt.tenant, got, len(s.Minutes), s.CountedAt, tt.want)
		}
	}
}

// TestTenantSeries: the tenants the topology lists have their use, quotas,
// refusals and throttling as series labelled by tenant; a tenant taken out
// of the topology leaves them, and a topology without tenants has none.
func TestTenantSeries(t *testing.T) {
	store := sqlitetest.Open(t)
	ingestAt(t, store, "acme", "a-1", 100)
	ingestAt(t, store, "acme", "a-2", 50)
	ingestAt(t, store, "beta", "b-1", 7)
	ingestAt(t, store, courier.DefaultTenant, "d-1", 1000)
	withTenants := topology()
	withTenants.Endpoints["acme/crm"] = courier.NewEndpoint("acme/crm", courier.TransportHTTP)
	withTenants.Tenants = map[string]*courier.Tenant{
		"acme": {Name: "acme", Weight: 1, Quotas: courier.Quotas{MaxQueued: 10, MaxBytes: 4096, MaxEndpoints: 3,
			IngestRate: courier.Rate{N: 120, Per: time.Minute}, Burst: 20}},
		"beta": {Name: "beta", Weight: 2},
	}
	var current atomic.Pointer[courier.Topology]
	current.Store(withTenants)
	m := metrics.New(metrics.Options{Source: store, TopologyFunc: current.Load, Clock: clocktest.New(now),
		ThrottledFunc: func(tenant string) bool { return tenant == "beta" }})
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.Refused("acme", courier.QuotaMaxQueued)
	m.Refused("acme", courier.QuotaMaxQueued)
	m.Refused("beta", courier.QuotaIngestRate)

	fams := scrape(t, m)
	promtest.Check(t, fams, []promtest.Sample{
		{Name: "courier_tenant_queued_messages", Labels: []string{"tenant", "acme"}, Value: 2},
		{Name: "courier_tenant_queued_bytes", Labels: []string{"tenant", "acme"}, Value: 150},
		{Name: "courier_tenant_queued_messages", Labels: []string{"tenant", "beta"}, Value: 1},
		{Name: "courier_tenant_queued_bytes", Labels: []string{"tenant", "beta"}, Value: 7},
		{Name: "courier_tenant_endpoints", Labels: []string{"tenant", "acme"}, Value: 1},
		{Name: "courier_tenant_endpoints", Labels: []string{"tenant", "beta"}, Value: 0},
		{Name: "courier_tenant_quota", Labels: []string{"tenant", "acme", "quota", "max_queued"}, Value: 10},
		{Name: "courier_tenant_quota", Labels: []string{"tenant", "acme", "quota", "max_bytes"}, Value: 4096},
		{Name: "courier_tenant_quota", Labels: []string{"tenant", "acme", "quota", "max_endpoints"}, Value: 3},
		{Name: "courier_tenant_quota", Labels: []string{"tenant", "acme", "quota", "ingest_rate"}, Value: 2},
		{Name: "courier_tenant_quota", Labels: []string{"tenant", "acme", "quota", "burst"}, Value: 20},
		{Name: "courier_tenant_refused_total", Labels: []string{"tenant", "acme", "quota", "max_queued"}, Value: 2},
		{Name: "courier_tenant_refused_total", Labels: []string{"tenant", "beta", "quota", "ingest_rate"}, Value: 1},
		{Name: "courier_tenant_throttled", Labels: []string{"tenant", "acme"}, Value: 0},
		{Name: "courier_tenant_throttled", Labels: []string{"tenant", "beta"}, Value: 1},
	})
	if _, ok := promtest.Value(fams, "courier_tenant_quota", "tenant", "beta"); ok {
		t.Error("beta has a quota series, but no quota bounds it")
	}
	if _, ok := promtest.Value(fams, "courier_tenant_queued_messages", "tenant", courier.DefaultTenant); ok {
		t.Error("the default tenant, which tenants: does not list, has a series")
	}

	// beta leaves the topology: its series go, acme's stay.
	withoutBeta := *withTenants
	withoutBeta.Tenants = map[string]*courier.Tenant{"acme": withTenants.Tenants["acme"]}
	current.Store(&withoutBeta)
	fams = scrape(t, m)
	for name, f := range fams {
		if !strings.HasPrefix(name, "courier_tenant_") {
			continue
		}
		for _, s := range f.Metric {
			for _, l := range s.Label {
				if l.GetName() == "tenant" && l.GetValue() != "acme" {
					t.Errorf("%s has a series of tenant %q after it left the topology", name, l.GetValue())
				}
			}
		}
	}
	if got, ok := promtest.Value(fams, "courier_tenant_refused_total", "tenant", "acme", "quota", "max_queued"); !ok || got != 2 {
		t.Errorf("acme's refusals after beta left: %v (present %v), want 2", got, ok)
	}
	// beta comes back: its refusals were forgotten with it.
	current.Store(withTenants)
	if _, ok := promtest.Value(scrape(t, m), "courier_tenant_refused_total", "tenant", "beta"); ok {
		t.Error("beta's refusals from before it left are reported again")
	}

	// Without tenants: no tenant series at all.
	current.Store(topology())
	for name := range scrape(t, m) {
		if strings.HasPrefix(name, "courier_tenant_") {
			t.Errorf("%s is reported by a topology without tenants", name)
		}
	}
}
