package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/topology"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// tenantTopology has two tenants with objects of the same names, acme's
// marked so that any answer that shows one of them is caught.
func tenantTopology() *courier.Topology {
	t := &courier.Topology{
		Endpoints:     map[string]*courier.Endpoint{},
		Routes:        map[string]*courier.Route{},
		Policies:      map[string]*courier.Policy{},
		Subscriptions: map[string]*courier.Subscription{},
		Tenants: map[string]*courier.Tenant{
			"acme": {Name: "acme", Weight: 1},
			"beta": {Name: "beta", Weight: 1},
		},
	}
	for _, tenant := range []string{"acme", "beta"} {
		q := func(n string) string { return courier.Qualify(tenant, n) }
		ep := courier.NewEndpoint(q("crm"), courier.TransportHTTP)
		httptransport.Of(ep).URL = "http://" + tenant + "-only.invalid/hook"
		t.Endpoints[ep.Name] = ep
		t.Routes[q("orders")] = &courier.Route{Name: q("orders"), Endpoints: []string{q("crm")}, Strategy: courier.StrategySingle}
		p := courier.DefaultPolicy()
		p.Name = q("invoice")
		t.Policies[p.Name] = p
		t.Subscriptions[q("crm-sub")] = &courier.Subscription{Name: q("crm-sub"), Types: []string{q("order.*")}, Route: q("orders")}
	}
	// acme's alone, so that reading them by name finds nothing of beta's.
	vault := courier.NewEndpoint("acme/vault", courier.TransportHTTP)
	httptransport.Of(vault).URL = "http://acme-only.invalid/vault"
	t.Endpoints[vault.Name] = vault
	t.Routes["acme/ledger"] = &courier.Route{Name: "acme/ledger", Endpoints: []string{"acme/vault"}, Strategy: courier.StrategySingle}
	p := courier.DefaultPolicy()
	p.Name = "acme/ledger-policy"
	t.Policies[p.Name] = p
	t.Subscriptions["acme/ledger-sub"] = &courier.Subscription{Name: "acme/ledger-sub", Types: []string{"acme/ledger.*"}, Route: "acme/ledger"}
	t.Prepare()
	return t
}

func tenantKeys(t *testing.T) []api.Key {
	t.Helper()
	var keys []api.Key
	for _, tenant := range []string{"acme", "beta"} {
		for _, role := range []courier.Role{courier.RoleSender, courier.RoleAdmin} {
			name := fmt.Sprintf("%s/%s", tenant, role)
			h, err := api.ParseKeyHash(api.HashSecret("secret-of-" + name))
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, api.Key{Name: name, Tenant: tenant, Role: role, Hash: h})
			testSecrets[name] = "secret-of-" + name
		}
	}
	h, err := api.ParseKeyHash(api.HashSecret("secret-of-system/admin"))
	if err != nil {
		t.Fatal(err)
	}
	testSecrets["system/admin"] = "secret-of-system/admin"
	return append(keys, api.Key{Name: "system/admin", Tenant: courier.SystemTenant, Role: courier.RoleAdmin, Hash: h})
}

// A tenant's key reaches none of another tenant's objects or messages, by
// any operation of the API: reading one by name or id answers 404, a list
// or a count holds none, and acting on one changes nothing. The table is
// the OpenAPI description's, so that a new operation cannot skip the check.
func TestTenantIsolation(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testTenantIsolation(t, newTenantCatalogServer(t)) })
	t.Run("postgres", func(t *testing.T) { testTenantIsolation(t, newTenantCatalogServerOn(t, pgtest.Open(t))) })
}

func testTenantIsolation(t *testing.T, ts *testServer) {
	// Each tenant's topology, through the API with its own admin key: the
	// same names in both, and acme's alone.
	for _, tenant := range []string{"acme", "beta"} {
		for _, obj := range []struct{ path, spec string }{
			{"/v1/endpoints/crm", `{"transport": "http", "url": "http://` + tenant + `-only.invalid/hook"}`},
			{"/v1/routes/orders", `{"endpoints": ["crm"]}`},
			{"/v1/policies/invoice", `{"max_attempts": 3}`},
			{"/v1/subscriptions/crm-sub", `{"types": ["order.*"], "route": "orders"}`},
		} {
			if status, body, _ := ts.callAs(t, tenant+"/admin", "PUT", obj.path, obj.spec); status != http.StatusCreated {
				t.Fatalf("%s puts %s: %d %s", tenant, obj.path, status, body)
			}
		}
	}
	for _, obj := range []struct{ path, spec string }{
		{"/v1/endpoints/vault", `{"transport": "http", "url": "http://acme-only.invalid/vault"}`},
		{"/v1/routes/ledger", `{"endpoints": ["vault"]}`},
		{"/v1/policies/ledger-policy", `{"max_attempts": 3}`},
		{"/v1/subscriptions/ledger-sub", `{"types": ["ledger.*"], "route": "ledger"}`},
		{"/v1/routes/directory", `{"lookup": {"url": "http://acme-only.invalid/{recipient}"}}`},
	} {
		if status, body, _ := ts.callAs(t, "acme/admin", "PUT", obj.path, obj.spec); status != http.StatusCreated {
			t.Fatalf("acme puts %s: %d %s", obj.path, status, body)
		}
	}
	// acme's messages: one to a route, one published, one suspended.
	for _, req := range []struct{ path, body string }{
		{"/v1/messages/inv-1", `{"type": "invoice", "route": "orders", "payload": {"marker": "ACME-MARKER"}}`},
		{"/v1/messages/pub-1", `{"type": "order.created", "payload": {"marker": "ACME-MARKER"}}`},
		{"/v1/messages/pub-2", `{"type": "ledger.entry", "payload": {"marker": "ACME-MARKER"}}`},
	} {
		if status, body, _ := ts.callAs(t, "acme/sender", "PUT", req.path, req.body); status != http.StatusCreated {
			t.Fatalf("acme's ingest of %s: %d %s", req.path, status, body)
		}
	}
	before := acmeWorld(t, ts)

	callEveryOperation(t, ts)
	// A test message reaches a tenant's own endpoint only, by whatever
	// name another tenant gives it.
	ts.callEach(t, "POST", []keyedCall{
		{"acme/admin", "/v1/endpoints/vault/test", http.StatusOK},
		{"beta/admin", "/v1/endpoints/vault/test", http.StatusNotFound},
		{"beta/admin", "/v1/endpoints/acme%2Fvault/test", http.StatusNotFound},
		{"beta/admin", "/v1/tenants/acme/endpoints/vault/test", http.StatusNotFound},
		{"system/admin", "/v1/tenants/acme/endpoints/vault/test", http.StatusOK},
	}, nil)
	// beta's statistics count nothing of acme's messages, which acme's own
	// count; with the system's key, the server's count them all.
	for _, c := range []struct {
		key, path string
		queued    float64
	}{
		{"acme/admin", "/v1/stats", 3},
		{"beta/admin", "/v1/stats", 0},
		{"system/admin", "/v1/tenants/beta/stats", 0},
		{"system/admin", "/v1/stats", 0}, // the default tenant's
		{"system/admin", "/v1/tenants/system/stats", 3},
	} {
		status, body, _ := ts.callAs(t, c.key, "GET", c.path, "")
		st := decode[map[string]any](t, body)
		states, _ := st["states"].(map[string]any)
		if status != http.StatusOK || states["queued"] != c.queued || states["inflight"] != 0.0 || states["suspended"] != 0.0 {
			t.Errorf("GET %s with %s: %d %s; want %v queued", c.path, c.key, status, body, c.queued)
		}
	}
	// A tenant's whole topology applied with prune leaves the others' be;
	// it cannot name theirs.
	if status, body, _ := ts.callAs(t, "beta/admin", "PUT", "/v1/topology?prune=true", `{}`); status != http.StatusOK {
		t.Errorf("beta applies an empty topology with prune: %d %s", status, body)
	}
	status, body, _ := ts.callAs(t, "beta/admin", "PUT", "/v1/topology", `{"routes": {"acme/ledger": {"endpoints": ["crm"]}}}`)
	wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument, "another tenant's")
	// A tenant's admin makes keys of its own tenant only.
	status, body, _ = ts.callAs(t, "beta/admin", "PUT", "/v1/keys/root", `{"tenant": "system", "role": "admin", "hash": "`+api.HashSecret("x")+`"}`)
	wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument, `is "system", but the name "root" is tenant beta's`)
	if after := acmeWorld(t, ts); after != before {
		t.Errorf("beta's requests changed acme's world:\nbefore %s\nafter  %s", before, after)
	}
}

// callEveryOperation calls every operation of the OpenAPI description with
// beta's keys, naming acme's objects and messages, and checks that no
// answer shows anything of acme's and that a read by name is 404.
func callEveryOperation(t *testing.T, ts *testServer) {
	t.Helper()
	doc, err := openAPI()
	if err != nil {
		t.Fatal(err)
	}
	// acme's names for each path parameter.
	params := map[string]string{"{id}": "inv-1", "{subscription}": "ledger-sub", "{tenant}": "acme"}
	names := map[string]string{"endpoints": "vault", "routes": "ledger", "policies": "ledger-policy", "subscriptions": "ledger-sub", "keys": "sender", "receivers": "inbox", "operations": "op-1", "claims": "inv-1"}
	// The operations that name acme's objects in their query, as acme
	// names them and by their qualified names: they answer 404 as a read
	// by name does.
	queries := map[string][]string{
		"GET /v1/lookup": {"?route=directory&recipient=0088:1&type=invoice", "?route=acme/directory&recipient=0088:1&type=invoice"},
	}
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			ops = append(ops, method+" "+path)
		}
	}
	sort.Strings(ops)
	for _, op := range ops {
		method, path, _ := strings.Cut(op, " ")
		switch path {
		case "/healthz", "/readyz", "/v1/openapi.json", "/v1/openapi.yaml":
			continue // public, and about no tenant
		}
		concrete := path
		for p, v := range params {
			concrete = strings.ReplaceAll(concrete, p, v)
		}
		if strings.Contains(concrete, "{name}") {
			kind := strings.Split(path, "/")[2]
			concrete = strings.ReplaceAll(concrete, "{name}", names[kind])
		}
		calls := []string{concrete}
		if q := queries[op]; q != nil {
			calls = nil
			for _, query := range q {
				calls = append(calls, concrete+query)
			}
		}
		for _, call := range calls {
			for _, key := range []string{"beta/admin", "beta/sender"} {
				status, body, _ := ts.callAs(t, key, method, call, `{}`)
				text := string(body)
				// acme's data: its payloads, its endpoints' targets, its
				// qualified names and ids (the name acme alone may be the
				// request's own words echoed, as in "no such tenant").
				// Its qualified names given in a query may be echoed too.
				shown := text
				if call != concrete {
					shown = strings.ReplaceAll(text, "acme/directory", "")
				}
				if strings.Contains(shown, "ACME") || strings.Contains(shown, "acme-only") || strings.Contains(shown, "acme/") || strings.Contains(shown, "acme~") {
					t.Errorf("%s %s with %s's key: %d shows acme's data: %s", method, call, key, status, truncate(text))
				}
				if method == "GET" && (strings.Contains(path, "{") || call != concrete) && status != http.StatusNotFound && status != http.StatusForbidden {
					t.Errorf("%s %s with %s's key: %d %s; want 404 (or 403 for a role that may not)", method, call, key, status, truncate(text))
				}
			}
		}
	}
}

// acmeWorld is what acme's admin key reads of acme's messages and objects,
// in the fields that another tenant's actions could change.
func acmeWorld(t *testing.T, ts *testServer) string {
	t.Helper()
	var b strings.Builder
	read := func(path string) map[string]any {
		status, body, _ := ts.callAs(t, "acme/admin", "GET", path, "")
		if status != http.StatusOK {
			t.Fatalf("acme reads %s: %d %s", path, status, body)
		}
		return decode[map[string]any](t, body)
	}
	for _, path := range []string{"/v1/messages/inv-1", "/v1/messages/pub-1"} {
		m := read(path)
		fmt.Fprintf(&b, "%s: %v %v %v %v %v; ", path, m["state"], m["resubmit_count"], m["deliveries"] != nil, m["erased"], m["payload"])
	}
	fmt.Fprintf(&b, "messages listed: %d; ", len(read("/v1/messages")["messages"].([]any)))
	ep := read("/v1/endpoints/crm")
	fmt.Fprintf(&b, "endpoint: %v %v; ", ep["state"], ep["target"])
	fmt.Fprintf(&b, "routes: %v; ", read("/v1/routes")["routes"])
	tn := read("/v1/tenants/acme")
	fmt.Fprintf(&b, "tenant: %v %v %v; ", tn["weight"], tn["quotas"], tn["alerts"])
	top := read("/v1/topology")
	delete(top, "version") // the store's, which every tenant's change moves on
	fmt.Fprintf(&b, "topology: %v", top)
	return b.String()
}

// keyedCall is a request made with the secret of a key, and the status it
// should get.
type keyedCall struct {
	key, path string
	want      int
}

// callEach makes each call with method and no body, reporting each answer
// of another status than the one wanted, and gives the body of every other
// to check, when there is one.
func (ts *testServer) callEach(t *testing.T, method string, calls []keyedCall, check func(c keyedCall, body []byte)) {
	t.Helper()
	for _, c := range calls {
		status, body, _ := ts.callAs(t, c.key, method, c.path, "")
		if status != c.want {
			t.Errorf("%s %s with %s: %d %s; want %d", method, c.path, c.key, status, body, c.want)
		} else if check != nil {
			check(c, body)
		}
	}
}

// A system key reaches a tenant's messages and objects under the path that
// names the tenant; a tenant's key may name its own so, never another.
func TestTenantPaths(t *testing.T) {
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology, o.Keys = tenantTopology(), tenantKeys(t)
	})
	if status, body, _ := ts.callAs(t, "acme/sender", "PUT", "/v1/messages/inv-1", `{"type": "invoice", "route": "orders", "payload": {}}`); status != http.StatusCreated {
		t.Fatalf("acme's ingest: %d %s", status, body)
	}
	ts.callEach(t, "GET", []keyedCall{
		{"system/admin", "/v1/tenants/acme/messages/inv-1", http.StatusOK},
		{"acme/admin", "/v1/tenants/acme/messages/inv-1", http.StatusOK},
		{"acme/admin", "/v1/messages/inv-1", http.StatusOK},
		{"system/admin", "/v1/messages/inv-1", http.StatusNotFound}, // the default tenant's
		{"beta/admin", "/v1/tenants/acme/messages/inv-1", http.StatusNotFound},
		{"system/admin", "/v1/tenants/gamma/messages/inv-1", http.StatusNotFound},
		{"acme/admin", "/v1/tenants/acme/endpoints/crm", http.StatusOK},
		{"acme/admin", "/v1/messages/inv-1/payload", http.StatusOK},
		{"system/admin", "/v1/tenants/acme/messages/inv-1/payload", http.StatusOK},
		{"beta/admin", "/v1/tenants/acme/messages/inv-1/payload", http.StatusNotFound},
		{"beta/admin", "/v1/tenants/acme/endpoints/crm", http.StatusNotFound},
	}, func(c keyedCall, body []byte) {
		if text := string(body); c.want == http.StatusOK && (strings.Contains(text, `"acme/`) || strings.Contains(text, `"acme~`)) {
			t.Errorf("GET %s with %s shows the tenant's prefix: %s", c.path, c.key, body)
		}
	})
	// The client acts in a tenant as the path names it.
	c := api.NewClient(ts.URL, testSecrets["system/admin"]).InTenant("acme")
	m, err := c.Message(context.Background(), "inv-1")
	if err != nil || m.ID != "inv-1" || m.Route != "orders" {
		t.Errorf("the system's client in acme reads %+v, %v; want acme's inv-1 on its route orders", m, err)
	}
	if _, err := api.NewClient(ts.URL, testSecrets["beta/admin"]).InTenant("acme").Message(context.Background(), "inv-1"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Errorf("beta's client in acme: %v; want not found", err)
	}
}

// A tenant's quotas hold at ingest: its rate answers 429 with Retry-After,
// its cap of messages not yet finished 429 quota_exceeded, its cap of bytes
// 507 storage_quota, each naming the quota; another tenant is not held.
func TestTenantQuotas(t *testing.T) {
	top := tenantTopology()
	top.Tenants["acme"].Quotas = courier.Quotas{IngestRate: courier.Rate{N: 2, Per: time.Hour}, Burst: 2}
	top.Tenants["beta"].Quotas = courier.Quotas{MaxQueued: 2, MaxBytes: 1 << 20}
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology, o.Keys = top, tenantKeys(t)
	})
	ts.store.SetTenantQuotas(top.TenantQuotas())
	send := func(key, id, payload string) (int, []byte, http.Header) {
		return ts.callAs(t, key, "PUT", "/v1/messages/"+id, `{"type": "invoice", "route": "orders", "payload": `+payload+`}`)
	}
	for i := range 2 {
		if status, body, _ := send("acme/sender", fmt.Sprint("a-", i), `{}`); status != http.StatusCreated {
			t.Fatalf("acme's message %d within its rate: %d %s", i, status, body)
		}
	}
	status, body, h := send("acme/sender", "a-2", `{}`)
	wantError(t, status, body, http.StatusTooManyRequests, courier.CodeRateLimited, "ingest_rate quota of 2/h")
	if h.Get("Retry-After") == "" {
		t.Error("a refusal by the ingest rate gives no Retry-After")
	}
	for i := range 2 {
		if status, body, _ := send("beta/sender", fmt.Sprint("b-", i), `{}`); status != http.StatusCreated {
			t.Fatalf("beta's message %d within its cap: %d %s", i, status, body)
		}
	}
	status, body, _ = send("beta/sender", "b-2", `{}`)
	wantError(t, status, body, http.StatusTooManyRequests, courier.CodeQuotaExceeded, "max_queued")
	// A repeat of a stored message is no new use.
	if status, body, _ := send("beta/sender", "b-1", `{}`); status != http.StatusOK {
		t.Errorf("beta's repeat at its cap: %d %s; want 200", status, body)
	}
	top.Tenants["beta"].Quotas = courier.Quotas{MaxBytes: 40}
	ts.store.SetTenantQuotas(top.TenantQuotas())
	status, body, _ = send("beta/sender", "b-3", `{"big": "`+strings.Repeat("x", 40)+`"}`)
	wantError(t, status, body, http.StatusInsufficientStorage, courier.CodeStorageQuota, "max_bytes")
	if strings.Contains(string(body), "beta/") || strings.Contains(string(body), "beta~") {
		t.Errorf("the refusal shows the tenant's qualified names: %s", body)
	}
	// Both are shown as throttled by their quotas, with why.
	for tenant, why := range map[string]string{"acme": "ingest_rate", "beta": "max_bytes"} {
		status, body, _ := ts.callAs(t, tenant+"/admin", "GET", "/v1/tenants/"+tenant, "")
		v := decode[api.TenantView](t, body)
		if status != http.StatusOK || !v.Throttled || !strings.Contains(v.ThrottledBy, why) {
			t.Errorf("%s after its refusal: %d %s; want it throttled by %s", tenant, status, body, why)
		}
	}
}

// An operator sees each tenant's use against its quotas; a tenant's key
// sees its own tenant alone.
func TestTenantsListed(t *testing.T) {
	top := tenantTopology()
	top.Tenants["acme"].Quotas = courier.Quotas{MaxQueued: 10, IngestRate: courier.Rate{N: 100, Per: time.Second}}
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology, o.Keys = top, tenantKeys(t)
		o.ThrottledFunc = func(tenant string) (bool, string) {
			return tenant == "beta", "endpoint system/hub is full; its capacity is shared by weight with acme"
		}
	})
	if status, body, _ := ts.callAs(t, "acme/sender", "PUT", "/v1/messages/inv-1", `{"type": "invoice", "route": "orders", "payload": {"n": 1}}`); status != http.StatusCreated {
		t.Fatalf("acme's ingest: %d %s", status, body)
	}
	status, body, _ := ts.callAs(t, "system/admin", "GET", "/v1/tenants", "")
	if status != http.StatusOK {
		t.Fatalf("the system's list: %d %s", status, body)
	}
	list := decode[api.TenantList](t, body)
	var names []string
	for _, v := range list.Tenants {
		names = append(names, v.Name)
		if v.Name == "acme" && (v.Use.Queued != 1 || v.Use.Bytes == 0 || v.Quotas.MaxQueued != 10 || v.Quotas.IngestRate != "100/s" || v.Endpoints != 2) {
			t.Errorf("acme as listed: %+v; want 1 queued of 10, its bytes, 100/s and 2 endpoints", v)
		}
	}
	for _, v := range list.Tenants {
		if v.Throttled != (v.Name == "beta") || v.Name == "beta" && !strings.HasPrefix(v.ThrottledBy, "fair share: endpoint system/hub is full") {
			t.Errorf("%s: throttled %v by %q; want beta alone, by its fair share", v.Name, v.Throttled, v.ThrottledBy)
		}
	}
	if strings.Join(names, ",") != "acme,beta,default" {
		t.Errorf("the system's list names %v; want acme, beta and default", names)
	}
	status, body, _ = ts.callAs(t, "beta/admin", "GET", "/v1/tenants", "")
	if list := decode[api.TenantList](t, body); status != http.StatusOK || len(list.Tenants) != 1 || list.Tenants[0].Name != "beta" {
		t.Errorf("beta's list: %d %s; want beta alone", status, body)
	}
	if status, _, _ := ts.callAs(t, "beta/admin", "GET", "/v1/tenants/acme", ""); status != http.StatusNotFound {
		t.Errorf("beta reads acme: %d; want 404", status)
	}
}

// newTenantCatalogServer serves the API over a topology held in the
// store, as courier serve does with a file that has neither tenants nor
// topology: the tenants acme and beta are written by the system's key
// (PUT /v1/tenants), their objects through the API. With fileTenants, the
// configuration file courier.yaml holds the tenants instead.
func newTenantCatalogServer(t *testing.T, fileTenants ...bool) *testServer {
	t.Helper()
	return newTenantCatalogServerOn(t, sqlitetest.Open(t), fileTenants...)
}

// newTenantCatalogServerOn is newTenantCatalogServer on the store given.
func newTenantCatalogServerOn(t *testing.T, store courier.Store, fileTenants ...bool) *testServer {
	t.Helper()
	var srv *api.Server
	o := topology.Options{Store: store, OnChange: func(tp *courier.Topology) {
		if srv != nil {
			srv.SetTopology(tp)
		}
	}}
	if len(fileTenants) > 0 && fileTenants[0] {
		o.Tenants, o.TenantsFile = tenantTopology().Tenants, "courier.yaml"
	}
	cat, err := topology.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	srv = api.NewServer(api.Options{Store: store, Topology: cat.Topology(), Objects: cat, SigningKeys: cat, Keys: tenantKeys(t), Clock: courier.SystemClock{},
		// A test message answers with where it went: sent to another
		// tenant's endpoint, the answer would show its target.
		TestSendFunc: func(_ context.Context, d courier.Delivery) courier.Result {
			return courier.Result{Status: 200, Response: "sent to " + d.Endpoint.Target()}
		}})
	ts := &testServer{store: store, Server: httptest.NewServer(validated(t, srv))}
	t.Cleanup(ts.Close)
	if o.TenantsFile == "" {
		for _, tenant := range []string{"acme", "beta"} {
			if status, body, _ := ts.callAs(t, "system/admin", "PUT", "/v1/tenants/"+tenant, `{"weight": 1}`); status != http.StatusCreated {
				t.Fatalf("the system creates tenant %s: %d %s", tenant, status, body)
			}
		}
	}
	return ts
}

// A system key creates, changes and deletes tenants; deleting one removes
// everything it owns in one change of the topology, recorded with who did
// it, and starts the operation that erases its messages. A tenant's key
// may change no tenant: its own is 403, another's 404.
func TestTenantLifecycle(t *testing.T) {
	ts := newTenantCatalogServer(t)
	ctx := context.Background()
	status, body, h := ts.callAs(t, "system/admin", "PUT", "/v1/tenants/gamma", `{"weight": 2, "quotas": {"max_queued": 5}}`)
	if status != http.StatusCreated || h.Get("Location") != "/v1/tenants/gamma" || h.Get("ETag") == "" {
		t.Fatalf("create gamma: %d %s %v", status, body, h)
	}
	if o := decode[api.TopologyObject](t, body); o.Kind != courier.KindTenant || o.Name != "gamma" || o.Version == 0 {
		t.Errorf("the created tenant: %+v", o)
	}
	status, body, _ = ts.callAs(t, "system/admin", "PUT", "/v1/tenants/gamma", `{"weight": 0}`)
	wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument, "tenants.gamma.weight: must be at least 1")

	// Alert targets: acme's own endpoint, by its plain name.
	if status, body, _ := ts.callAs(t, "acme/admin", "PUT", "/v1/endpoints/pager", `{"transport": "http", "url": "http://acme-only.invalid/pager"}`); status != http.StatusCreated {
		t.Fatalf("acme's pager: %d %s", status, body)
	}
	status, body, _ = ts.callAs(t, "system/admin", "PUT", "/v1/tenants/acme", `{"weight": 3, "alerts": {"notify": ["nope"]}}`)
	wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument, `tenants.acme.alerts.notify[0]: endpoint "nope" is not defined`)
	if status, body, _ := ts.callAs(t, "system/admin", "PUT", "/v1/tenants/acme", `{"weight": 3, "alerts": {"notify": ["pager"], "max_per_hour": 2}}`); status != http.StatusOK {
		t.Fatalf("replace acme: %d %s", status, body)
	}
	status, body, _ = ts.callAs(t, "acme/admin", "GET", "/v1/tenants/acme", "")
	if v := decode[api.TenantView](t, body); status != http.StatusOK || v.Weight != 3 || v.Alerts == nil || strings.Join(v.Alerts.Notify, ",") != "pager" || v.Alerts.MaxPerHour != 2 {
		t.Fatalf("acme as its key reads it: %d %s", status, body)
	}

	// Who may: a tenant's key changes no tenant.
	for _, tc := range []struct {
		key, method, path string
		want              int
	}{
		{"acme/admin", "PUT", "/v1/tenants/acme", http.StatusForbidden},
		{"acme/admin", "DELETE", "/v1/tenants/acme", http.StatusForbidden},
		{"acme/admin", "PUT", "/v1/tenants/beta", http.StatusNotFound},
		{"acme/admin", "DELETE", "/v1/tenants/beta", http.StatusNotFound},
		{"acme/admin", "PUT", "/v1/tenants/system", http.StatusNotFound},
		{"beta/sender", "DELETE", "/v1/tenants/beta", http.StatusForbidden},
		{"system/admin", "DELETE", "/v1/tenants/default", http.StatusConflict},
		{"system/admin", "DELETE", "/v1/tenants/system", http.StatusConflict},
		{"system/admin", "DELETE", "/v1/tenants/nobody", http.StatusNotFound},
	} {
		if status, body, _ := ts.callAs(t, tc.key, tc.method, tc.path, `{"weight": 9}`); status != tc.want {
			t.Errorf("%s %s with %s: %d %s; want %d", tc.method, tc.path, tc.key, status, body, tc.want)
		}
	}

	// acme's topology and a message of it; the store's keys have an
	// admin key of the system's first.
	if status, body, _ := ts.callAs(t, "system/admin", "PUT", "/v1/keys/root", `{"tenant": "system", "role": "admin", "hash": "`+api.HashSecret("root-secret")+`"}`); status != http.StatusCreated {
		t.Fatalf("the system's stored key: %d %s", status, body)
	}
	for _, obj := range []struct{ path, spec string }{
		{"/v1/endpoints/crm", `{"transport": "http", "url": "http://acme-only.invalid/hook"}`},
		{"/v1/routes/orders", `{"endpoints": ["crm"]}`},
		{"/v1/policies/invoice", `{"max_attempts": 3}`},
		{"/v1/subscriptions/crm-sub", `{"types": ["order.*"], "route": "orders"}`},
		{"/v1/keys/ci", `{"role": "sender", "hash": "` + api.HashSecret("ci-secret") + `"}`},
	} {
		if status, body, _ := ts.callAs(t, "acme/admin", "PUT", obj.path, obj.spec); status != http.StatusCreated {
			t.Fatalf("acme puts %s: %d %s", obj.path, status, body)
		}
	}
	if status, body, _ := ts.callAs(t, "beta/admin", "PUT", "/v1/endpoints/crm", `{"transport": "http", "url": "http://beta.invalid/hook"}`); status != http.StatusCreated {
		t.Fatalf("beta's endpoint: %d %s", status, body)
	}
	if status, body, _ := ts.callAs(t, "acme/sender", "PUT", "/v1/messages/inv-1", `{"type": "invoice", "route": "orders", "payload": {}}`); status != http.StatusCreated {
		t.Fatalf("acme's ingest: %d %s", status, body)
	}

	status, body, h = ts.callAs(t, "system/admin", "DELETE", "/v1/tenants/acme", "")
	if status != http.StatusAccepted {
		t.Fatalf("delete acme: %d %s", status, body)
	}
	op := decode[api.Operation](t, body)
	if op.Kind != courier.ActionEraseTenant || op.Tenant != "acme" || op.Who != "system/admin" || h.Get("Location") != "/v1/tenants/system/operations/"+op.ID {
		t.Fatalf("the erase operation: %s, Location %q", body, h.Get("Location"))
	}
	stored, err := ts.store.Bulk(ctx, courier.QualifyID(courier.SystemTenant, op.ID))
	if err != nil || stored.Kind != courier.ActionEraseTenant || stored.Filter.Tenant != "acme" || stored.Who != "system/admin" {
		t.Fatalf("the stored operation: %+v, %v; want erase_tenant of acme by system/admin", stored, err)
	}
	if status, body, _ := ts.callAs(t, "system/admin", "GET", h.Get("Location"), ""); status != http.StatusOK || decode[api.Operation](t, body).ID != op.ID {
		t.Errorf("following the operation: %d %s", status, body)
	}
	if status, body, _ := ts.callAs(t, "beta/admin", "GET", h.Get("Location"), ""); status != http.StatusNotFound {
		t.Errorf("beta follows the system's operation: %d %s; want 404", status, body)
	}

	// From the answer on, nothing of acme is left to ingest to or call.
	for _, tc := range []struct{ key, method, path, body string }{
		{"system/admin", "GET", "/v1/tenants/acme", ""},
		{"system/admin", "GET", "/v1/tenants/acme/routes/orders", ""},
		{"system/admin", "PUT", "/v1/tenants/acme/messages/inv-2", `{"type": "invoice", "route": "orders", "payload": {}}`},
		{"acme/admin", "GET", "/v1/endpoints/crm", ""},
		{"acme/admin", "GET", "/v1/keys/ci", ""},
	} {
		if status, body, _ := ts.callAs(t, tc.key, tc.method, tc.path, tc.body); status != http.StatusNotFound {
			t.Errorf("%s %s with %s after the delete: %d %s; want 404", tc.method, tc.path, tc.key, status, body)
		}
	}
	if status, body, _ := ts.callAs(t, "acme/sender", "PUT", "/v1/messages/inv-3", `{"type": "invoice", "route": "orders", "payload": {}}`); status < 400 {
		t.Errorf("acme's ingest after the delete: %d %s", status, body)
	}
	if status, body, _ := ts.callAs(t, "beta/admin", "GET", "/v1/endpoints/crm", ""); status != http.StatusOK {
		t.Errorf("beta's endpoint after acme's delete: %d %s", status, body)
	}
	page, err := ts.store.Audit(ctx, courier.AuditFilter{Who: "system/admin", Kind: courier.ActionDelete})
	if err != nil {
		t.Fatal(err)
	}
	var deleted []string
	for _, a := range page.Actions {
		deleted = append(deleted, string(a.Object)+" "+a.Subject)
		if a.Version != page.Actions[0].Version {
			t.Errorf("the deletes are of versions %d and %d; want one change", a.Version, page.Actions[0].Version)
		}
	}
	sort.Strings(deleted)
	want := "endpoint acme/crm,endpoint acme/pager,key acme/ci,policy acme/invoice,route acme/orders,subscription acme/crm-sub,tenant acme"
	if strings.Join(deleted, ",") != want {
		t.Errorf("the audit's deletes: %v; want %s", deleted, want)
	}
}

// While the configuration file holds the tenants, the API writes none.
func TestTenantsInTheFileAreNotWritten(t *testing.T) {
	ts := newTenantCatalogServer(t, true)
	for _, method := range []string{"PUT", "DELETE"} {
		status, body, _ := ts.callAs(t, "system/admin", method, "/v1/tenants/acme", `{"weight": 2}`)
		wantError(t, status, body, http.StatusConflict, courier.CodeConflict, "courier.yaml")
	}
}
