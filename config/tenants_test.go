package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/courier-gw/courier"
)

// TestTenants checks that each tenant's objects are stored under their
// qualified names, whether the file names the tenant by tenant: or by the
// key, and that the names they use are their own tenant's, or a shared
// endpoint of the tenant system.
func TestTenants(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
tenants:
  acme: {weight: 2, quotas: {ingest_rate: 100/s, burst: 200, max_queued: 10000, max_bytes: 1GiB, max_endpoints: 50}, retention: 720h}
  beta: {}
  system: {weight: 3}
endpoints:
  system/peppol-ap: {transport: file, dir: ap}
  acme/crm: {transport: file, dir: acme}
  crm: {tenant: beta, transport: file, dir: beta}
  mail: {tenant: acme, transport: smtp, addr: "mail:25", from: a@acme.example, to: [ops@acme.example]}
  local: {transport: file, dir: local}
routes:
  acme/orders: {endpoints: [crm, system/peppol-ap], strategy: weighted, weights: {crm: 3, system/peppol-ap: 1}}
  orders: {tenant: beta, endpoints: [crm]}
  pay: {tenant: acme, workflow: [{endpoint: crm, compensate: crm}], compensation_policy: undo}
  local: {endpoints: [local]}
policies:
  acme/default: {max_attempts: 3}
  acme/undo: {}
  order.created: {tenant: acme, escalate: [{after: 1h, notify: mail}], fallback: {route: orders}}
  beta/order.created: {}
subscriptions:
  acme/audit: {types: [order.*, invoice], route: orders}
  audit: {tenant: beta, types: [order.*], route: orders}
keys:
  acme/app: {role: sender, hash: `+hashA+`, routes: [orders]}
  ops: {tenant: system, role: admin, hash: `+hashB+`}
  local: {role: admin, hash: sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855}
`, nil)
	top := c.Topology
	if got, want := top.Tenants, map[string]*courier.Tenant{
		"acme": {Name: "acme", Weight: 2, Retention: 720 * time.Hour, Quotas: courier.Quotas{
			IngestRate: courier.Rate{N: 100, Per: time.Second}, Burst: 200, MaxQueued: 10000, MaxBytes: 1 << 30, MaxEndpoints: 50}},
		"beta":   {Name: "beta", Weight: 1},
		"system": {Name: "system", Weight: 3},
	}; !reflect.DeepEqual(got, want) {
		t.Errorf("Tenants:\n got %+v\nwant %+v", got, want)
	}
	for _, name := range []string{"system/peppol-ap", "acme/crm", "beta/crm", "acme/mail", "local"} {
		if e := top.Endpoints[name]; e == nil || e.Name != name {
			t.Errorf("endpoint %q = %+v", name, e)
		}
	}
	if got, want := len(top.Endpoints), 5; got != want {
		t.Errorf("%d endpoints, want %d", got, want)
	}
	if r := top.Routes["acme/orders"]; r == nil || !reflect.DeepEqual(r.Endpoints, []string{"acme/crm", "system/peppol-ap"}) ||
		!reflect.DeepEqual(r.Weights, map[string]int{"acme/crm": 3, "system/peppol-ap": 1}) {
		t.Errorf("route acme/orders = %+v", r)
	}
	if r := top.Routes["beta/orders"]; r == nil || r.Name != "beta/orders" || !reflect.DeepEqual(r.Endpoints, []string{"beta/crm"}) {
		t.Errorf("route beta/orders = %+v", r)
	}
	if r := top.Routes["acme/pay"]; r == nil || r.Workflow == nil ||
		!reflect.DeepEqual(r.Workflow.Steps, []courier.WorkflowStep{{Endpoint: "acme/crm", Compensate: "acme/crm"}}) || r.Workflow.CompensationPolicy != "acme/undo" {
		t.Errorf("route acme/pay = %+v", r)
	}
	if r := top.Routes["local"]; r == nil || !reflect.DeepEqual(r.Endpoints, []string{"local"}) {
		t.Errorf("route local = %+v", r)
	}
	// A tenant's policies inherit from its own default, never another's.
	if p := top.Policies["acme/order.created"]; p == nil || p.MaxAttempts != 3 || p.Fallback == nil || p.Fallback.Route != "acme/orders" ||
		len(p.Escalate) != 1 || p.Escalate[0].Notify != "acme/mail" {
		t.Errorf("policy acme/order.created = %+v", p)
	}
	if p := top.Policies["beta/order.created"]; p == nil || p.MaxAttempts != courier.DefaultPolicy().MaxAttempts {
		t.Errorf("policy beta/order.created = %+v", p)
	}
	if p := top.Policies[courier.DefaultPolicyName]; !reflect.DeepEqual(p, courier.DefaultPolicy()) {
		t.Errorf("default policy = %+v", p)
	}
	if got, want := top.Policy("acme/invoice").Name, "acme/default"; got != want {
		t.Errorf("policy of acme/invoice = %s, want %s", got, want)
	}
	if s := top.Subscriptions["acme/audit"]; s == nil || s.Route != "acme/orders" || !reflect.DeepEqual(s.Types, []string{"acme/order.*", "acme/invoice"}) {
		t.Errorf("subscription acme/audit = %+v", s)
	}
	if s := top.Subscriptions["beta/audit"]; s == nil || s.Route != "beta/orders" || !reflect.DeepEqual(s.Types, []string{"beta/order.*"}) {
		t.Errorf("subscription beta/audit = %+v", s)
	}
	wantKeys := map[string]Key{
		"acme/app":   {Name: "acme/app", Tenant: "acme", Role: RoleSender, Hash: hashA, Routes: []string{"acme/orders"}, MaxSuspended: DefaultMaxSuspended},
		"system/ops": {Name: "system/ops", Tenant: "system", Role: RoleAdmin, Hash: hashB, MaxSuspended: DefaultMaxSuspended},
		"local": {Name: "local", Role: RoleAdmin, Hash: "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
			MaxSuspended: DefaultMaxSuspended},
	}
	if !reflect.DeepEqual(c.Keys, wantKeys) {
		t.Errorf("Keys:\n got %+v\nwant %+v", c.Keys, wantKeys)
	}
	for _, name := range []string{"acme/orders", "beta/orders", "acme/pay", "local"} {
		if c.Specs[courier.KindRoute][name] == nil {
			t.Errorf("no spec of route %q", name)
		}
	}
}

// TestTenantRules checks each rule of tenants with the exact file, line
// and field it reports.
func TestTenantRules(t *testing.T) {
	t.Parallel()
	const head = "tenants: {acme: {}, beta: {}}\n" // line 1
	tests := []struct {
		name string
		src  string
		want []string
	}{
		{"more endpoints than max_endpoints", lines(
			"tenants: {acme: {quotas: {max_endpoints: 1}}, beta: {quotas: {max_endpoints: 2}}}",
			"endpoints: {acme/a: {transport: file, dir: a}, acme/b: {transport: file, dir: b}, beta/a: {transport: file, dir: a}}"),
			[]string{`c.yaml:1: tenants.acme.quotas.max_endpoints: tenant acme would have 2 endpoints, over its max_endpoints quota of 1`}},
		{"another tenant's endpoint", head + lines(
			"endpoints: {beta/crm: {transport: file, dir: a}}",
			"routes: {acme/orders: {endpoints: [beta/crm]}}"),
			[]string{`c.yaml:3: routes.acme/orders.endpoints[0]: "beta/crm" is tenant beta's endpoint: tenant acme's objects use only its own and the endpoints of tenant system`}},
		{"another tenant's endpoint by its plain name", head + lines(
			"endpoints: {beta/crm: {transport: file, dir: a}}",
			"routes: {acme/orders: {endpoints: [crm]}}"),
			[]string{`c.yaml:3: routes.acme/orders.endpoints[0]: endpoint "crm" is not defined`}},
		{"the default tenant's endpoint", head + lines(
			"endpoints: {crm: {transport: file, dir: a}}",
			"routes: {orders: {tenant: acme, endpoints: [crm]}}"),
			[]string{`c.yaml:3: routes.acme/orders.endpoints[0]: endpoint "crm" is not defined`}},
		{"a misspelt endpoint of its own", head + lines(
			"endpoints: {acme/vans: {transport: file, dir: a}, beta/van: {transport: file, dir: a}}",
			"routes: {acme/orders: {endpoints: [van]}}"),
			[]string{`c.yaml:3: routes.acme/orders.endpoints[0]: endpoint "van" is not defined (did you mean "vans"?)`}},
		{"its own endpoint written qualified", head + lines(
			"endpoints: {acme/crm: {transport: file, dir: a}}",
			"routes: {acme/orders: {endpoints: [acme/crm]}}"),
			[]string{`c.yaml:3: routes.acme/orders.endpoints[0]: names tenant acme's own endpoint by its plain name: write "crm"`}},
		{"a route of the system tenant", head + lines(
			"endpoints: {acme/crm: {transport: file, dir: a}}",
			"routes: {system/r: {endpoints: [system/crm]}}",
			"subscriptions: {acme/s: {types: [a], route: system/r}}"),
			[]string{`c.yaml:3: routes.system/r.endpoints[0]: endpoint "system/crm" is not defined`,
				`c.yaml:4: subscriptions.acme/s.route: only the endpoints of tenant system are shared; its routes are its own`}},
		{"another tenant's route, policy and notice endpoint", head + lines(
			"endpoints: {beta/mail: {transport: smtp, addr: 'm:25', from: a@b.c, to: [d@e.f]}}",
			"routes: {beta/r: {endpoints: [beta/mail]}}",
			"policies:",
			"  acme/t: {escalate: [{after: 1h, notify: beta/mail}], fallback: {route: beta/r}}",
			"keys:",
			"  k: {tenant: acme, role: sender, hash: "+hashA+", routes: [beta/r]}"),
			[]string{`c.yaml:3: routes.beta/r.endpoints[0]: names tenant beta's own endpoint by its plain name: write "mail"`,
				`c.yaml:5: policies.acme/t.escalate[0].notify: "beta/mail" is tenant beta's endpoint: tenant acme's objects use only its own and the endpoints of tenant system`,
				`c.yaml:5: policies.acme/t.fallback.route: "beta/r" is tenant beta's route: tenant acme's objects use only its own and the endpoints of tenant system`,
				`c.yaml:7: keys.acme/k.routes[0]: "beta/r" is tenant beta's route: tenant acme's objects use only its own and the endpoints of tenant system`}},
		{"alert targets of another tenant, undefined, or not taking notices", lines(
			"tenants:",
			"  acme: {alerts: {notify: [pager, beta/pager, nope, queue, system/ops, pager], max_per_hour: 0}}",
			"  beta: {}",
			"endpoints:",
			"  acme/pager: {transport: http, url: 'https://p.example/'}",
			"  beta/pager: {transport: http, url: 'https://p.example/'}",
			"  acme/queue: {transport: file, dir: q}",
			"  system/ops: {transport: http, url: 'https://ops.example/'}"),
			[]string{`c.yaml:2: tenants.acme.alerts.notify[5]: endpoint "pager" is listed twice`,
				`c.yaml:2: tenants.acme.alerts.max_per_hour: must be at least 1`,
				`c.yaml:2: tenants.acme.alerts.notify[1]: "beta/pager" is tenant beta's endpoint: tenant acme's objects use only its own and the endpoints of tenant system`,
				`c.yaml:2: tenants.acme.alerts.notify[2]: endpoint "nope" is not defined`,
				`c.yaml:2: tenants.acme.alerts.notify[3]: endpoint "queue" is a file endpoint; notices go to smtp or http endpoints`}},
		{"unknown tenant", head + lines(
			"endpoints:",
			"  crm: {tenant: acm, transport: file, dir: a}",
			"  gamma/crm: {transport: file, dir: a}"),
			[]string{`c.yaml:3: endpoints.acm/crm.tenant: tenant "acm" is not listed under tenants: (did you mean "acme"?)`,
				`c.yaml:4: endpoints.gamma/crm: tenant "gamma" is not listed under tenants:`}},
		{"a tenant without tenants:", lines("routes: {orders: {tenant: acme, endpoints: [crm]}}", "endpoints: {acme/crm: {transport: file, dir: a}}"),
			[]string{`c.yaml:1: routes.acme/orders.tenant: tenant "acme" is not listed under tenants:`,
				`c.yaml:2: endpoints.acme/crm: tenant "acme" is not listed under tenants:`}},
		{"a qualified key whose tenant disagrees", head + lines(
			"endpoints: {acme/crm: {tenant: beta, transport: file, dir: a}}"),
			[]string{`c.yaml:2: endpoints.acme/crm.tenant: is "beta", but the name "acme/crm" is tenant acme's: give the tenant once`}},
		{"one name twice", head + lines(
			"endpoints:",
			"  acme/crm: {transport: file, dir: a}",
			"  crm: {tenant: acme, transport: file, dir: a}"),
			[]string{`c.yaml:4: endpoints.crm: is endpoint "acme/crm" again: given twice`}},
		{"bad names", head + lines(
			"endpoints:",
			"  Acme Inc/crm: {transport: file, dir: a}",
			"  acme/c r m: {transport: file, dir: a}",
			"  x: {tenant: 'a b', transport: file, dir: a}"),
			[]string{`c.yaml:3: endpoints.Acme Inc/crm: "Acme Inc" is not a valid tenant name: use 1 to 128 letters, digits, '.', '_' or '-'`,
				`c.yaml:4: endpoints.acme/c r m: "c r m" is not a valid name: use 1 to 128 letters, digits, '.', '_' or '-'`,
				`c.yaml:5: endpoints.x.tenant: "a b" is not a valid tenant name: use 1 to 128 letters, digits, '.', '_' or '-'`}},
		{"a qualified type", head + lines(
			"routes: {acme/r: {endpoints: [e]}}",
			"endpoints: {acme/e: {transport: file, dir: a}}",
			"subscriptions: {acme/s: {types: [beta/order.*], route: r}}"),
			[]string{`c.yaml:4: subscriptions.acme/s.types[0]: "beta/order.*" is not a message type or a prefix of types: use a type of 1 to 128 letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)`}},
		{"bad tenant settings", lines(
			"tenants:",
			"  acme:",
			"    weight: 0",
			"    retention: 0s",
			"    quotas: {burst: 5, max_queued: 0, max_bytes: 0, max_endpoints: -1, max_quued: 1}",
			"  a b: {weight: two}",
			"  beta: {quotas: {ingest_rate: fast}}"),
			[]string{`c.yaml:3: tenants.acme.weight: must be at least 1`,
				`c.yaml:4: tenants.acme.retention: must be greater than 0`,
				`c.yaml:5: tenants.acme.quotas.max_quued: unknown field (did you mean "max_queued"?)`,
				`c.yaml:5: tenants.acme.quotas.burst: only with an ingest_rate: it is the bucket of that rate`,
				`c.yaml:5: tenants.acme.quotas.max_queued: must be at least 1`,
				`c.yaml:5: tenants.acme.quotas.max_bytes: must be at least 1`,
				`c.yaml:5: tenants.acme.quotas.max_endpoints: must be at least 1`,
				`c.yaml:6: tenants.a b: "a b" is not a valid tenant name: use 1 to 128 letters, digits, '.', '_' or '-'`,
				`c.yaml:6: tenants.a b.weight: "two" is not a whole number`,
				`c.yaml:7: tenants.beta.quotas.ingest_rate: rate "fast": want N/s, N/m, N/h or N/<duration>`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("c.yaml", []byte(tt.src), nil)
			wantErrorLines(t, err, tt.want)
		})
	}
}

// TestTenantObjects checks that objects decoded one at a time, named by
// their qualified names as the store holds them, obey the file's rules.
func TestTenantObjects(t *testing.T) {
	t.Parallel()
	top, err := Assemble(mustDecode(t, []spec{
		{courier.KindEndpoint, "system/ap", `{"transport":"file","dir":"ap"}`},
		{courier.KindEndpoint, "acme/crm", `{"transport":"file","dir":"a"}`},
		{courier.KindRoute, "acme/orders", `{"endpoints":["crm","system/ap"]}`},
		{courier.KindPolicy, "acme/default", `{"max_attempts":2}`},
		{courier.KindPolicy, "acme/invoice", `{"tenant":"acme","fallback":{"route":"orders"}}`},
		{courier.KindSubscription, "acme/s", `{"types":["order.*"],"route":"orders"}`},
		{courier.KindKey, "acme/app", `{"role":"sender","hash":"` + hashA + `","routes":["orders"]}`},
	}))
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	if r := top.Routes["acme/orders"]; r == nil || !reflect.DeepEqual(r.Endpoints, []string{"acme/crm", "system/ap"}) {
		t.Errorf("route acme/orders = %+v", r)
	}
	if p := top.Policies["acme/invoice"]; p == nil || p.MaxAttempts != 2 || p.Fallback.Route != "acme/orders" {
		t.Errorf("policy acme/invoice = %+v", p)
	}
	if s := top.Subscriptions["acme/s"]; s == nil || s.Route != "acme/orders" || !reflect.DeepEqual(s.Types, []string{"acme/order.*"}) {
		t.Errorf("subscription acme/s = %+v", s)
	}
	k, err := DecodeObject(courier.KindKey, "acme/app", []byte(`{"role":"sender","hash":"`+hashA+`","routes":["orders"]}`))
	if err != nil || k.Key.Tenant != "acme" || k.Key.Name != "acme/app" || !reflect.DeepEqual(k.Key.Routes, []string{"acme/orders"}) {
		t.Errorf("key acme/app = %+v, %v", k.Key, err)
	}

	_, err = DecodeObject(courier.KindRoute, "acme/orders", []byte(`{"tenant":"beta","endpoints":["crm"]}`))
	if got, want := errorLines(t, err), []string{`line 1: routes.acme/orders.tenant: is "beta", but the name "acme/orders" is tenant acme's: give the tenant once`}; !reflect.DeepEqual(got, want) {
		t.Errorf("disagreeing tenant:\n got %q\nwant %q", got, want)
	}
	_, err = Assemble(mustDecode(t, []spec{
		{courier.KindEndpoint, "beta/crm", `{"transport":"file","dir":"a"}`},
		{courier.KindRoute, "acme/orders", `{"endpoints":["beta/crm"]}`},
	}))
	if got, want := errorLines(t, err), []string{`routes.acme/orders.endpoints[0]: "beta/crm" is tenant beta's endpoint: tenant acme's objects use only its own and the endpoints of tenant system`}; !reflect.DeepEqual(got, want) {
		t.Errorf("another tenant's endpoint:\n got %q\nwant %q", got, want)
	}
}
