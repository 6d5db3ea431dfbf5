package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/promtest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/lookup"
	"github.com/courier-gw/courier/metrics"
)

// GET /v1/stats counts the messages of the request's tenant alone, live
// in the store and seen by this node; the system tenant's are the
// server's, and a tenant's key cannot name another's.
func TestTenantStats(t *testing.T) {
	top := tenantTopology()
	var m *metrics.Metrics
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology, o.Keys = top, tenantKeys(t)
		m = metrics.New(metrics.Options{Source: o.Store, TopologyFunc: func() *courier.Topology { return top }})
		o.Observer, o.StatsFunc = m, m.StatsFunc
	})
	for key, ids := range map[string][]string{"acme/sender": {"a-1", "a-2"}, "beta/sender": {"b-1"}} {
		for _, id := range ids {
			if status, body, _ := ts.callAs(t, key, "PUT", "/v1/messages/"+id, `{"type": "invoice", "route": "orders", "payload": {}}`); status != http.StatusCreated {
				t.Fatalf("%s sends %s: %d %s", key, id, status, body)
			}
		}
	}
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key, path      string
		queued         int
		ingested       int64
		wantStatusCode int
	}{
		{"acme/admin", "/v1/stats", 2, 2, http.StatusOK},
		{"acme/admin", "/v1/tenants/acme/stats", 2, 2, http.StatusOK},
		{"beta/admin", "/v1/stats", 1, 1, http.StatusOK},
		{"system/admin", "/v1/tenants/acme/stats", 2, 2, http.StatusOK},
		{"system/admin", "/v1/stats", 0, 0, http.StatusOK}, // the default tenant's
		{"system/admin", "/v1/tenants/system/stats", 3, 3, http.StatusOK},
		{"beta/admin", "/v1/tenants/acme/stats", 0, 0, http.StatusNotFound},
		{"beta/admin", "/v1/tenants/system/stats", 0, 0, http.StatusNotFound},
	} {
		status, body, _ := ts.callAs(t, c.key, "GET", c.path, "")
		if status != c.wantStatusCode {
			t.Errorf("GET %s with %s: %d %s; want %d", c.path, c.key, status, body, c.wantStatusCode)
			continue
		}
		if status != http.StatusOK {
			continue
		}
		st := decode[api.Stats](t, body)
		if st.States[courier.StateQueued] != c.queued || st.Node == nil || st.Node.Ingested != c.ingested || len(st.Minutes) != 60 {
			t.Errorf("GET %s with %s: %s; want %d queued and %d ingested", c.path, c.key, body, c.queued, c.ingested)
		}
	}
}

// GET /v1/lookup resolves on the request's tenant's lookup route: two
// tenants' routes of one name are two routes, each with its own answers in
// the resolver's cache; another tenant's route is 404. A tenant sees the
// resolved endpoint's health, not this node's attempts on it, which count
// every tenant's that resolve to it.
func TestTenantLookup(t *testing.T) {
	asked := map[string]int{}
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tenant := r.URL.Query().Get("tenant")
		asked[tenant]++
		w.Write([]byte(`{"url": "https://` + tenant + `-ap.example/as4"}`))
	}))
	defer reg.Close()
	top := tenantTopology()
	for _, tenant := range []string{"acme", "beta"} {
		name := courier.Qualify(tenant, "directory")
		top.Routes[name] = &courier.Route{Name: name, Lookup: &courier.Lookup{URL: reg.URL + "/?tenant=" + tenant + "&participant={recipient}"},
			EndpointTemplate: courier.NewEndpoint("", courier.TransportHTTP)}
	}
	top.Prepare()
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology, o.Keys = top, tenantKeys(t)
		o.Resolver = lookup.New(lookup.Options{})
		o.ActivityFunc = func(string) courier.EndpointActivity {
			return courier.EndpointActivity{InFlight: 5, LastHour: map[string]int{"delivered": 40}}
		}
	})
	get := func(key, path string) (int, api.LookupAnswer, string) {
		t.Helper()
		status, body, _ := ts.callAs(t, key, "GET", path, "")
		var a api.LookupAnswer
		if status == http.StatusOK {
			a = decode[api.LookupAnswer](t, body)
		}
		return status, a, string(body)
	}
	const query = "?route=directory&recipient=0088:1&type=invoice"
	for _, tenant := range []string{"acme", "beta"} {
		status, a, body := get(tenant+"/admin", "/v1/lookup"+query)
		if status != http.StatusOK || a.Route != "directory" || a.Cached || a.URL != "https://"+tenant+"-ap.example/as4" {
			t.Fatalf("%s's lookup: %d %s; want its own registry's answer, asked now", tenant, status, body)
		}
		if strings.Contains(body, tenant+"/") || a.Endpoint == nil || a.Endpoint.InFlight != 0 || len(a.Endpoint.LastHour) != 0 {
			t.Errorf("%s's lookup: %s; want its own names, the endpoint without this node's attempts", tenant, body)
		}
	}
	if asked["acme"] != 1 || asked["beta"] != 1 {
		t.Errorf("registries asked %v; want each tenant's once", asked)
	}
	// The system's key, in acme: acme's answer, from the cache, with the
	// node's attempts.
	status, a, body := get("system/admin", "/v1/tenants/acme/lookup"+query)
	if status != http.StatusOK || !a.Cached || a.URL != "https://acme-ap.example/as4" || a.Route != "directory" || a.Endpoint == nil || a.Endpoint.InFlight != 5 {
		t.Errorf("the system's lookup in acme: %d %s", status, body)
	}
	for _, path := range []string{"/v1/lookup?route=acme/directory&recipient=0088:1&type=invoice", "/v1/tenants/acme/lookup" + query} {
		if status, _, body := get("beta/admin", path); status != http.StatusNotFound {
			t.Errorf("beta's lookup %s: %d %s; want 404", path, status, body)
		}
	}
	if status, _, body := get("system/admin", "/v1/lookup"+query); status != http.StatusNotFound {
		t.Errorf("the system's lookup in the default tenant, which has no route directory: %d %s; want 404", status, body)
	}
}

// /metrics shows, for the tenants the topology lists, the refusals by
// their quotas as the API answered them, and that they are throttled.
func TestTenantMetrics(t *testing.T) {
	top := tenantTopology()
	top.Tenants["acme"].Quotas = courier.Quotas{IngestRate: courier.Rate{N: 1, Per: time.Hour}}
	top.Tenants["beta"].Quotas = courier.Quotas{MaxQueued: 1}
	store := sqlitetest.Open(t)
	store.SetTenantQuotas(top.TenantQuotas())
	var srv *api.Server
	m := metrics.New(metrics.Options{Source: store, TopologyFunc: func() *courier.Topology { return top },
		ThrottledFunc: func(tenant string) bool { return srv.Throttled(tenant) }})
	srv = api.NewServer(api.Options{Store: store, Topology: top, Keys: tenantKeys(t), Observer: m, StatsFunc: m.StatsFunc, Metrics: m.Handler()})
	ts := &testServer{store: store, Server: httptest.NewServer(validated(t, srv))}
	t.Cleanup(ts.Close)
	for key, want := range map[string][]int{"acme/sender": {201, 429}, "beta/sender": {201, 429, 429}} {
		for i, code := range want {
			status, body, _ := ts.callAs(t, key, "PUT", fmt.Sprintf("/v1/messages/m-%d", i), `{"type": "invoice", "route": "orders", "payload": {}}`)
			if status != code {
				t.Fatalf("%s's message %d: %d %s; want %d", key, i, status, body, code)
			}
		}
	}
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, body, _ := ts.callAs(t, "system/admin", "GET", "/metrics", "")
	if status != http.StatusOK {
		t.Fatalf("scrape: %d %s", status, body)
	}
	fams := promtest.Parse(t, bytes.NewReader(body))
	promtest.Check(t, fams, []promtest.Sample{
		{Name: "courier_tenant_refused_total", Labels: []string{"tenant", "acme", "quota", "ingest_rate"}, Value: 1},
		{Name: "courier_tenant_refused_total", Labels: []string{"tenant", "beta", "quota", "max_queued"}, Value: 2},
		{Name: "courier_tenant_throttled", Labels: []string{"tenant", "acme"}, Value: 1},
		{Name: "courier_tenant_throttled", Labels: []string{"tenant", "beta"}, Value: 1},
		{Name: "courier_tenant_queued_messages", Labels: []string{"tenant", "acme"}, Value: 1},
		{Name: "courier_tenant_queued_messages", Labels: []string{"tenant", "beta"}, Value: 1},
		{Name: "courier_tenant_quota", Labels: []string{"tenant", "beta", "quota", "max_queued"}, Value: 1},
	})
}
