package metrics

import (
	"sync"

	courier "github.com/courier-gw/courier"
	"github.com/prometheus/client_golang/prometheus"
)

// The tenants' series (docs/design.md §19, §20) carry a tenant label only
// for the tenants the topology lists under tenants:, so that their number
// is bounded by the configuration; a tenant taken out of it leaves the
// series at the next scrape.

// refusals counts the refusals by the tenants' quotas, by tenant and quota.
type refusals struct {
	mu sync.Mutex
	n  map[refusal]int64
}

type refusal struct{ tenant, quota string }

// Refused counts a request of tenant refused by one of its quotas (a
// courier.Quota… name): the API's QuotaObserver.
func (m *Metrics) Refused(tenant, quota string) {
	r := &m.refused
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[refusal]int64{}
	}
	r.n[refusal{tenant, quota}]++
}

// counts returns the refusals of the tenants listed, and forgets those of
// the others.
func (r *refusals) counts(listed map[string]*courier.Tenant) map[refusal]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[refusal]int64, len(r.n))
	for k, n := range r.n {
		if listed[k.tenant] == nil {
			delete(r.n, k)
			continue
		}
		out[k] = n
	}
	return out
}

// tenantCollector reports, at each scrape, each listed tenant's use as
// last counted, its quotas, its refusals and whether it is throttled.
type tenantCollector struct{ m *Metrics }

var (
	descTenantQueued = prometheus.NewDesc("courier_tenant_queued_messages",
		"The tenant's messages not yet finished (queued, in flight or suspended), as last counted in the store: what its max_queued quota bounds.", []string{"tenant"}, nil)
	descTenantBytes = prometheus.NewDesc("courier_tenant_queued_bytes",
		"The bytes of the payloads of the tenant's messages not yet finished, as last counted in the store: what its max_bytes quota bounds.", []string{"tenant"}, nil)
	descTenantEndpoints = prometheus.NewDesc("courier_tenant_endpoints",
		"The tenant's endpoints: what its max_endpoints quota bounds.", []string{"tenant"}, nil)
	descTenantQuota = prometheus.NewDesc("courier_tenant_quota",
		"The tenant's quotas that bound: max_queued (messages), max_bytes, max_endpoints, ingest_rate (messages per second) and burst (messages).", []string{"tenant", "quota"}, nil)
	descTenantRefused = prometheus.NewDesc("courier_tenant_refused_total",
		"Requests of the tenant refused by one of its quotas (max_queued, max_bytes, ingest_rate, max_endpoints) on this node.", []string{"tenant", "quota"}, nil)
	descTenantThrottled = prometheus.NewDesc("courier_tenant_throttled",
		"1 while the tenant is held back, by a refusal of its quotas in the last minute or by its fair share of scarce capacity on this node, else 0.", []string{"tenant"}, nil)
)

func (c tenantCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descTenantQueued, descTenantBytes, descTenantEndpoints, descTenantQuota, descTenantRefused, descTenantThrottled} {
		ch <- d
	}
}

func (c tenantCollector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	t := m.opts.TopologyFunc()
	if t == nil || len(t.Tenants) == 0 {
		m.refused.counts(nil) // forget every tenant's
		return
	}
	m.mu.RLock()
	use, counted := m.use, !m.countedAt.IsZero()
	m.mu.RUnlock()
	endpoints := make(map[string]int, len(t.Tenants))
	for name := range t.Endpoints {
		endpoints[courier.TenantOf(name)]++
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for name, tn := range t.Tenants {
		if counted {
			u := use[name]
			gauge(descTenantQueued, float64(u.Queued), name)
			gauge(descTenantBytes, float64(u.Bytes), name)
		}
		gauge(descTenantEndpoints, float64(endpoints[name]), name)
		q := tn.Quotas
		for _, b := range []struct {
			quota string
			v     float64
		}{
			{courier.QuotaMaxQueued, float64(q.MaxQueued)},
			{courier.QuotaMaxBytes, float64(q.MaxBytes)},
			{courier.QuotaMaxEndpoints, float64(q.MaxEndpoints)},
			{courier.QuotaIngestRate, q.IngestRate.PerSecond()},
			{"burst", float64(q.Burst)},
		} {
			if b.v > 0 {
				gauge(descTenantQuota, b.v, name, b.quota)
			}
		}
		throttled := 0.0
		if m.opts.ThrottledFunc != nil && m.opts.ThrottledFunc(name) {
			throttled = 1
		}
		gauge(descTenantThrottled, throttled, name)
	}
	for k, n := range m.refused.counts(t.Tenants) {
		ch <- prometheus.MustNewConstMetric(descTenantRefused, prometheus.CounterValue, float64(n), k.tenant, k.quota)
	}
}
