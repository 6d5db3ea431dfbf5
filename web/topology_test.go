package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	httptransport "github.com/courier-gw/courier/transport/http"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/sqlite"
	"github.com/courier-gw/courier/topology"
	"github.com/courier-gw/courier/web"
)

// acmeSecret is the signing secret of the endpoint acme in the topology
// tests; no page may show it.
const acmeSecret = "whsec_c2VjcmV0LXNpZ25pbmcta2V5"

// newTopologyDashboard is the API and the dashboard on a real loopback
// server over a store that holds the topology (docs/design.md §15), with keys, and
// an endpoint acme (with a signing secret) used by a route acme.
func newTopologyDashboard(t *testing.T) (*dashboard, *topology.Keeper) {
	t.Helper()
	d, cat := keeperDashboard(t, sqlitetest.Open(t), topology.Options{Keyring: testKeyring(t)}, api.Options{Keys: keys(t)})
	mustPut(t, cat, courier.KindEndpoint, "acme", `{"transport":"http","url":"https://acme.example/in","secret":"`+acmeSecret+`"}`)
	mustPut(t, cat, courier.KindRoute, "acme", `{"endpoints":["acme"]}`)
	return d, cat
}

// testKeyring is the keyring of the topology tests' secrets.
func testKeyring(t *testing.T) *topology.Keyring {
	t.Helper()
	kr, err := topology.NewKeyring(bytes.Repeat([]byte{7}, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// keeperDashboard opens a topology keeper with the options to over store,
// and mounts the API, with the options o and the keeper's objects, and its
// dashboard, as courier serve does: the API follows every change the
// keeper makes.
func keeperDashboard(t *testing.T, store *sqlite.Store, to topology.Options, o api.Options) (*dashboard, *topology.Keeper) {
	t.Helper()
	var srv atomic.Pointer[api.Server]
	to.Store = store
	to.OnChange = func(tp *courier.Topology) {
		if s := srv.Load(); s != nil {
			s.SetTopology(tp)
		}
	}
	cat, err := topology.Open(context.Background(), to)
	if err != nil {
		t.Fatal(err)
	}
	o.Store, o.Topology, o.Objects = store, cat.Topology(), cat
	a := api.NewServer(o)
	srv.Store(a)
	d := mount(t, a)
	d.store = store
	return d, cat
}

// mount serves the API and its dashboard as courier serve does.
func mount(t *testing.T, a *api.Server) *dashboard {
	t.Helper()
	ui := web.New(web.Options{API: a, Auth: a})
	mux := http.NewServeMux()
	mux.Handle("/ui/", ui)
	mux.Handle("GET /{$}", ui)
	mux.Handle("/", a)
	d := &dashboard{Server: httptest.NewServer(mux)}
	t.Cleanup(d.Close)
	return d
}

func mustPut(t *testing.T, cat *topology.Keeper, kind courier.TopologyKind, name, spec string) courier.TopologyObject {
	t.Helper()
	o, _, err := cat.Put(context.Background(), "setup", kind, name, []byte(spec), -1)
	if err != nil {
		t.Fatalf("put %s %s: %v", kind, name, err)
	}
	return o
}

// spec returns an object's fields as the catalog shows them (secrets as
// "set"), decoded; nil when there is no such object.
func spec(t *testing.T, cat *topology.Keeper, kind courier.TopologyKind, name string) map[string]any {
	t.Helper()
	o, ok := cat.Object(kind, name)
	if !ok {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(o.Spec, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

var textareaRE = regexp.MustCompile(`(?s)<textarea name="spec"[^>]*>(.*?)</textarea>`)

// textarea returns the text of a page's form, unescaped.
func textarea(t *testing.T, a answer) string {
	t.Helper()
	m := textareaRE.FindStringSubmatch(a.body)
	if m == nil {
		t.Fatalf("no fields form on the page (%d):\n%s", a.status, a.body)
	}
	return html.UnescapeString(m[1])
}

func TestTopologyEdit(t *testing.T) {
	d, cat := newTopologyDashboard(t)
	b := d.browser(t)
	b.login("root")

	// The endpoints page offers to make one and to edit each.
	want(t, "endpoints page", b.get("/ui/endpoints"), 200, `id="new-endpoint"`, `href="/ui/topology/endpoints/acme">Edit<`)
	a := b.get("/ui/topology")
	want(t, "topology page", a, 200, `id="new-endpoint"`, `id="new-route"`, `id="new-policy"`, `id="new-subscription"`,
		`href="/ui/topology/routes/acme"`, "endpoints: [acme]", "https://acme.example/in")

	// The object's form: its fields as YAML, keys sorted, the secret as
	// "set", and the version it was read at.
	a = b.get("/ui/topology/endpoints/acme")
	want(t, "endpoint form", a, 200, `name="version" value="1"`, `id="secrets-hint"`, "leave <code>set</code>", `id="delete"`)
	if got, wantText := textarea(t, a), "secret: set\ntransport: http\nurl: https://acme.example/in\n"; got != wantText {
		t.Errorf("the form's fields:\n%s\nwant:\n%s", got, wantText)
	}
	if strings.Contains(a.body, acmeSecret) {
		t.Fatal("the form shows the secret")
	}
	token := b.csrf("/ui/topology/endpoints/acme")

	// Saved with a new URL and the secret as "set": the URL changes and
	// the stored secret stays.
	a = b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"1"},
		"spec": {"secret: set\ntransport: http\nurl: https://acme.example/v2/in\n"}})
	if a.status != http.StatusSeeOther || a.location != "/ui/topology/endpoints/acme?note=object_saved" {
		t.Fatalf("save: %d %q\n%s", a.status, a.location, a.body)
	}
	if u := spec(t, cat, courier.KindEndpoint, "acme")["url"]; u != "https://acme.example/v2/in" {
		t.Errorf("url after the save: %v", u)
	}
	if s := httptransport.Of(cat.Topology().Endpoints["acme"]).Secrets; len(s) != 1 || s[0] != acmeSecret {
		t.Errorf("the stored secret after saving it as set: %q", s)
	}
	want(t, "after the save", b.get(a.location), 200, "Saved.", `name="version" value="3"`, "https://acme.example/v2/in", "Changed by</dt><dd>root")

	// A value the API refuses: its message names the field, on the form,
	// with what was typed kept.
	bad := "secret: set\ntransport: http\nurl: ftp://acme.example/in\n"
	a = b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"3"}, "spec": {bad}})
	// The line is the YAML's, not the JSON's the API read.
	want(t, "a bad url", a, http.StatusUnprocessableEntity, "line 3: endpoints.acme.url: must be an absolute http or https URL")
	if got := textarea(t, a); got != bad {
		t.Errorf("the form after a refusal holds %q, want what was typed", got)
	}
	if u := spec(t, cat, courier.KindEndpoint, "acme")["url"]; u != "https://acme.example/v2/in" {
		t.Errorf("url after a refused save: %v", u)
	}

	// Text that is not YAML is refused before the API, kept too.
	a = b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"3"}, "spec": {"url: [oops\n"}})
	want(t, "not YAML", a, http.StatusUnprocessableEntity, "not valid YAML", "url: [oops")

	// Someone changed it meanwhile: a save from the page read before is
	// refused, says so, and overwrites nothing.
	mustPut(t, cat, courier.KindEndpoint, "acme", `{"transport":"http","url":"https://acme.example/v3/in","secret":"set"}`)
	mine := "secret: set\ntransport: http\nurl: https://acme.example/mine\n"
	a = b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"3"}, "spec": {mine}})
	want(t, "a stale save", a, http.StatusPreconditionFailed, "was changed meanwhile (now version 4 by setup", "reload the page")
	if got := textarea(t, a); got != mine {
		t.Errorf("the form after a stale save holds %q", got)
	}
	if u := spec(t, cat, courier.KindEndpoint, "acme")["url"]; u != "https://acme.example/v3/in" {
		t.Errorf("url after a stale save: %v, want the other change kept", u)
	}

	// Saving what is there already changes nothing.
	a = b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"4"},
		"spec": {"secret: set\ntransport: http\nurl: https://acme.example/v3/in\n"}})
	if a.status != http.StatusSeeOther || !strings.HasSuffix(a.location, "note=object_unchanged") {
		t.Errorf("an unchanged save: %d %q", a.status, a.location)
	}

	// A new route: the form, a refusal naming the field, then made.
	a = b.get("/ui/topology/new/routes")
	want(t, "new route form", a, 200, `id="object-name"`, "Create route")
	if got := textarea(t, a); got != "endpoints: []\n" {
		t.Errorf("new route's starting text %q", got)
	}
	a = b.post("/ui/topology/new/routes", url.Values{"csrf": {token}, "name": {"globex"}, "spec": {"endpoints: [nowhere]\n"}})
	want(t, "a route to nowhere", a, http.StatusUnprocessableEntity, "routes.globex.endpoints", `value="globex"`, "endpoints: [nowhere]")
	a = b.post("/ui/topology/new/routes", url.Values{"csrf": {token}, "name": {""}, "spec": {"endpoints: [acme]\n"}})
	want(t, "a route without a name", a, http.StatusUnprocessableEntity, "give the route a name")
	a = b.post("/ui/topology/new/routes", url.Values{"csrf": {token}, "name": {"globex"}, "spec": {"endpoints: [acme]\nstrategy: single\n"}})
	if a.status != http.StatusSeeOther || a.location != "/ui/topology/routes/globex?note=object_created" {
		t.Fatalf("create a route: %d %q\n%s", a.status, a.location, a.body)
	}
	if s := spec(t, cat, courier.KindRoute, "globex"); s == nil || s["strategy"] != "single" {
		t.Errorf("the new route: %v", s)
	}
	// Made again, it is refused rather than replaced.
	a = b.post("/ui/topology/new/routes", url.Values{"csrf": {token}, "name": {"globex"}, "spec": {"endpoints: [acme]\nstrategy: failover\n"}})
	want(t, "a route made twice", a, http.StatusPreconditionFailed, "exists already")
	if s := spec(t, cat, courier.KindRoute, "globex"); s["strategy"] != "single" {
		t.Errorf("the route after making it twice: %v", s)
	}

	// A policy and a subscription are made the same way.
	for _, c := range []struct{ section, name, spec string }{
		{"policies", "invoice", "max_age: 24h\nmax_attempts: 5\n"},
		{"subscriptions", "erp-orders", "route: acme\ntypes: [order.*]\n"},
	} {
		a = b.post("/ui/topology/new/"+c.section, url.Values{"csrf": {token}, "name": {c.name}, "spec": {c.spec}})
		if a.status != http.StatusSeeOther {
			t.Fatalf("create %s %s: %d\n%s", c.section, c.name, a.status, a.body)
		}
		if got := textarea(t, b.get("/ui/topology/"+c.section+"/"+c.name)); got != c.spec {
			t.Errorf("%s %s reads back as %q, want %q", c.section, c.name, got, c.spec)
		}
	}
	if s := spec(t, cat, courier.KindPolicy, "invoice"); s["max_attempts"] != float64(5) {
		t.Errorf("the policy's max_attempts is %v (%T), want the number 5", s["max_attempts"], s["max_attempts"])
	}

	// Deleting what a route uses is refused, naming the route.
	a = b.post("/ui/topology/endpoints/acme/delete", url.Values{"csrf": {token}, "version": {"4"}})
	want(t, "delete an endpoint in use", a, http.StatusConflict, "in use", "routes.acme", `name="version" value="4"`)
	if spec(t, cat, courier.KindEndpoint, "acme") == nil {
		t.Fatal("the endpoint in use was deleted")
	}
	// From a stale page, nothing is deleted.
	globex, _ := cat.Object(courier.KindRoute, "globex")
	a = b.post("/ui/topology/routes/globex/delete", url.Values{"csrf": {token}, "version": {"1"}})
	want(t, "a stale delete", a, http.StatusPreconditionFailed, "was changed meanwhile", "so it was not deleted")
	a = b.post("/ui/topology/routes/globex/delete", url.Values{"csrf": {token}, "version": {strconv.FormatInt(globex.Version, 10)}})
	if a.status != http.StatusSeeOther || a.location != "/ui/topology?note=object_deleted#routes" {
		t.Fatalf("delete a route: %d %q\n%s", a.status, a.location, a.body)
	}
	if spec(t, cat, courier.KindRoute, "globex") != nil {
		t.Error("the route is still there")
	}
	want(t, "a deleted route's page", b.get("/ui/topology/routes/globex"), http.StatusNotFound)
	want(t, "an unknown kind", b.get("/ui/topology/widgets/x"), http.StatusNotFound)

	// Switching an endpoint off and on stays as it was.
	if a := b.post("/ui/endpoints/acme/off", url.Values{"csrf": {token}}); a.status != http.StatusSeeOther {
		t.Errorf("switch off: %d %s", a.status, a.body)
	}
	want(t, "endpoints after switching off", b.get("/ui/endpoints"), 200, `class="state off"`, `href="/ui/topology/endpoints/acme">Edit<`)

	for _, page := range []string{"/ui/topology", "/ui/topology/endpoints/acme", "/ui/endpoints", "/ui/audit"} {
		if strings.Contains(b.get(page).body, acmeSecret) {
			t.Errorf("%s shows the endpoint's secret", page)
		}
	}
}

// The new forms' POSTs need the session's token and a page of the
// dashboard's origin, as every other form does.
func TestTopologyFormsNeedCSRF(t *testing.T) {
	d, cat := newTopologyDashboard(t)
	b := d.browser(t)
	b.login("root")
	token := b.csrf("/ui/topology/endpoints/acme")
	edit := "transport: http\nurl: https://evil.example/in\n"
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{"/ui/topology/endpoints/acme", url.Values{"version": {"1"}, "spec": {edit}}},
		{"/ui/topology/new/endpoints", url.Values{"name": {"evil"}, "spec": {edit}}},
		{"/ui/topology/routes/acme/delete", url.Values{"version": {"2"}}},
	} {
		for _, wrong := range []struct {
			what, token, origin string
		}{{"without the token", "", d.URL}, {"with another token", "x" + token, d.URL}, {"from another origin", token, "https://evil.example"}} {
			form := url.Values{}
			for k, v := range c.form {
				form[k] = v
			}
			if wrong.token != "" {
				form.Set("csrf", wrong.token)
			}
			b.origin = wrong.origin
			if a := b.post(c.path, form); a.status != http.StatusForbidden {
				t.Errorf("POST %s %s: %d, want 403", c.path, wrong.what, a.status)
			}
		}
	}
	b.origin = d.URL
	if u := spec(t, cat, courier.KindEndpoint, "acme")["url"]; u != "https://acme.example/in" {
		t.Errorf("the endpoint was changed by a forged form: %v", u)
	}
	if spec(t, cat, courier.KindEndpoint, "evil") != nil || spec(t, cat, courier.KindRoute, "acme") == nil {
		t.Error("a forged form created or deleted an object")
	}
	// With the token, the same form works.
	if a := b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"1"}, "spec": {"secret: set\n" + edit}}); a.status != http.StatusSeeOther {
		t.Errorf("the real form: %d %s", a.status, a.body)
	}
}

// An operator key reads the topology and changes nothing: the pages offer
// no controls, and a form posted anyway shows the API's refusal.
func TestTopologyReadOnlyForOperators(t *testing.T) {
	d, cat := newTopologyDashboard(t)
	b := d.browser(t)
	b.login("ops")
	a := b.get("/ui/endpoints")
	want(t, "endpoints page", a, 200, `href="/ui/topology/endpoints/acme">Settings<`, `id="read-only"`)
	wantNot(t, "an operator's endpoints page", a, `id="new-endpoint"`)
	a = b.get("/ui/topology")
	want(t, "topology page", a, 200, "changes take an admin key", `href="/ui/topology/routes/acme">View<`)
	wantNot(t, "an operator's topology page", a, "/ui/topology/new/")
	a = b.get("/ui/topology/endpoints/acme")
	want(t, "endpoint page", a, 200, `<pre class="spec" id="spec">`, "url: https://acme.example/in", "secret: set")
	wantNot(t, "an operator's endpoint page", a, "<textarea", `id="save"`, `id="delete"`)
	want(t, "new endpoint form", b.get("/ui/topology/new/endpoints"), http.StatusForbidden, "takes an admin key")

	token := b.csrf("/ui/endpoints")
	typed := "transport: http\nurl: https://ops.example/in\n"
	a = b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"1"}, "spec": {typed}})
	want(t, "an operator's save", a, http.StatusForbidden, "key &#34;ops&#34; (role operator) may not", "https://ops.example/in")
	a = b.post("/ui/topology/routes/acme/delete", url.Values{"csrf": {token}, "version": {"2"}})
	want(t, "an operator's delete", a, http.StatusForbidden, "may not")
	if u := spec(t, cat, courier.KindEndpoint, "acme")["url"]; u != "https://acme.example/in" || spec(t, cat, courier.KindRoute, "acme") == nil {
		t.Error("an operator changed the topology")
	}
}

// When the configuration file holds the topology, the pages show it read
// only, name the file and say how to change it.
func TestTopologyFileMode(t *testing.T) {
	tp := testTopology()
	specs := config.Specs{
		courier.KindEndpoint: {"acme": []byte(`{"transport":"http","url":"https://acme.example/in"}`),
			"globex": []byte(`{"transport":"http","url":"https://globex.example/in"}`)},
		courier.KindRoute:        {"acme": []byte(`{"endpoints":["acme"]}`), "globex": []byte(`{"endpoints":["globex"]}`)},
		courier.KindPolicy:       {},
		courier.KindSubscription: {},
	}
	cat := topology.FromFile("courier.yaml", specs, tp)
	a := api.NewServer(api.Options{Store: sqlitetest.Open(t), Topology: tp, Objects: cat, Keys: keys(t)})
	d := mount(t, a)
	b := d.browser(t)
	b.login("root")

	a2 := b.get("/ui/topology")
	want(t, "topology page", a2, 200, `id="read-only"`, "configuration file <code>courier.yaml</code>", "edit the file and reload",
		`href="/ui/topology/routes/globex">View<`, "https://globex.example/in")
	wantNot(t, "the topology page of a file", a2, "/ui/topology/new/", "topology-version")
	a2 = b.get("/ui/endpoints")
	want(t, "endpoints page", a2, 200, "courier.yaml", `href="/ui/topology/endpoints/acme">Settings<`)
	wantNot(t, "the endpoints page of a file", a2, `id="new-endpoint"`)
	a2 = b.get("/ui/topology/endpoints/acme")
	want(t, "endpoint page", a2, 200, "courier.yaml", `<pre class="spec" id="spec">`, "url: https://acme.example/in")
	wantNot(t, "the endpoint page of a file", a2, "<textarea", `id="delete"`)
	want(t, "new endpoint form", b.get("/ui/topology/new/endpoints"), http.StatusConflict, "courier.yaml")

	// A form posted anyway shows the API's refusal, naming the file.
	token := b.csrf("/ui/topology")
	a2 = b.post("/ui/topology/endpoints/acme", url.Values{"csrf": {token}, "version": {"1"}, "spec": {"transport: http\nurl: https://x.example\n"}})
	want(t, "a save in file mode", a2, http.StatusConflict, "the topology is in the configuration file courier.yaml")
}

// Without topology objects (an API server made without them), the
// endpoints page works as before and offers nothing to edit.
func TestTopologyWithoutCatalog(t *testing.T) {
	d := newDashboard(t, true)
	b := d.browser(t)
	b.login("root")
	a := b.get("/ui/endpoints")
	want(t, "endpoints page", a, 200, "acme", "Switch off")
	wantNot(t, "the endpoints page without settings", a, "/ui/topology/")
	want(t, "topology page", b.get("/ui/topology"), 200, "keeps no topology objects")
}
