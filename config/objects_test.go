package config

import (
	"fmt"
	filetransport "github.com/courier-gw/courier/transport/file"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier"
)

// checkRoundTrip fails t unless the topology of c comes back whole from
// c.Specs, each decoded on its own as the store's objects are: what
// courier apply sends must mean what the file means.
func checkRoundTrip(t *testing.T, c *Config) {
	t.Helper()
	if c.TopologyInStore {
		if len(c.Specs) != 0 {
			t.Errorf("the topology is in the store, yet the file has specs: %q", c.Specs)
		}
		return
	}
	for _, kind := range courier.TopologyKinds {
		if c.Specs[kind] == nil {
			t.Errorf("Specs has no %s", kind.Section())
		}
	}
	var objects []*Object
	for _, kind := range courier.TopologyKinds {
		for _, name := range slices.Sorted(maps.Keys(c.Specs[kind])) {
			spec := c.Specs[kind][name]
			o, err := DecodeObject(kind, name, spec)
			if err != nil {
				t.Errorf("DecodeObject(%s, %q, %s):\n%v", kind, name, spec, err)
				continue
			}
			objects = append(objects, o)
		}
	}
	got, err := Assemble(objects)
	if err != nil {
		t.Errorf("Assemble of the specs:\n%v", err)
		return
	}
	got.Tenants = c.Topology.Tenants // the file's alone: the store holds no tenants
	if reflect.DeepEqual(got, c.Topology) {
		return
	}
	diffMaps(t, "endpoint", got.Endpoints, c.Topology.Endpoints)
	diffMaps(t, "route", got.Routes, c.Topology.Routes)
	diffMaps(t, "policy", got.Policies, c.Topology.Policies)
	diffMaps(t, "subscription", got.Subscriptions, c.Topology.Subscriptions)
	t.Errorf("the topology assembled from the specs differs from the file's")
}

// diffMaps reports each entry that differs between got and want.
func diffMaps[V any](t *testing.T, what string, got, want map[string]*V) {
	t.Helper()
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[name]; !ok {
			t.Errorf("%s %s is missing", what, name)
		} else if !reflect.DeepEqual(g, want[name]) {
			t.Errorf("%s %s:\n got %+v\nwant %+v", what, name, *g, *want[name])
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s %s is not in the file", what, name)
		}
	}
}

// everything is a file with a little of every part of the topology.
const everything = `
endpoints:
  hook: &hook
    transport: http
    url: https://hooks.example.org/in?a=1&b=2
    method: PUT
    secret: ${SECRET}
    follow_redirects: true
    allow_networks: [10.1.2.3/8, "fd00::/8"]
    rate: 5000/m
    timeout: 10s
    max_concurrency: 2
    min_interval: 1s
    suspend_on: [http_5xx]
    permanent: []
    retries_before_suspension: 0
    suspension: {initial: 1m, factor: 1.5, max: 2h}
  hook-2:
    <<: *hook
    url: https://hooks-2.example.org/in
    secret: pa$$word
  mail: {transport: smtp, addr: "smtp.example.org:587", from: "Courier <c@example.org>", to: [a@example.org, b@example.org], starttls: always, username: u, password: "${SMTP_PASSWORD}"}
  out: {transport: file, dir: out, name: "{type}-{id}.xml"}
  undo: {transport: file, dir: undo}
  q: {transport: amqp, url: "amqps://broker.example.org/vhost", exchange: docs}
  q2: {transport: amqp, url: "amqp://broker.example.org/", exchange: "", routing_key: in}
  n: {transport: nats, url: "nats://a:4222, tls://b:4222", subject: out.docs}
routes:
  spread: {endpoints: [hook, hook-2, out], strategy: weighted, weights: {hook: 5, hook-2: 1}}
  rr: {endpoints: [hook, q], strategy: round_robin, ordered_on_failure: skip, redrive: {on_recovery: true}}
  one: {endpoints: [out], redrive: {on_recovery: true, reasons: [expired, no_route], max_age: 12h}}
  queues: {endpoints: [q, q2, n]}
  onboard:
    workflow:
      - {endpoint: hook, compensate: undo}
      - {endpoint: out, compensate: null}
    envelope: true
    compensation_policy: compensation
    ordered_on_failure: skip
  nemhandel:
    lookup:
      url: https://registry.example/lookup?participant={recipient}&doctype={type}
      timeout: 10s
      cache_ttl: 5m
      negative_ttl: 1m
    endpoint_template:
      transport: http
      timeout: 30s
      min_interval: 10s
      secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
policies:
  default:
    backoff: {initial: 1m, max: 2h}
    max_age: 72h
    priority: 3
    escalate: [{after: 12h, notify: mail}, {after: 1h, notify: hook}]
    fallback: {route: one}
  order.created:
    backoff: {factor: 3, jitter: 0}
  invoice:
    schedule: [1m, 10m, 1h]
    escalate: []
    fallback: {after: 48h, route: spread}
    on_exhausted: discard
  compensation: {max_attempts: 50, max_age: 24h}
  quiet:
  bulk: {backoff: {max: 1m30s}, priority: "0"}
subscriptions:
  erp-orders:
    types: [order.*]
    route: spread
    filter:
      headers: {X-Tenant: acme, X-Region: "${REGION}", X-Empty: "", X-Price: "5$$"}
  signups:
    types:
      - customer.created
      - customer.reopened
    route: onboard
    filter:
  invoices: {types: [invoice, invoice.credit-note], route: nemhandel, filter: {headers: {}}}
`

var everythingEnv = map[string]string{"SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "SMTP_PASSWORD": "p$ss ${X}", "REGION": "eu"}

// TestRoundTrip checks that a topology comes back whole from its specs.
// Every valid file of the other tests is checked the same way (mustParse,
// TestRules, FuzzParse); these are the files that show every part.
func TestRoundTrip(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("testdata/courier.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		src  string
		env  map[string]string
	}{
		{"example", string(example), exampleEnv},
		{"everything", everything, everythingEnv},
		{"default policy only", "policies: {default: {schedule: [1m, 5m]}}\n", nil},
		{"inherited schedule", "policies:\n  default: {schedule: [1m, 5m, 10m]}\n  a: {priority: 1}\n  b: {max_attempts: 4}\n", nil},
		// The file's other policies inherit an initial delay longer than
		// the built-in default's.
		{"max under the built-in initial", "policies:\n  default: {backoff: {initial: 1s, max: 5s}}\n  a: {backoff: {max: 2s}}\n", nil},
		{"empty sections", "endpoints: {}\nroutes:\npolicies: {}\n", nil},
		// Characters JSON writes as they are and YAML would not read so.
		{"odd characters", "endpoints:\n" + `  a: {transport: file, dir: "a\x7f\N\u2028\uFFFE\t\\/\x00\U0001F600$$b"}` + "\n", nil},
		{"merged sections", "endpoints:\n  <<: {a: {transport: file, dir: a}}\n  b: {transport: file, dir: b}\nroutes: {r: {endpoints: [a, b]}}\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("c.yaml", []byte(tt.src), envOf(tt.env))
			if err != nil {
				t.Fatalf("Parse:\n%v", err)
			}
			if c.TopologyInStore {
				t.Fatal("TopologyInStore, want the file's topology")
			}
			checkRoundTrip(t, c)
		})
	}
}

// TestSpecs checks the specs of a file byte for byte: canonical JSON of
// the values as the decoder reads them.
func TestSpecs(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
endpoints:
  base: &base {transport: http, url: "https://a.example/in", timeout: 10s}
  hook:
    url: "https://${HOST}/in?a=1&b=2"
    <<: *base
    max_concurrency: 4
    follow_redirects: true
    rate: 10/s
  mail: {to: [b@example.org], from: a@example.org, addr: "mx:25", transport: smtp, password: "pa$$word$", username: u}
routes:
  r:
    endpoints:
      - hook
      - base
policies:
  invoice:
  default: {backoff: {factor: 1.5}, max_age: 48h, escalate: [{after: 1h, notify: mail}]}
  bulk: {priority: "3", fallback: null}
subscriptions: {}
`, map[string]string{"HOST": "example.org"})
	want := Specs{
		courier.KindEndpoint: {
			"base": []byte(`{"timeout":"10s","transport":"http","url":"https://a.example/in"}`),
			"hook": []byte(`{"follow_redirects":true,"max_concurrency":4,"rate":"10/s","timeout":"10s","transport":"http","url":"https://example.org/in?a=1\u0026b=2"}`),
			"mail": []byte(`{"addr":"mx:25","from":"a@example.org","password":"pa$word$","to":["b@example.org"],"transport":"smtp","username":"u"}`),
		},
		courier.KindRoute: {
			"r": []byte(`{"endpoints":["hook","base"]}`),
		},
		courier.KindPolicy: {
			"invoice": []byte(`{}`),
			"default": []byte(`{"backoff":{"factor":1.5},"escalate":[{"after":"1h","notify":"mail"}],"max_age":"48h"}`),
			"bulk":    []byte(`{"fallback":null,"priority":"3"}`),
		},
		courier.KindSubscription: {},
	}
	for _, kind := range courier.TopologyKinds {
		got := c.Specs[kind]
		if got == nil {
			t.Errorf("no %s", kind.Section())
		}
		for _, name := range slices.Sorted(maps.Keys(want[kind])) {
			if g, w := string(got[name]), string(want[kind][name]); g != w {
				t.Errorf("%s.%s:\n got %s\nwant %s", kind.Section(), name, g, w)
			}
		}
		if g, w := len(got), len(want[kind]); g != w {
			t.Errorf("%d %s, want %d", g, kind.Section(), w)
		}
	}
}

func TestDecodeObject(t *testing.T) {
	t.Parallel()
	// Values in the store are final: a $ is a $.
	o, err := DecodeObject(courier.KindEndpoint, "mail", []byte(`{"transport":"smtp","addr":"mx:25","from":"a@example.org","to":["b@example.org"],"username":"u","password":"pa$$${X}"}`))
	if err != nil {
		t.Fatalf("DecodeObject: %v", err)
	}
	if got, want := smtptransport.Of(o.Endpoint).Password, "pa$$${X}"; got != want {
		t.Errorf("password = %q, want %q", got, want)
	}
	if o.Kind != courier.KindEndpoint || o.Name != "mail" || o.Endpoint.Name != "mail" || o.Route != nil || o.Subscription != nil {
		t.Errorf("object %+v", o)
	}

	// Any JSON reads as JSON means it, also where YAML would read it
	// otherwise; lines stay where they are.
	tests := []struct {
		name string
		spec string
		want string // the file endpoint's dir
	}{
		{"tabs", "{\n\t\"transport\": \"file\",\n\t\"dir\": \"out\"\n}", "out"},
		{"escaped slash", `{"transport":"file","dir":"a\/b"}`, "a/b"},
		{"escaped backslash", `{"transport":"file","dir":"a\\u0041\\\/"}`, `a\u0041\/`},
		{"surrogate pair", `{"transport":"file","dir":"\ud83d\ude00"}`, "😀"},
		{"lone surrogate", `{"transport":"file","dir":"a\ud83db"}`, "a\ufffdb"},
		{"escapes", `{"transport":"file","dir":"\u00e9\n\"\t\b"}`, "é\n\"\t\b"},
		{"raw DEL and C1", "{\"transport\":\"file\",\"dir\":\"a\u007fb\u0085c\u0090\"}", "a\u007fb\u0085c\u0090"},
		{"raw non-ASCII", "{\"transport\":\"file\",\"dir\":\"é😀\ufffe\u2028\"}", "é😀\ufffe\u2028"},
	}
	for _, tt := range tests {
		o, err := DecodeObject(courier.KindEndpoint, "f", []byte(tt.spec))
		if err != nil {
			t.Errorf("%s: DecodeObject(%q): %v", tt.name, tt.spec, err)
			continue
		}
		if got := filetransport.Of(o.Endpoint).Dir; got != tt.want {
			t.Errorf("%s: dir = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestDecodeObjectErrors checks that a spec gets the errors its entry gets
// in the file, at the field's path and the line in the spec.
func TestDecodeObjectErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		kind    courier.TopologyKind
		object  string
		spec    string
		want    []string
		context string // sections the file needs besides the object; "-": the file has no like
	}{
		{"unknown field", courier.KindEndpoint, "a", `{"transport":"file","dir":"out","tmeout":"5s"}`,
			[]string{`line 1: endpoints.a.tmeout: unknown field (did you mean "timeout"?)`}, ""},
		{"field with two letters swapped", courier.KindEndpoint, "acme", `{"transport":"http","ulr":"https://acme.example/in"}`,
			[]string{`line 1: endpoints.acme.ulr: unknown field (did you mean "url"?)`, `line 1: endpoints.acme.url: required: the receiver's http or https URL`}, ""},
		{"bad url", courier.KindEndpoint, "acme", `{"transport":"http","url":"ftp://acme.example/in"}`,
			[]string{`line 1: endpoints.acme.url: must be an absolute http or https URL`}, ""},
		{"bad duration", courier.KindEndpoint, "a", `{"transport":"file","dir":"out","timeout":"5 sec"}`,
			[]string{`line 1: endpoints.a.timeout: "5 sec" is not a duration: write a Go duration such as 30s, 5m or 48h`}, ""},
		{"bad transport", courier.KindEndpoint, "a", `{"transport":"ftp"}`,
			[]string{`line 1: endpoints.a.transport: must be http, smtp, file, amqp or nats, not "ftp"`}, ""},
		{"missing transport", courier.KindEndpoint, "a", `{}`,
			[]string{`line 1: endpoints.a.transport: required: one of http, smtp, file, amqp, nats`}, ""},
		{"field of another transport", courier.KindEndpoint, "a", `{"transport":"file","dir":"out","url":"http://x"}`,
			[]string{`line 1: endpoints.a.url: not a field of file endpoints (it belongs to http and amqp and nats endpoints)`}, ""},
		{"bad number, not a string", courier.KindEndpoint, "a", `{"transport":"file","dir":"out","max_concurrency":0}`,
			[]string{`line 1: endpoints.a.max_concurrency: must be at least 1`}, ""},
		{"list for a single value", courier.KindEndpoint, "a", `{"transport":"file","dir":["out"]}`,
			[]string{`line 1: endpoints.a.dir: must be a single value, not a list`}, ""},
		{"endpoint name", courier.KindEndpoint, "a b", `{"transport":"file","dir":"out"}`,
			[]string{`line 1: endpoints.a b: "a b" is not a valid name: use 1 to 128 letters, digits, '.', '_' or '-'`}, ""},
		{"lines of an indented spec", courier.KindEndpoint, "a", "{\n  \"transport\": \"file\",\n  \"dir\": \"out\",\n  \"timeout\": \"0s\",\n  \"dir\": \"in\"\n}",
			[]string{`line 4: endpoints.a.timeout: must be greater than 0`, `line 5: endpoints.a.dir: given twice (first at line 3)`}, ""},
		{"reserved route name", courier.KindRoute, "courier.mine", `{"endpoints":["a"]}`,
			[]string{`line 1: routes.courier.mine: route names starting with "courier." are reserved for courier's own notices`}, "endpoints: {a: {transport: file, dir: a}}"},
		{"route endpoint twice", courier.KindRoute, "r", `{"endpoints":["a","a"]}`,
			[]string{`line 1: routes.r.endpoints[1]: endpoint "a" is listed twice`}, "endpoints: {a: {transport: file, dir: a}}"},
		{"route strategy", courier.KindRoute, "r", `{"endpoints":["a","b"],"strategy":"single"}`,
			[]string{`line 1: routes.r.strategy: single takes one endpoint and this route has 2; use failover, round_robin or weighted`},
			"endpoints: {a: {transport: file, dir: a}, b: {transport: file, dir: b}}"},
		{"workflow step", courier.KindRoute, "w", `{"workflow":[{"compensate":"a"}]}`,
			[]string{`line 1: routes.w.workflow[0].endpoint: required: the endpoint of this step`}, "endpoints: {a: {transport: file, dir: a}}"},
		{"policy name", courier.KindPolicy, "an invoice", `{"priority":1}`,
			[]string{`line 1: policies.an invoice: "an invoice" is not a message type: use 1 to 128 letters, digits, '.', '_' or '-'`}, ""},
		{"policy priority", courier.KindPolicy, "invoice", `{"priority":12}`,
			[]string{`line 1: policies.invoice.priority: must be from 0 to 9`}, ""},
		{"schedule and backoff", courier.KindPolicy, "invoice", `{"schedule":["1m"],"backoff":{"initial":"1m"}}`,
			[]string{`line 1: policies.invoice.backoff: a schedule replaces backoff; give one of them`}, ""},
		{"default backoff", courier.KindPolicy, "default", `{"backoff":{"initial":"2h"}}`,
			[]string{`line 1: policies.default.backoff.initial: must not exceed max (1h0m0s)`}, ""},
		{"subscription type", courier.KindSubscription, "s", `{"types":["order*"],"route":"r"}`,
			[]string{`line 1: subscriptions.s.types[0]: "order*" is not a message type or a prefix of types: use a type of 1 to 128 letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)`},
			"endpoints: {a: {transport: file, dir: a}}\nroutes: {r: {endpoints: [a]}}"},
		{"subscription header", courier.KindSubscription, "s", `{"types":["a"],"route":"r","filter":{"headers":{"X-A":"1","x-a":"2"}}}`,
			[]string{`line 1: subscriptions.s.filter.headers.x-a: given twice (first as "X-A" at line 1): header names match without regard to case`},
			"endpoints: {a: {transport: file, dir: a}}\nroutes: {r: {endpoints: [a]}}"},
		{"not a mapping", courier.KindEndpoint, "a", `["a"]`,
			[]string{`line 1: endpoints.a: must be a mapping of field: value, not a list`}, ""},
		{"a string", courier.KindRoute, "r", `"a"`,
			[]string{`line 1: routes.r: must be a mapping of field: value, not a single value`}, ""},
		{"null", courier.KindPolicy, "invoice", `null`,
			[]string{`line 1: policies.invoice: must be a mapping of field: value, not null`}, "-"},
		{"not JSON", courier.KindEndpoint, "a", "{\n  transport: file\n}",
			[]string{`line 2: endpoints.a: is not JSON: invalid character 't' looking for beginning of object key string`}, "-"},
		{"empty", courier.KindEndpoint, "a", "",
			[]string{`line 1: endpoints.a: is not JSON: unexpected end of JSON input`}, "-"},
		{"kind", courier.TopologyKind("widget"), "a", `{}`,
			[]string{`a: "widget" is not a kind of topology object: use endpoint, route, policy, subscription, key, tenant or signing_key`}, "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := DecodeObject(tt.kind, tt.object, []byte(tt.spec))
			if o != nil {
				t.Errorf("DecodeObject returned an object and %v", err)
			}
			if !wantErrorLines(t, err, tt.want) {
				t.Logf("spec %s", tt.spec)
			}
			if tt.context == "-" {
				return
			}
			// The file with this object as its entry says the same.
			src := tt.context + "\n" + tt.kind.Section() + ":\n  " + quoteKey(tt.object) + ": " + tt.spec + "\n"
			_, ferr := Parse("c.yaml", []byte(src), nil)
			if got, want := fieldMessages(t, err), fieldMessages(t, ferr); !slices.Equal(got, want) {
				t.Errorf("not as in the file:\n%s\nstore\n  %s\nfile\n  %s", src, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}
}

// quoteKey writes a name as a key of the file.
func quoteKey(name string) string { return `"` + name + `"` }

// fieldMessages returns each problem of err as field: message, sorted,
// leaving out where it is, also in the message ("first at line 3").
func fieldMessages(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	for _, e := range problems(t, err) {
		msg, _, _ := strings.Cut(e.Message, " (first")
		out = append(out, e.Field+": "+msg)
	}
	slices.Sort(out)
	return out
}

type spec struct {
	kind courier.TopologyKind
	name string
	spec string
}

// mustDecode decodes specs into objects, failing t on any error.
func mustDecode(t testing.TB, specs []spec) []*Object {
	t.Helper()
	objects := make([]*Object, 0, len(specs))
	for _, s := range specs {
		o, err := DecodeObject(s.kind, s.name, []byte(s.spec))
		if err != nil {
			t.Fatalf("DecodeObject(%s, %s, %s): %v", s.kind, s.name, s.spec, err)
		}
		objects = append(objects, o)
	}
	return objects
}

// asFile writes specs as a configuration file, one entry each.
func asFile(specs []spec) string {
	var b strings.Builder
	for _, kind := range courier.TopologyKinds {
		fmt.Fprintf(&b, "%s:\n", kind.Section())
		for _, s := range specs {
			if s.kind == kind {
				fmt.Fprintf(&b, "  %s: %s\n", quoteKey(s.name), s.spec)
			}
		}
	}
	return b.String()
}

var (
	fileEndpoint = spec{courier.KindEndpoint, "vans", `{"transport":"file","dir":"out"}`}
	mailEndpoint = spec{courier.KindEndpoint, "mail", `{"transport":"smtp","addr":"mx:25","from":"a@example.org","to":["b@example.org"]}`}
	vansRoute    = spec{courier.KindRoute, "vans", `{"endpoints":["vans"]}`}
	workflow     = spec{courier.KindRoute, "onboard", `{"workflow":[{"endpoint":"vans"}]}`}
)

// TestAssembleErrors checks the references between objects: each problem
// names the field of the object that refers, as the file does.
func TestAssembleErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		specs []spec
		want  []string
	}{
		{"route to a missing endpoint", []spec{fileEndpoint, {courier.KindRoute, "acme", `{"endpoints":["vans","x"]}`}},
			[]string{`routes.acme.endpoints[1]: endpoint "x" is not defined`}},
		{"route to a misspelt endpoint", []spec{fileEndpoint, {courier.KindRoute, "acme", `{"endpoints":["van"]}`}},
			[]string{`routes.acme.endpoints[0]: endpoint "van" is not defined (did you mean "vans"?)`}},
		{"subscription to a missing route", []spec{fileEndpoint, vansRoute, {courier.KindSubscription, "s", `{"types":["order.*"],"route":"van"}`}},
			[]string{`subscriptions.s.route: route "van" is not defined (did you mean "vans"?)`}},
		{"fallback to a missing route", []spec{fileEndpoint, {courier.KindPolicy, "invoice", `{"fallback":{"after":"48h","route":"vans"}}`}},
			[]string{`policies.invoice.fallback.route: route "vans" is not defined`}},
		{"fallback to a workflow", []spec{fileEndpoint, workflow, {courier.KindPolicy, "invoice", `{"fallback":{"route":"onboard"}}`}},
			[]string{`policies.invoice.fallback.route: route "onboard" is a workflow route: messages enter a workflow when they are sent, not by falling back`}},
		{"notice to a file endpoint", []spec{fileEndpoint, mailEndpoint, {courier.KindPolicy, "invoice", `{"escalate":[{"after":"1h","notify":"mail"},{"after":"24h","notify":"vans"}]}`}},
			[]string{`policies.invoice.escalate[1].notify: endpoint "vans" is a file endpoint; notices go to smtp or http endpoints`}},
		{"notice of the default policy to a missing endpoint", []spec{{courier.KindPolicy, "default", `{"escalate":[{"after":"1h","notify":"mail"}]}`}},
			[]string{`policies.default.escalate[0].notify: endpoint "mail" is not defined`}},
		{"workflow step and compensation policy", []spec{fileEndpoint, {courier.KindRoute, "w", `{"workflow":[{"endpoint":"vans","compensate":"undo"}],"compensation_policy":"slow"}`}},
			[]string{`routes.w.workflow[0].compensate: endpoint "undo" is not defined`, `routes.w.compensation_policy: policy "slow" is not defined`}},
		// A policy inherits from the default policy: what it leaves out is
		// checked against what it inherits.
		{"max under the inherited initial", []spec{{courier.KindPolicy, "default", `{"backoff":{"initial":"2h","max":"3h"}}`}, {courier.KindPolicy, "invoice", `{"backoff":{"max":"1h"}}`}},
			[]string{`policies.invoice.backoff.max: must be at least initial (2h0m0s)`}},
		{"max under the built-in initial", []spec{{courier.KindPolicy, "invoice", `{"backoff":{"max":"10s"}}`}},
			[]string{`policies.invoice.backoff.max: must be at least initial (30s)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			top, err := Assemble(mustDecode(t, tt.specs))
			if top != nil {
				t.Errorf("Assemble returned a topology and %v", err)
			}
			wantErrorLines(t, err, tt.want)
			// The file with these entries says the same.
			src := asFile(tt.specs)
			_, ferr := Parse("c.yaml", []byte(src), nil)
			if got, want := fieldMessages(t, err), fieldMessages(t, ferr); !slices.Equal(got, want) {
				t.Errorf("not as in the file:\n%s\nstore\n  %s\nfile\n  %s", src, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
		})
	}

	// One object of a kind and name: the store holds no more.
	objects := mustDecode(t, []spec{fileEndpoint, fileEndpoint, vansRoute})
	_, err := Assemble(objects)
	if got, want := errorLines(t, err), []string{`endpoints.vans: given twice`}; !slices.Equal(got, want) {
		t.Errorf("two of one endpoint: got %q, want %q", got, want)
	}
	_, err = Assemble([]*Object{{Kind: courier.KindRoute, Name: "r"}})
	if got, want := errorLines(t, err), []string{`routes.r: is not an object made by DecodeObject`}; !slices.Equal(got, want) {
		t.Errorf("an object not decoded: got %q, want %q", got, want)
	}
}

func TestAssemble(t *testing.T) {
	t.Parallel()
	// Nothing is the built-in default policy alone.
	top, err := Assemble(nil)
	if err != nil {
		t.Fatalf("Assemble(nil): %v", err)
	}
	if got, want := top.Policies, map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}; !reflect.DeepEqual(got, want) ||
		len(top.Endpoints) != 0 || len(top.Routes) != 0 || len(top.Subscriptions) != 0 {
		t.Errorf("Assemble(nil) = %+v", top)
	}

	// The policy given alone is read again over the default policy, in
	// whatever order the objects come; the rest is prepared.
	specs := []spec{
		{courier.KindPolicy, "invoice", `{"backoff":{"max":"2s"}}`},
		mailEndpoint,
		{courier.KindPolicy, "default", `{"backoff":{"initial":"1s","max":"5s"},"escalate":[{"after":"1h","notify":"mail"}]}`},
	}
	top, err = Assemble(mustDecode(t, specs))
	if err != nil {
		t.Fatalf("Assemble: %v", err)
	}
	want := &courier.Policy{Name: "invoice", Backoff: courier.Backoff{Initial: time.Second, Factor: 2, Max: 2 * time.Second, Jitter: 0.2},
		MaxAttempts: 12, MaxAge: 48 * time.Hour, Escalate: []courier.Escalation{{After: time.Hour, Notify: "mail"}}, OnExhausted: courier.ExhaustedSuspend}
	if got := top.Policies["invoice"]; !reflect.DeepEqual(got, want) {
		t.Errorf("invoice:\n got %+v\nwant %+v", got, want)
	}
	if r := top.Route(courier.NoticeRoute("mail")); r == nil || r.Endpoints[0] != "mail" {
		t.Errorf("notice route of mail = %+v", r)
	}
}

func TestStoreMode(t *testing.T) {
	t.Parallel()
	const storeFile = "listen: 127.0.0.1:8425\n" +
		"keys:\n" +
		`  erp: {role: sender, hash: "` + hashA + `", routes: [acme]}` + "\n" +
		"receivers:\n" +
		"  in: {transport: dir, path: /in, type: invoice, route: acme}\n"
	tests := []struct {
		name    string
		src     string
		inStore bool
		want    []string
	}{
		// The routes are the store's: they are checked when used.
		{"no topology section", storeFile, true, nil},
		{"empty file", "", true, nil},
		{"an endpoints section", storeFile + "endpoints:\n", false, []string{
			`c.yaml:3: keys.erp.routes[0]: route "acme" is not defined`,
			`c.yaml:5: receivers.in.route: route "acme" is not defined`}},
		{"a subscriptions section", storeFile + "subscriptions: {}\n", false, []string{
			`c.yaml:3: keys.erp.routes[0]: route "acme" is not defined`,
			`c.yaml:5: receivers.in.route: route "acme" is not defined`}},
		{"the route in the file", storeFile + "endpoints: {a: {transport: file, dir: a}}\nroutes: {acme: {endpoints: [a]}}\n", false, nil},
		{"only policies", "policies: {default: {priority: 1}}\n", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("c.yaml", []byte(tt.src), nil)
			if !wantErrorLines(t, err, tt.want) || err != nil {
				return
			}
			if c.TopologyInStore != tt.inStore {
				t.Errorf("TopologyInStore = %v, want %v", c.TopologyInStore, tt.inStore)
			}
			if got := len(c.Specs); tt.inStore && got != 0 {
				t.Errorf("%d kinds of specs in store mode, want none", got)
			}
			checkRoundTrip(t, c)
		})
	}
	if c := Default(); !c.TopologyInStore || len(c.Specs) != 0 {
		t.Errorf("Default: TopologyInStore %v, %d kinds of specs; want true and none", c.TopologyInStore, len(c.Specs))
	}
}

func TestSecretsKey(t *testing.T) {
	t.Parallel()
	const (
		raw = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"  // key32B with no padding
		url = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA_" // key32A in the URL alphabet
	)
	bytesA := []byte{0xab, 0xcd, 0xef, 0x12, 0x34, 0x56, 0x78, 0x90, 0xab, 0xcd, 0xef, 0x12, 0x34, 0x56, 0x78, 0x90,
		0xab, 0xcd, 0xef, 0x12, 0x34, 0x56, 0x78, 0x90, 0xab, 0xcd, 0xef, 0x12, 0x34, 0x56, 0x78, 0x90}
	bytesB := make([]byte, 32)
	for i := range bytesB {
		bytesB[i] = byte(i)
	}
	const advice = "give 32 random bytes in standard base64 (openssl rand -base64 32)"
	tests := []struct {
		name         string
		file         string
		env          map[string]string
		wantKey, old []byte
		want         []string
	}{
		{"none", "listen: 127.0.0.1:1\n", nil, nil, nil, nil},
		{"in the file", "secrets_key: " + key32A + "\n", nil, bytesA, nil, nil},
		{"from a variable in the file", "secrets_key: ${KEY}\n", map[string]string{"KEY": key32A + "\n"}, bytesA, nil, nil},
		{"both in the file", "secrets_key: " + key32A + "\nsecrets_old_key: " + key32B + "\n", nil, bytesA, bytesB, nil},
		{"environment over the file", "secrets_key: " + key32A + "\n", map[string]string{"COURIER_SECRETS_KEY": key32B}, bytesB, nil, nil},
		{"both in the environment", "", map[string]string{"COURIER_SECRETS_KEY": key32B, "COURIER_SECRETS_OLD_KEY": key32A}, bytesB, bytesA, nil},
		{"short", "secrets_key: " + key16 + "\n", nil, nil, nil,
			[]string{"c.yaml:1: secrets_key: holds 16 bytes, not 32: " + advice}},
		{"unpadded", "listen: 127.0.0.1:1\nsecrets_key: " + raw + "\n", nil, nil, nil,
			[]string{"c.yaml:2: secrets_key: is not standard base64: " + advice}},
		{"URL alphabet", "secrets_key: " + url + "\n", nil, nil, nil,
			[]string{"c.yaml:1: secrets_key: is not standard base64: " + advice}},
		{"not base64", "secrets_key: hunter2-hunter2\n", nil, nil, nil,
			[]string{"c.yaml:1: secrets_key: is not standard base64: " + advice}},
		{"a list", "secrets_key: [" + key32A + "]\n", nil, nil, nil,
			[]string{"c.yaml:1: secrets_key: must be a single value, not a list"}},
		{"bad in the environment", "", map[string]string{"COURIER_SECRETS_KEY": key16, "COURIER_SECRETS_OLD_KEY": "hunter2"}, nil, nil,
			[]string{"COURIER_SECRETS_KEY: holds 16 bytes, not 32: " + advice, "COURIER_SECRETS_OLD_KEY: is not standard base64: " + advice}},
		{"old key alone in the file", "listen: 127.0.0.1:1\nsecrets_old_key: " + key32A + "\n", nil, nil, nil,
			[]string{"c.yaml:2: secrets_old_key: requires secrets_key: the old key only reads what was stored before secrets_key replaced it"}},
		{"old key alone in the environment", "", map[string]string{"COURIER_SECRETS_OLD_KEY": key32A}, nil, nil,
			[]string{"COURIER_SECRETS_OLD_KEY: secrets_old_key: requires secrets_key: the old key only reads what was stored before secrets_key replaced it"}},
		{"misspelt", "secret_key: " + key32A + "\n", nil, nil, nil,
			[]string{`c.yaml:1: secret_key: unknown field (did you mean "secrets_key"?)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// A key is never quoted back, not even a wrong one.
			c := parseKeepingSecrets(t, tt.file, tt.env, tt.want, key32A, key32B, key16, raw, url, "hunter2")
			if c == nil {
				return
			}
			if !slices.Equal(c.SecretsKey, tt.wantKey) || (c.SecretsKey == nil) != (tt.wantKey == nil) {
				t.Errorf("SecretsKey = %x, want %x", c.SecretsKey, tt.wantKey)
			}
			if !slices.Equal(c.SecretsOldKey, tt.old) || (c.SecretsOldKey == nil) != (tt.old == nil) {
				t.Errorf("SecretsOldKey = %x, want %x", c.SecretsOldKey, tt.old)
			}
		})
	}

	// Without a file, the environment alone.
	c := Default()
	if err := c.ApplyEnv(envOf(map[string]string{"COURIER_SECRETS_KEY": key32A})); err != nil || !slices.Equal(c.SecretsKey, bytesA) {
		t.Errorf("Default().ApplyEnv: key %x, error %v; want %x", c.SecretsKey, err, bytesA)
	}
	if err := Default().ApplyEnv(envOf(map[string]string{"COURIER_SECRETS_KEY": "x" + key32A})); err == nil || strings.Contains(err.Error(), key32A) {
		t.Errorf("Default().ApplyEnv of a bad key: %v", err)
	}
}

// benchEndpoints returns n http endpoints and n routes of one endpoint each.
func benchSpecs(n int) []spec {
	specs := make([]spec, 0, 2*n)
	for i := range n {
		specs = append(specs,
			spec{courier.KindEndpoint, fmt.Sprintf("ep-%d", i), fmt.Sprintf(`{"transport":"http","url":"https://receiver-%d.example.org/inbox","timeout":"10s","max_concurrency":4}`, i)},
			spec{courier.KindRoute, fmt.Sprintf("route-%d", i), fmt.Sprintf(`{"endpoints":["ep-%d"]}`, i)})
	}
	return specs
}

// BenchmarkAssemble10000 measures what every node does on each change of
// a large topology: putting 10,000 endpoints and routes together.
func BenchmarkAssemble10000(b *testing.B) {
	objects := mustDecode(b, benchSpecs(10000))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Assemble(objects); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeObjectEndpoint measures reading one endpoint's spec, as
// each change through the API and each node's first load does.
func BenchmarkDecodeObjectEndpoint(b *testing.B) {
	spec := []byte(`{"max_concurrency":4,"min_interval":"10s","permanent":["http_4xx"],"rate":"100/s","retries_before_suspension":3,` +
		`"secret":"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw","suspend_on":["dns","connect_refused","http_5xx"],` +
		`"suspension":{"factor":2,"initial":"30s","max":"1h"},"timeout":"30s","timeout_on":["timeout","connect_timeout"],` +
		`"transport":"http","url":"https://erp.acme.example/inbox"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeObject(courier.KindEndpoint, "acme-primary", spec); err != nil {
			b.Fatal(err)
		}
	}
}
