package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/topology"
)

// newCatalogServer serves the API with the topology in a store-held
// catalog, as `courier serve` does when the file has no topology.
func newCatalogServer(t *testing.T, keyed bool, mutate ...func(*api.Options)) (*testServer, *topology.Keeper) {
	t.Helper()
	store := sqlitetest.Open(t)
	var srv *api.Server
	var cat *topology.Keeper
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i)
	}
	kr, err := topology.NewKeyring(key, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err = topology.Open(context.Background(), topology.Options{Store: store, Keyring: kr, OnChange: func(tp *courier.Topology) {
		if srv == nil {
			return
		}
		srv.SetTopology(tp)
		if !keyed { // the keys are the store's, as courier serve has them without a keys section
			var keys []api.Key
			for _, k := range cat.Keys() {
				h, err := api.ParseKeyHash(k.Hash)
				if err != nil {
					t.Error(err)
				}
				keys = append(keys, api.Key{Name: k.Name, Role: k.Role, Hash: h, Routes: k.Routes})
			}
			srv.SetKeys(keys)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	o := api.Options{Store: store, Topology: cat.Topology(), Objects: cat}
	if keyed {
		o.Keys = testKeys(t)
	}
	for _, f := range mutate {
		f(&o)
	}
	srv = api.NewServer(o)
	ts := &testServer{store: store, Server: httptest.NewServer(validated(t, srv))}
	t.Cleanup(ts.Close)
	return ts, cat
}

func TestTopologyThroughTheAPI(t *testing.T) {
	ts, _ := newCatalogServer(t, false)

	// Nothing exists: a message is refused.
	status, body, _ := ts.call(t, "PUT", "/v1/messages/m-1", `{"type":"invoice","route":"acme","payload":{}}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "acme")

	status, body, hdr := ts.call(t, "PUT", "/v1/endpoints/acme-primary", `{"transport":"http","url":"http://127.0.0.1:9/in","secret":"whsec_c2VjcmV0LXNpZ25pbmcta2V5"}`)
	if status != 201 || hdr.Get("ETag") != `"1"` || hdr.Get("Location") != "/v1/endpoints/acme-primary" {
		t.Fatalf("create an endpoint: %d %s, ETag %q, Location %q", status, body, hdr.Get("ETag"), hdr.Get("Location"))
	}
	if strings.Contains(string(body), "c2VjcmV0") || !strings.Contains(string(body), `"secret":"set"`) {
		t.Fatalf("the answer shows the secret, or not as set: %s", body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/routes/acme", `{"endpoints":["acme-primary"]}`)
	if status != 201 {
		t.Fatalf("create a route: %d %s", status, body)
	}
	// Sent at once to the route just made.
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/m-1", `{"type":"invoice","route":"acme","payload":{}}`); status != 201 {
		t.Fatalf("a message to the new route: %d %s", status, body)
	}

	// Reading back.
	status, body, hdr = ts.call(t, "GET", "/v1/routes/acme", "")
	if status != 200 || hdr.Get("ETag") != `"2"` {
		t.Fatalf("GET the route: %d %s ETag %q", status, body, hdr.Get("ETag"))
	}
	o := decode[api.TopologyObject](t, body)
	if o.Kind != courier.KindRoute || o.Version != 2 || string(o.Spec) != `{"endpoints":["acme-primary"]}` || o.UpdatedBy != "local" {
		t.Fatalf("the route: %+v (spec %s)", o, o.Spec)
	}
	status, body, _ = ts.call(t, "GET", "/v1/endpoints/acme-primary", "")
	if e := decode[api.Endpoint](t, body); status != 200 || e.Version != 1 || !strings.Contains(string(e.Spec), `"url":"http://127.0.0.1:9/in"`) || e.State != courier.HealthActive {
		t.Fatalf("GET the endpoint: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/topology", "")
	top := decode[api.Topology](t, body)
	if status != 200 || top.Version != 2 || len(top.Endpoints) != 1 || len(top.Routes) != 1 || top.File != "" {
		t.Fatalf("GET /v1/topology: %d %s", status, body)
	}

	// Mistakes, named by field; conditional changes; what is in use.
	status, body, _ = ts.call(t, "PUT", "/v1/endpoints/bad", `{"transport":"http","url":"http://127.0.0.1:9/in","timeout":"soon"}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "endpoints.bad.timeout")
	status, body, _ = ts.call(t, "PUT", "/v1/endpoints/bad", `not json`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "endpoints.bad")
	status, body, _ = ts.call(t, "PUT", "/v1/subscriptions/s", `{"types":["invoice"],"route":"acmee"}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, `did you mean "acme"`)
	status, body, _ = ts.call(t, "DELETE", "/v1/endpoints/acme-primary", "")
	wantError(t, status, body, 409, courier.CodeConflict, `endpoint "acme-primary" is in use; change or delete what uses it first:`+
		"\n"+`route "acme" uses endpoint "acme-primary" (routes.acme.endpoints[0])`)
	if strings.Contains(string(body), "not defined") {
		t.Errorf("deleting an endpoint in use says it is not defined: %s", body)
	}

	req := func(method, path, body string, hdr map[string]string) (int, []byte) {
		r, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		status, b, _ := ts.send(t, r)
		return status, b
	}
	status, body = req("PUT", "/v1/routes/acme", `{"endpoints":["acme-primary"],"strategy":"single"}`, map[string]string{"If-Match": `"1"`})
	wantError(t, status, body, 412, courier.CodeFailedPrecondition, "version 2")
	status, body = req("PUT", "/v1/routes/acme", `{"endpoints":["acme-primary"],"strategy":"single"}`, map[string]string{"If-None-Match": "*"})
	wantError(t, status, body, 412, courier.CodeFailedPrecondition, "exists")
	if status, body = req("PUT", "/v1/routes/acme", `{"endpoints":["acme-primary"],"strategy":"single"}`, map[string]string{"If-Match": `"2"`}); status != 200 {
		t.Fatalf("a put at the route's version: %d %s", status, body)
	}

	// Apply: dry run, the change, then nothing left to change; prune.
	file := `{"endpoints":{"acme-primary":{"transport":"http","url":"http://127.0.0.1:9/in","secret":"set"},"b":{"transport":"file","dir":"/tmp/b"}},
		"routes":{"acme":{"endpoints":["acme-primary"],"strategy":"single"},"b":{"endpoints":["b"]}}}`
	status, body, _ = ts.call(t, "PUT", "/v1/topology?dry_run=true", file)
	if res := decode[api.ApplyResult](t, body); status != 200 || !res.DryRun || len(res.Changes) != 2 || res.Version != 3 {
		t.Fatalf("dry run: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/topology", file)
	if res := decode[api.ApplyResult](t, body); status != 200 || len(res.Changes) != 2 || res.Version != 4 {
		t.Fatalf("apply: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/topology", file)
	if res := decode[api.ApplyResult](t, body); status != 200 || len(res.Changes) != 0 || res.Version != 4 {
		t.Fatalf("apply again: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/topology?prune=true", `{"endpoints":{"b":{"transport":"file","dir":"/tmp/b"}},"routes":{"b":{"endpoints":["b"]}}}`)
	if res := decode[api.ApplyResult](t, body); status != 200 || len(res.Changes) != 2 {
		t.Fatalf("prune: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/topology", `{"routes":{"c":{"endpoints":["nope"]}},"colour":1}`)
	wantError(t, status, body, 400, courier.CodeInvalidArgument, "colour")

	// The audit log, with filters and paging.
	status, body, _ = ts.call(t, "GET", "/v1/audit?object=route&limit=2", "")
	page := decode[api.AuditPage](t, body)
	if status != 200 || len(page.Entries) != 2 || page.Next == "" || page.Entries[0].Action != courier.ActionDelete || page.Entries[0].Subject != "acme" {
		t.Fatalf("audit page 1: %d %s", status, body)
	}
	var all []string
	for cursor := ""; ; {
		status, body, _ = ts.call(t, "GET", "/v1/audit?object=route&limit=2&cursor="+cursor, "")
		page := decode[api.AuditPage](t, body)
		for _, e := range page.Entries {
			all = append(all, fmt.Sprintf("%s %s", e.Action, e.Subject))
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	if got, want := strings.Join(all, ","), "delete acme,create b,replace acme,create acme"; got != want {
		t.Fatalf("every route change: %s, want %s", got, want)
	}
	status, body, _ = ts.call(t, "GET", "/v1/audit?object=queue", "")
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "queue")
}

func TestTopologyWritesNeedAdmin(t *testing.T) {
	ts, _ := newCatalogServer(t, true)
	spec := `{"transport":"file","dir":"/tmp/x"}`
	for _, key := range []string{"erp", "limited", "ops"} {
		status, body, _ := ts.callAs(t, key, "PUT", "/v1/endpoints/x", spec)
		wantError(t, status, body, 403, courier.CodePermissionDenied, "")
		status, body, _ = ts.callAs(t, key, "PUT", "/v1/topology", `{}`)
		wantError(t, status, body, 403, courier.CodePermissionDenied, "")
	}
	if status, body, _ := ts.callAs(t, "root", "PUT", "/v1/endpoints/x", spec); status != 201 {
		t.Fatalf("admin: %d %s", status, body)
	}
	if status, body, _ := ts.callAs(t, "ops", "GET", "/v1/topology", ""); status != 200 {
		t.Fatalf("an operator reads the topology: %d %s", status, body)
	}
	status, body, _ := ts.callAs(t, "root", "GET", "/v1/audit?who=root", "")
	if page := decode[api.AuditPage](t, body); status != 200 || len(page.Entries) != 1 || page.Entries[0].Who != "root" {
		t.Fatalf("audit by who: %d %s", status, body)
	}
}

func TestTopologyInTheFileRefusesWrites(t *testing.T) {
	cfg, err := config.Parse("courier.yaml", []byte("endpoints:\n  e: {transport: file, dir: /tmp/e}\nroutes:\n  r: {endpoints: [e]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	cat := topology.FromFile(cfg.File, cfg.Specs, cfg.Topology)
	ts := newTestServer(t, func(o *api.Options) { o.Objects = cat; o.Topology = cfg.Topology })
	status, body, _ := ts.call(t, "PUT", "/v1/endpoints/x", `{"transport":"file","dir":"/tmp/x"}`)
	wantError(t, status, body, 409, courier.CodeConflict, "courier.yaml")
	status, body, _ = ts.call(t, "GET", "/v1/topology", "")
	if top := decode[api.Topology](t, body); status != 200 || top.File != "courier.yaml" || len(top.Routes) != 1 {
		t.Fatalf("GET /v1/topology in file mode: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/routes/r", "")
	if o := decode[api.TopologyObject](t, body); status != 200 || string(o.Spec) != `{"endpoints":["e"]}` {
		t.Fatalf("GET a route of the file: %d %s", status, body)
	}
}

// API keys kept in the store: made by an admin (here, at first, the
// loopback caller of a server without keys), in force at once.
func TestKeysThroughTheAPI(t *testing.T) {
	ts, _ := newCatalogServer(t, false)
	for _, obj := range []struct{ path, spec string }{
		{"/v1/endpoints/e", `{"transport":"file","dir":"` + t.TempDir() + `"}`},
		{"/v1/routes/acme", `{"endpoints":["e"]}`},
		{"/v1/routes/globex", `{"endpoints":["e"]}`},
	} {
		if status, body, _ := ts.call(t, "PUT", obj.path, obj.spec); status != 201 {
			t.Fatalf("PUT %s: %d %s", obj.path, status, body)
		}
	}
	keySpec := func(name, role string, routes ...string) string {
		spec := map[string]any{"role": role, "hash": api.HashSecret(testSecrets[name])}
		if len(routes) > 0 {
			spec["routes"] = routes
		}
		b, _ := json.Marshal(spec)
		return string(b)
	}
	status, body, _ := ts.call(t, "PUT", "/v1/keys/limited", keySpec("limited", "sender", "globex"))
	wantError(t, status, body, 409, courier.CodeConflict, "admin key")
	if status, body, _ := ts.call(t, "PUT", "/v1/keys/root", keySpec("root", "admin")); status != 201 {
		t.Fatalf("the first admin key: %d %s", status, body)
	}
	// From now on every call needs a key.
	status, body, _ = ts.call(t, "GET", "/v1/topology", "")
	wantError(t, status, body, 401, courier.CodeUnauthenticated, "")
	if status, body, _ := ts.callAs(t, "root", "PUT", "/v1/keys/limited", keySpec("limited", "sender", "globex")); status != 201 {
		t.Fatalf("a sender key: %d %s", status, body)
	}
	if status, body, _ := ts.callAs(t, "root", "PUT", "/v1/keys/ops", keySpec("ops", "operator")); status != 201 {
		t.Fatalf("an operator key: %d %s", status, body)
	}
	// A sender limited to a route can send there, and only send.
	if status, body, _ := ts.callAs(t, "limited", "PUT", "/v1/messages/m-1", `{"type":"invoice","route":"globex","payload":{}}`); status != 201 {
		t.Fatalf("the sender to its route: %d %s", status, body)
	}
	status, body, _ = ts.callAs(t, "limited", "PUT", "/v1/messages/m-2", `{"type":"invoice","route":"acme","payload":{}}`)
	wantError(t, status, body, 403, courier.CodePermissionDenied, "acme")
	status, body, _ = ts.callAs(t, "limited", "PUT", "/v1/routes/x", `{"endpoints":["e"]}`)
	wantError(t, status, body, 403, courier.CodePermissionDenied, "")
	status, body, _ = ts.callAs(t, "ops", "PUT", "/v1/keys/x", keySpec("erp", "admin"))
	wantError(t, status, body, 403, courier.CodePermissionDenied, "")
	status, body, _ = ts.callAs(t, "ops", "GET", "/v1/keys", "")
	wantError(t, status, body, 403, courier.CodePermissionDenied, "")
	status, body, _ = ts.callAs(t, "root", "GET", "/v1/keys", "")
	if l := decode[api.ObjectList](t, body); status != 200 || len(l.Objects) != 3 {
		t.Fatalf("GET /v1/keys: %d %s", status, body)
	}
	// The last admin key stays; a deleted key stops working at once.
	status, body, _ = ts.callAs(t, "root", "DELETE", "/v1/keys/root", "")
	wantError(t, status, body, 409, courier.CodeConflict, "admin key")
	if status, body, _ := ts.callAs(t, "root", "DELETE", "/v1/keys/limited", ""); status != 200 {
		t.Fatalf("delete a key: %d %s", status, body)
	}
	status, body, _ = ts.callAs(t, "limited", "PUT", "/v1/messages/m-3", `{"type":"invoice","route":"globex","payload":{}}`)
	wantError(t, status, body, 401, courier.CodeUnauthenticated, "")
	status, body, _ = ts.callAs(t, "root", "GET", "/v1/audit?object=key", "")
	if page := decode[api.AuditPage](t, body); status != 200 || len(page.Entries) != 4 || page.Entries[0].Who != "root" || page.Entries[3].Who != "local" {
		t.Fatalf("the audit of keys: %d %s", status, body)
	}
}

// Every kind of object through its own paths: policies and subscriptions
// listed, read, written and deleted; a route deleted; a key read; the
// secrets sealed again.
func TestObjectsOfEveryKind(t *testing.T) {
	ts, _ := newCatalogServer(t, false)
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"PUT", "/v1/endpoints/e", `{"transport":"http","url":"http://127.0.0.1:9/in","secret":"whsec_c2VjcmV0LXNpZ25pbmcta2V5"}`, 201},
		{"PUT", "/v1/routes/r", `{"endpoints":["e"]}`, 201},
		{"PUT", "/v1/policies/invoice", `{"max_attempts":3}`, 201},
		{"PUT", "/v1/subscriptions/s", `{"types":["invoice"],"route":"r"}`, 201},
		{"GET", "/v1/policies", "", 200},
		{"GET", "/v1/policies/invoice", "", 200},
		{"GET", "/v1/subscriptions", "", 200},
		{"GET", "/v1/subscriptions/s", "", 200},
		{"GET", "/v1/subscriptions/nope", "", 404},
		{"POST", "/v1/topology/rotate-secrets", "", 200},
		{"DELETE", "/v1/routes/r", "", 409}, // the subscription uses it
		{"DELETE", "/v1/subscriptions/s", "", 200},
		{"DELETE", "/v1/policies/invoice", "", 200},
		{"DELETE", "/v1/routes/r", "", 200},
		{"DELETE", "/v1/policies/invoice", "", 404},
	} {
		if status, body, _ := ts.call(t, c.method, c.path, c.body); status != c.want {
			t.Fatalf("%s %s: %d %s; want %d", c.method, c.path, status, body, c.want)
		}
	}
	status, body, _ := ts.call(t, "GET", "/v1/policies", "")
	if l := decode[api.ObjectList](t, body); status != 200 || len(l.Objects) != 0 {
		t.Fatalf("policies after the delete: %d %s", status, body)
	}
	if status, body, _ := ts.call(t, "PUT", "/v1/keys/root", `{"role":"admin","hash":"`+api.HashSecret(testSecrets["root"])+`"}`); status != 201 {
		t.Fatalf("a key: %d %s", status, body)
	}
	status, body, _ = ts.callAs(t, "root", "GET", "/v1/keys/root", "")
	if o := decode[api.TopologyObject](t, body); status != 200 || o.Kind != courier.KindKey || !strings.Contains(string(o.Spec), `"role":"admin"`) {
		t.Fatalf("GET the key: %d %s", status, body)
	}
}
