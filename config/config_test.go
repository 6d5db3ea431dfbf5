package config

import (
	"errors"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	filetransport "github.com/courier-gw/courier/transport/file"
	httptransport "github.com/courier-gw/courier/transport/http"
	natstransport "github.com/courier-gw/courier/transport/nats"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier"
)

// envOf returns a lookupEnv over a fixed set of variables.
func envOf(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

var exampleEnv = map[string]string{
	"ACME_SECRET":   "whsec_old whsec_new",
	"SMTP_PASSWORD": "mail-pass",
	"AMQP_PASSWORD": "rabbit",
}

func mustParse(t *testing.T, src string, env map[string]string) *Config {
	t.Helper()
	c, err := Parse("c.yaml", []byte(src), envOf(env))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	checkRoundTrip(t, c)
	return c
}

// Keys in standard base64, for the tests of the secrets key and the
// signing keys: two of 32 bytes, and one of 16, too short.
const (
	key32A = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="
	key32B = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	key16  = "AAECAwQFBgcICQoLDA0ODw=="
)

// problems returns err as Errors, none when it is nil, failing the test
// when it is not an Errors.
func problems(t *testing.T, err error) Errors {
	t.Helper()
	var es Errors
	if err != nil && !errors.As(err, &es) {
		t.Fatalf("error %v (%T) is not an Errors", err, err)
	}
	return es
}

// errorLines returns each problem of err as formatted, failing the test when
// err is not an Errors.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	var out []string
	for _, e := range problems(t, err) {
		out = append(out, e.Error())
	}
	return out
}

// wantErrorLines reports, and returns false, unless the problems of err,
// as formatted, are want.
func wantErrorLines(t *testing.T, err error, want []string) bool {
	t.Helper()
	got := errorLines(t, err)
	if slices.Equal(got, want) {
		return true
	}
	t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	return false
}

// parseKeepingSecrets parses file with env and checks that its problems
// are want and that they quote none of secrets. It returns the
// configuration, or nil where the file is refused or not as wanted.
func parseKeepingSecrets(t *testing.T, file string, env map[string]string, want []string, secrets ...string) *Config {
	t.Helper()
	c, err := Parse("c.yaml", []byte(file), envOf(env))
	if !wantErrorLines(t, err, want) {
		return nil
	}
	for _, v := range secrets {
		if err != nil && strings.Contains(err.Error(), v) {
			t.Errorf("the error quotes the value %q:\n%v", v, err)
		}
	}
	if err != nil {
		return nil
	}
	return c
}

// checkDefaultServer checks that c has the default server-wide settings:
// Default's, which the example file also spells out.
func checkDefaultServer(t *testing.T, c *Config) {
	t.Helper()
	if got, want := c.Listen, "127.0.0.1:8425"; got != want {
		t.Errorf("Listen = %q, want %q", got, want)
	}
	if got, want := c.Store, (Store{Driver: "sqlite", Path: "./courier-data/courier.db"}); got != want {
		t.Errorf("Store = %+v, want %+v", got, want)
	}
	if got, want := c.Retention, 168*time.Hour; got != want {
		t.Errorf("Retention = %v, want %v", got, want)
	}
	if got, want := c.ShutdownTimeout, 20*time.Second; got != want {
		t.Errorf("ShutdownTimeout = %v, want %v", got, want)
	}
	if got, want := c.MaxPayload, int64(1<<20); got != want {
		t.Errorf("MaxPayload = %d, want %d", got, want)
	}
	if got, want := c.MaxBatchBytes, int64(32<<20); got != want {
		t.Errorf("MaxBatchBytes = %d, want %d", got, want)
	}
	if got, want := c.Log, (Log{Format: "text", Level: "info"}); got != want {
		t.Errorf("Log = %+v, want %+v", got, want)
	}
	if got, want := c.IngestInFlight, (IngestInFlight{SenderShare: 0.5}); got != want {
		t.Errorf("IngestInFlight = %+v, want %+v (the bounds derived when the server starts)", got, want)
	}
}

func TestParseIngestInFlight(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "ingest_in_flight:\n  max_bytes: 64MiB\n  max_messages: 50000\n  sender_share: 0.25\n", nil)
	if got, want := c.IngestInFlight, (IngestInFlight{MaxBytes: 64 << 20, MaxMessages: 50000, SenderShare: 0.25}); got != want {
		t.Errorf("IngestInFlight = %+v, want %+v", got, want)
	}
}

func TestParseExample(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/courier.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("testdata/courier.yaml", data, envOf(exampleEnv))
	if err != nil {
		t.Fatalf("Parse:\n%v", err)
	}
	checkRoundTrip(t, c)

	if got, want := c.File, "testdata/courier.yaml"; got != want {
		t.Errorf("File = %q, want %q", got, want)
	}
	checkDefaultServer(t, c)
	if got, want := c.TLS, (TLS{Cert: "server.crt", Key: "server.key"}); got != want {
		t.Errorf("TLS = %+v, want %+v", got, want)
	}
	if got, want := c.PublicURL, "https://courier.example.org"; got != want {
		t.Errorf("PublicURL = %q, want %q", got, want)
	}
	wantKeys := map[string]Key{
		"erp": {Name: "erp", Role: RoleSender, Hash: "sha256:886f6368ba49c2284e40472c43f2592fc28370d286034900a7e900dda01b02f0", Routes: []string{"acme"},
			Rate: courier.Rate{N: 100, Per: time.Second}, MaxSuspended: 500},
		"ops": {Name: "ops", Role: RoleOperator, Hash: "sha256:32323cfa9ec9d62750daad0836a4cf3d7b60d23723b7852a529667deed01669f", MaxSuspended: DefaultMaxSuspended},
	}
	if !reflect.DeepEqual(c.Keys, wantKeys) {
		t.Errorf("Keys = %+v, want %+v", c.Keys, wantKeys)
	}
	if got, want := c.Outbound.AllowNetworks, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}; !reflect.DeepEqual(got, want) {
		t.Errorf("Outbound.AllowNetworks = %v, want %v", got, want)
	}

	defaultSuspension := courier.Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour}
	defaultTimeoutOn := []courier.ErrorClass{"timeout", "connect_timeout", "connection_closed", "http_5xx"}
	defaultSuspendOn := []courier.ErrorClass{"dns", "connect_refused", "tls", "http_429"}
	common := func(name string, tr courier.Transport) courier.Endpoint {
		return courier.Endpoint{Name: name, Transport: tr, Timeout: 30 * time.Second, MaxConcurrency: 16,
			TimeoutOn: defaultTimeoutOn, SuspendOn: defaultSuspendOn, RetriesBeforeSuspension: 3,
			Suspension: defaultSuspension}
	}
	wantEndpoints := map[string]courier.Endpoint{}
	e := courier.Endpoint{Name: "acme-primary", Transport: courier.TransportHTTP, Timeout: 30 * time.Second,
		MaxConcurrency: 4, MinInterval: 10 * time.Second, Rate: courier.Rate{N: 100, Per: time.Second},
		TimeoutOn:               []courier.ErrorClass{"timeout", "connect_timeout"},
		SuspendOn:               []courier.ErrorClass{"dns", "connect_refused", "http_5xx"},
		PermanentClasses:        []courier.ErrorClass{"http_4xx"},
		RetriesBeforeSuspension: 3, Suspension: defaultSuspension,
		Settings: &httptransport.Settings{URL: "https://erp.acme.example/inbox", Method: "POST", Secrets: []string{"whsec_old", "whsec_new"}}}
	wantEndpoints[e.Name] = e
	e = common("acme-backup", courier.TransportHTTP)
	e.Settings = &httptransport.Settings{URL: "https://backup.acme.example/inbox", Method: "POST", AllowNetworks: []string{"10.20.0.0/16"},
		TLS: httptransport.TLS{Cert: "testdata/peppol-client.crt", Key: "testdata/peppol-client.key", CA: "testdata/peppol-ca.pem"}}
	wantEndpoints[e.Name] = e
	e = common("vans", courier.TransportFile)
	e.Settings = &filetransport.Settings{Dir: "./outbox/vans", Name: "{id}"}
	wantEndpoints[e.Name] = e
	e = common("ops-mail", courier.TransportSMTP)
	e.Settings = &smtptransport.Settings{Addr: "127.0.0.1:2525", From: "courier@example.org", To: []string{"ops@example.org"},
		Username: "courier", Password: "mail-pass", StartTLS: "auto"}
	wantEndpoints[e.Name] = e
	e = common("erp-mq", courier.TransportAMQP)
	e.Settings = &amqptransport.Settings{URL: "amqp://guest:rabbit@127.0.0.1:5672/", Exchange: "", RoutingKey: "erp.in"}
	wantEndpoints[e.Name] = e
	e = common("events", courier.TransportNATS)
	e.Settings = &natstransport.Settings{URL: "nats://127.0.0.1:4222", Subject: "courier.out"}
	wantEndpoints[e.Name] = e

	if got, want := len(c.Topology.Endpoints), len(wantEndpoints); got != want {
		t.Errorf("%d endpoints, want %d", got, want)
	}
	for name, want := range wantEndpoints {
		got := c.Topology.Endpoints[name]
		if got == nil {
			t.Errorf("endpoint %s is missing", name)
			continue
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("endpoint %s:\n got %+v\nwant %+v", name, *got, want)
		}
	}

	wantRoutes := map[string]*courier.Route{
		"acme": {Name: "acme", Endpoints: []string{"acme-primary", "acme-backup"}, Strategy: courier.StrategyFailover, OrderedOnFailure: courier.OrderedBlock},
		"vans": {Name: "vans", Endpoints: []string{"vans"}, Strategy: courier.StrategySingle, OrderedOnFailure: courier.OrderedBlock},
	}
	if !reflect.DeepEqual(c.Topology.Routes, wantRoutes) {
		t.Errorf("Routes:\n got %+v\nwant %+v", c.Topology.Routes, wantRoutes)
	}

	backoff := courier.Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour, Jitter: 0.2}
	wantPolicies := map[string]*courier.Policy{
		"default": {Name: "default", Backoff: backoff, MaxAttempts: 12, MaxAge: 48 * time.Hour, OnExhausted: courier.ExhaustedSuspend},
		"invoice": {
			Name:        "invoice",
			Backoff:     backoff,
			Schedule:    []time.Duration{time.Minute, 5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 4 * time.Hour, 8 * time.Hour, 8 * time.Hour, 8 * time.Hour},
			MaxAttempts: 10,
			MaxAge:      48 * time.Hour,
			Priority:    8,
			Escalate:    []courier.Escalation{{After: 24 * time.Hour, Notify: "ops-mail"}},
			Fallback:    &courier.Fallback{After: 48 * time.Hour, Route: "vans"},
			OnExhausted: courier.ExhaustedSuspend,
		},
	}
	for name, want := range wantPolicies {
		if got := c.Topology.Policies[name]; !reflect.DeepEqual(got, want) {
			t.Errorf("policy %s:\n got %+v\nwant %+v", name, got, want)
		}
	}
	if got, want := len(c.Topology.Policies), len(wantPolicies); got != want {
		t.Errorf("%d policies, want %d", got, want)
	}
	wantSubscriptions := map[string]*courier.Subscription{
		"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "acme", Headers: map[string]string{"X-Tenant": "acme"}},
	}
	if !reflect.DeepEqual(c.Topology.Subscriptions, wantSubscriptions) {
		t.Errorf("Subscriptions:\n got %+v\nwant %+v", c.Topology.Subscriptions, wantSubscriptions)
	}
	if got := c.Receivers["erp-queue"]; got == nil || got.AMQP.URL != "amqp://guest:"+exampleEnv["AMQP_PASSWORD"]+"@127.0.0.1:5672/" || got.OnError != courier.OnErrorSuspend {
		t.Errorf("receiver erp-queue: %+v", got)
	}
	if got, want := len(c.Receivers), 3; got != want {
		t.Errorf("%d receivers, want %d", got, want)
	}
	if got, want := c.Alerts, (courier.Alerts{Notify: []string{"ops-mail"}, OldestDue: 15 * time.Minute, MaxPerHour: 6}); !reflect.DeepEqual(got, want) {
		t.Errorf("Alerts = %+v, want %+v", got, want)
	}
}

func TestLoad(t *testing.T) {
	for name, v := range exampleEnv {
		t.Setenv(name, v)
	}
	c, err := Load("testdata/courier.yaml")
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	if got, want := httptransport.Of(c.Topology.Endpoints["acme-primary"]).Secrets, []string{"whsec_old", "whsec_new"}; !reflect.DeepEqual(got, want) {
		t.Errorf("secrets = %q, want %q", got, want)
	}

	t.Setenv("COURIER_LISTEN", "127.0.0.1:9999")
	c, err = Load("testdata/courier.yaml")
	if err != nil {
		t.Fatalf("Load:\n%v", err)
	}
	if got, want := c.Listen, "127.0.0.1:9999"; got != want {
		t.Errorf("Listen = %q, want %q (from COURIER_LISTEN)", got, want)
	}

	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load of a missing file: got %v, want an error wrapping os.ErrNotExist", err)
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	c := Default()
	checkDefaultServer(t, c)
	if c.File != "" || c.TLS != (TLS{}) || c.PublicURL != "" || len(c.Keys) != 0 || len(c.Outbound.AllowNetworks) != 0 {
		t.Errorf("Default sets optional fields: %+v", c)
	}
	if len(c.Topology.Endpoints) != 0 || len(c.Topology.Routes) != 0 {
		t.Errorf("Default topology is not empty: %+v", c.Topology)
	}
	if got, want := c.Topology.Policies, map[string]*courier.Policy{"default": courier.DefaultPolicy()}; !reflect.DeepEqual(got, want) {
		t.Errorf("Policies = %+v, want %+v", got, want)
	}
	if err := c.ApplyEnv(envOf(nil)); err != nil {
		t.Errorf("Default().ApplyEnv with no variables: %v", err)
	}

	// An empty file, or one with comments only, is the default configuration.
	for _, src := range []string{"", "# nothing yet\n", "---\n", "~\n"} {
		got := mustParse(t, src, nil)
		want := Default()
		want.File = "c.yaml"
		if got.Listen != want.Listen || got.Store != want.Store || got.MaxPayload != want.MaxPayload ||
			!reflect.DeepEqual(got.Topology, want.Topology) {
			t.Errorf("Parse(%q) = %+v, want the default", src, got)
		}
	}
}

func TestEndpointDefaults(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
endpoints:
  h: {transport: http, url: "http://127.0.0.1:9000/hook"}
  m: {transport: smtp, addr: "mail.example.org:25", from: a@example.org, to: [b@example.org]}
  f: {transport: file, dir: /var/spool/courier}
routes:
  one: {endpoints: [h]}
  two: {endpoints: [h, f]}
`, nil)
	h := c.Topology.Endpoints["h"]
	if h.Timeout != 30*time.Second || h.MaxConcurrency != 16 || h.MinInterval != 0 || !h.Rate.Unlimited() ||
		h.RetriesBeforeSuspension != 3 || h.PermanentClasses != nil || httptransport.Of(h).Method != "POST" || httptransport.Of(h).FollowRedirects {
		t.Errorf("http endpoint defaults: %+v", h)
	}
	if got, want := h.Suspension, (courier.Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour}); got != want {
		t.Errorf("suspension = %+v, want %+v", got, want)
	}
	if got := smtptransport.Of(c.Topology.Endpoints["m"]).StartTLS; got != "auto" {
		t.Errorf("starttls = %q, want auto", got)
	}
	if got := filetransport.Of(c.Topology.Endpoints["f"]).Name; got != "{id}" {
		t.Errorf("file name = %q, want {id}", got)
	}
	if got := c.Topology.Routes["one"].Strategy; got != courier.StrategySingle {
		t.Errorf("strategy of one endpoint = %q, want single", got)
	}
	if got := c.Topology.Routes["two"].Strategy; got != courier.StrategyFailover {
		t.Errorf("strategy of two endpoints = %q, want failover", got)
	}
}

// TestClaimCheck checks claim_check's values and defaults, on any
// transport.
func TestClaimCheck(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
public_url: https://courier.example.org/gw
endpoints:
  given: {transport: http, url: "https://a.example/in", claim_check: {above: 1MiB, ttl: 2h}}
  plain: {transport: http, url: "https://a.example/in", claim_check: {above: 5000}}
  defaults: {transport: amqp, url: "amqp://broker.example/", exchange: docs, claim_check: {}}
  empty: {transport: file, dir: out, claim_check: }
  none: {transport: file, dir: out}
routes:
  nemhandel:
    lookup: {url: "https://registry.example/{recipient}"}
    endpoint_template: {transport: http, claim_check: {above: 3MiB}}
`, nil)
	if got, want := c.Topology.Routes["nemhandel"].EndpointTemplate.ClaimCheck, (&courier.ClaimCheck{Above: 3 << 20, TTL: 24 * time.Hour}); !reflect.DeepEqual(got, want) {
		t.Errorf("template's ClaimCheck = %+v, want %+v", got, want)
	}
	tests := []struct {
		endpoint string
		want     *courier.ClaimCheck
	}{
		{"given", &courier.ClaimCheck{Above: 1 << 20, TTL: 2 * time.Hour}},
		{"plain", &courier.ClaimCheck{Above: 5000, TTL: 24 * time.Hour}},
		{"defaults", &courier.ClaimCheck{Above: 10 << 20, TTL: 24 * time.Hour}},
		{"empty", &courier.ClaimCheck{Above: 10 << 20, TTL: 24 * time.Hour}},
		{"none", nil},
	}
	for _, tt := range tests {
		if got := c.Topology.Endpoints[tt.endpoint].ClaimCheck; !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: ClaimCheck = %+v, want %+v", tt.endpoint, got, tt.want)
		}
	}

	// An endpoint held in the store is read without the server's
	// public_url, which is checked when a notice is made.
	o, err := DecodeObject(courier.KindEndpoint, "stored", []byte(`{"transport":"file","dir":"out","claim_check":{"above":"2MiB","ttl":"30m"}}`))
	if err != nil {
		t.Fatalf("DecodeObject: %v", err)
	}
	if got, want := o.Endpoint.ClaimCheck, (&courier.ClaimCheck{Above: 2 << 20, TTL: 30 * time.Minute}); !reflect.DeepEqual(got, want) {
		t.Errorf("stored endpoint's ClaimCheck = %+v, want %+v", got, want)
	}
}

func TestHealthLists(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fields      string
		wantTimeout []courier.ErrorClass
		wantSuspend []courier.ErrorClass
		wantPerm    []courier.ErrorClass
	}{
		{"defaults", "",
			[]courier.ErrorClass{"timeout", "connect_timeout", "connection_closed", "http_5xx"},
			[]courier.ErrorClass{"dns", "connect_refused", "tls", "http_429"}, nil},
		// Naming a class in one list takes it out of the other's default.
		{"suspend_on only", "suspend_on: [http_5xx]",
			[]courier.ErrorClass{"timeout", "connect_timeout", "connection_closed"},
			[]courier.ErrorClass{"http_5xx"}, nil},
		{"timeout_on only", "timeout_on: [http_429, timeout]",
			[]courier.ErrorClass{"http_429", "timeout"},
			[]courier.ErrorClass{"dns", "connect_refused", "tls"}, nil},
		{"empty permanent", "permanent: []",
			[]courier.ErrorClass{"timeout", "connect_timeout", "connection_closed", "http_5xx"},
			[]courier.ErrorClass{"dns", "connect_refused", "tls", "http_429"}, []courier.ErrorClass{}},
		{"both empty", "timeout_on: []\n    suspend_on: []", []courier.ErrorClass{}, []courier.ErrorClass{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := mustParse(t, "endpoints:\n  a:\n    transport: file\n    dir: out\n    "+tt.fields+"\n", nil)
			e := c.Topology.Endpoints["a"]
			if !reflect.DeepEqual(e.TimeoutOn, tt.wantTimeout) {
				t.Errorf("TimeoutOn = %q, want %q", e.TimeoutOn, tt.wantTimeout)
			}
			if !reflect.DeepEqual(e.SuspendOn, tt.wantSuspend) {
				t.Errorf("SuspendOn = %q, want %q", e.SuspendOn, tt.wantSuspend)
			}
			if !reflect.DeepEqual(e.PermanentClasses, tt.wantPerm) {
				t.Errorf("PermanentClasses = %#v, want %#v", e.PermanentClasses, tt.wantPerm)
			}
		})
	}
}

func TestPolicyInheritance(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
endpoints:
  mail: {transport: smtp, addr: "127.0.0.1:25", from: a@example.org, to: [b@example.org]}
  out: {transport: file, dir: out}
routes:
  backup: {endpoints: [out]}
policies:
  default:
    backoff: {initial: 1m, max: 2h}
    max_age: 72h
    priority: 3
    escalate: [{after: 12h, notify: mail}]
    fallback: {route: backup}
  order.created:
    backoff: {factor: 3}
  invoice:
    schedule: [1m, 10m]
    escalate: []
    fallback:
  bulk:
    max_attempts: 2
    priority: 0
    on_exhausted: discard
`, nil)
	p := c.Topology.Policies
	def := &courier.Policy{Name: "default",
		Backoff:     courier.Backoff{Initial: time.Minute, Factor: 2, Max: 2 * time.Hour, Jitter: 0.2},
		MaxAttempts: 12, MaxAge: 72 * time.Hour, Priority: 3,
		Escalate:    []courier.Escalation{{After: 12 * time.Hour, Notify: "mail"}},
		Fallback:    &courier.Fallback{Route: "backup"},
		OnExhausted: courier.ExhaustedSuspend}
	if !reflect.DeepEqual(p["default"], def) {
		t.Errorf("default:\n got %+v\nwant %+v", p["default"], def)
	}

	want := *def
	want.Name = "order.created"
	want.Backoff.Factor = 3
	if !reflect.DeepEqual(p["order.created"], &want) {
		t.Errorf("order.created:\n got %+v\nwant %+v", p["order.created"], &want)
	}

	want = *def
	want.Name = "invoice"
	want.Schedule = []time.Duration{time.Minute, 10 * time.Minute}
	want.MaxAttempts = 3
	want.Escalate = []courier.Escalation{}
	want.Fallback = nil
	if !reflect.DeepEqual(p["invoice"], &want) {
		t.Errorf("invoice:\n got %+v\nwant %+v", p["invoice"], &want)
	}

	want = *def
	want.Name = "bulk"
	want.MaxAttempts = 2
	want.Priority = 0
	want.OnExhausted = courier.ExhaustedDiscard
	if !reflect.DeepEqual(p["bulk"], &want) {
		t.Errorf("bulk:\n got %+v\nwant %+v", p["bulk"], &want)
	}

	// Policies do not share slices or fallbacks with the default policy.
	p["order.created"].Escalate[0].Notify = "changed"
	p["order.created"].Fallback.Route = "changed"
	if p["default"].Escalate[0].Notify != "mail" || p["default"].Fallback.Route != "backup" {
		t.Error("a policy shares its escalations or fallback with the default policy")
	}
}

func TestScheduleInheritance(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
policies:
  default:
    schedule: [1m, 5m, 10m]
  a: {priority: 1}
  b: {max_attempts: 4}
`, nil)
	p := c.Topology.Policies
	if got, want := p["a"].Schedule, []time.Duration{time.Minute, 5 * time.Minute, 10 * time.Minute}; !reflect.DeepEqual(got, want) || p["a"].MaxAttempts != 4 {
		t.Errorf("a: schedule %v, max_attempts %d; want %v and 4 from the default", got, p["a"].MaxAttempts, want)
	}
	// A policy that counts attempts itself retries by backoff.
	if p["b"].Schedule != nil || p["b"].MaxAttempts != 4 || p["b"].Backoff != courier.DefaultPolicy().Backoff {
		t.Errorf("b: %+v, want no schedule, 4 attempts and the default backoff", p["b"])
	}
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
endpoints:
  a: {transport: file, dir: a}
  b: {transport: file, dir: b}
  c: {transport: file, dir: c}
routes:
  spread: {endpoints: [a, b, c], strategy: weighted, weights: {a: 5, b: 1}}
  rr: {endpoints: [a, b], strategy: round_robin, ordered_on_failure: skip}
  one: {endpoints: [c], strategy: single}
  again: {endpoints: [a], redrive: {on_recovery: true, reasons: [exhausted, poison], max_age: 24h}}
  defaults: {endpoints: [b], redrive: {on_recovery: true}}
`, nil)
	want := map[string]*courier.Route{
		"again": {Name: "again", Endpoints: []string{"a"}, Strategy: courier.StrategySingle, OrderedOnFailure: courier.OrderedBlock,
			Redrive: &courier.Redrive{OnRecovery: true, Reasons: []courier.Reason{courier.ReasonExhausted, courier.ReasonPoison}, MaxAge: 24 * time.Hour}},
		"defaults": {Name: "defaults", Endpoints: []string{"b"}, Strategy: courier.StrategySingle, OrderedOnFailure: courier.OrderedBlock,
			Redrive: &courier.Redrive{OnRecovery: true, Reasons: []courier.Reason{courier.ReasonExhausted, courier.ReasonExpired}, MaxAge: 72 * time.Hour}},
		"spread": {Name: "spread", Endpoints: []string{"a", "b", "c"}, Strategy: courier.StrategyWeighted,
			Weights: map[string]int{"a": 5, "b": 1}, OrderedOnFailure: courier.OrderedBlock},
		"rr":  {Name: "rr", Endpoints: []string{"a", "b"}, Strategy: courier.StrategyRoundRobin, OrderedOnFailure: courier.OrderedSkip},
		"one": {Name: "one", Endpoints: []string{"c"}, Strategy: courier.StrategySingle, OrderedOnFailure: courier.OrderedBlock},
	}
	if !reflect.DeepEqual(c.Topology.Routes, want) {
		t.Errorf("Routes:\n got %+v\nwant %+v", c.Topology.Routes, want)
	}
}

func TestTargets(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
endpoints:
  h:
    transport: http
    url: https://hooks.example.org/in
    method: PUT
    follow_redirects: true
    allow_networks: [10.1.2.3/8, "fd00::/8"]
    rate: 5000/m
  m: {transport: smtp, addr: "smtp.example.org:587", from: "Courier <c@example.org>", to: [a@example.org, b@example.org], starttls: always}
  f: {transport: file, dir: out, name: "{type}-{id}.xml"}
  q: {transport: amqp, url: "amqps://broker.example.org/vhost", exchange: docs}
  n: {transport: nats, url: "nats://a:4222, tls://b:4222", subject: out.docs}
`, nil)
	e := c.Topology.Endpoints
	if got, want := e["h"].Settings, courier.Settings(&httptransport.Settings{URL: "https://hooks.example.org/in", Method: "PUT", FollowRedirects: true,
		AllowNetworks: []string{"10.0.0.0/8", "fd00::/8"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("http:\n got %+v\nwant %+v", got, want)
	}
	if got, want := e["h"].Rate, (courier.Rate{N: 5000, Per: time.Minute}); got != want {
		t.Errorf("rate = %+v, want %+v", got, want)
	}
	if got, want := e["m"].Settings, courier.Settings(&smtptransport.Settings{Addr: "smtp.example.org:587", From: "Courier <c@example.org>",
		To: []string{"a@example.org", "b@example.org"}, StartTLS: "always"}); !reflect.DeepEqual(got, want) {
		t.Errorf("smtp:\n got %+v\nwant %+v", got, want)
	}
	if got, want := e["f"].Settings, courier.Settings(&filetransport.Settings{Dir: "out", Name: "{type}-{id}.xml"}); !reflect.DeepEqual(got, want) {
		t.Errorf("file = %+v, want %+v", got, want)
	}
	if got, want := e["q"].Settings, courier.Settings(&amqptransport.Settings{URL: "amqps://broker.example.org/vhost", Exchange: "docs"}); !reflect.DeepEqual(got, want) {
		t.Errorf("amqp = %+v, want %+v", got, want)
	}
	if got, want := e["n"].Settings, courier.Settings(&natstransport.Settings{URL: "nats://a:4222, tls://b:4222", Subject: "out.docs"}); !reflect.DeepEqual(got, want) {
		t.Errorf("nats = %+v, want %+v", got, want)
	}
}

func TestMergeKeys(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
endpoints:
  a: &polite {transport: http, url: "https://a.example/", max_concurrency: 2, min_interval: 10s}
  b:
    <<: *polite
    url: https://b.example/
`, nil)
	b := c.Topology.Endpoints["b"]
	if httptransport.Of(b).URL != "https://b.example/" || b.MaxConcurrency != 2 || b.MinInterval != 10*time.Second {
		t.Errorf("merged endpoint: %+v", b)
	}

	// Several mappings merge in order: the first one that has a key wins.
	c = mustParse(t, `
endpoints:
  a: &slow {transport: file, dir: a, timeout: 2m}
  b: &small {transport: file, dir: b, max_concurrency: 1, timeout: 5s}
  c: {<<: [*slow, *small], dir: c}
`, nil)
	e := c.Topology.Endpoints["c"]
	if filetransport.Of(e).Dir != "c" || e.Timeout != 2*time.Minute || e.MaxConcurrency != 1 {
		t.Errorf("endpoint merged from two: %+v", e)
	}
}

func TestAutoConcurrency(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
endpoints:
  a: {transport: file, dir: a, max_concurrency: auto}
  b: {transport: file, dir: b, max_concurrency: auto, max_concurrency_ceiling: 200}
  c: {transport: file, dir: c, max_concurrency: 4}
  d: {transport: file, dir: d, max_concurrency: auto, suspend_on: [http_429]}
routes:
  nh:
    lookup: {url: "https://registry.example/lookup?p={recipient}"}
    endpoint_template: {max_concurrency: auto, max_concurrency_ceiling: 10}
`, nil)
	tests := []struct {
		name string
		e    *courier.Endpoint
		auto bool
		max  int
	}{
		{"auto", c.Topology.Endpoints["a"], true, courier.DefaultConcurrencyCeiling},
		{"auto with a ceiling", c.Topology.Endpoints["b"], true, 200},
		{"fixed", c.Topology.Endpoints["c"], false, 4},
		{"template", c.Topology.Routes["nh"].EndpointTemplate, true, 10},
	}
	for _, tt := range tests {
		if tt.e.AutoConcurrency != tt.auto || tt.e.MaxConcurrency != tt.max {
			t.Errorf("%s: auto %v, max_concurrency %d; want %v, %d", tt.name, tt.e.AutoConcurrency, tt.e.MaxConcurrency, tt.auto, tt.max)
		}
	}
	// With auto, a 429 cuts the limit instead of suspending the endpoint,
	// unless suspend_on names it.
	for name, want := range map[string]bool{"a": false, "c": true, "d": true} {
		if got := slices.Contains(c.Topology.Endpoints[name].SuspendOn, courier.ClassHTTP429); got != want {
			t.Errorf("endpoint %s suspends on http_429: %v, want %v", name, got, want)
		}
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	env := envOf(map[string]string{"A": "x", "EMPTY": "", "B_2": "y$z"})
	tests := []struct {
		in, want, err string
	}{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "x"},
		{in: "pre-${A}-${B_2}-post", want: "pre-x-y$z-post"},
		{in: "${EMPTY}", want: ""},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "pa$word", want: "pa$word"},
		{in: "cost: 5$", want: "cost: 5$"},
		{in: "${MISSING}", err: "environment variable MISSING is not set"},
		{in: "${A", err: "unterminated ${ (write $$ for a literal $)"},
		{in: "${}", err: "${} is not a valid variable reference: use letters, digits and _, not starting with a digit"},
		{in: "${1A}", err: "${1A} is not a valid variable reference: use letters, digits and _, not starting with a digit"},
	}
	for _, tt := range tests {
		got, err := expand(tt.in, env)
		switch {
		case tt.err != "" && (err == nil || err.Error() != tt.err):
			t.Errorf("expand(%q): error %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("expand(%q): %v", tt.in, err)
		case tt.err == "" && got != tt.want:
			t.Errorf("expand(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestExpandEverywhere(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `
listen: ${HOST}:${PORT}
max_payload: ${PAYLOAD}
endpoints:
  a: {transport: http, url: "https://${HOST}/in", max_concurrency: "${CONC}", timeout_on: ["${CLASS}"]}
`, map[string]string{"HOST": "127.0.0.1", "PORT": "9000", "PAYLOAD": "2MiB", "CONC": "3", "CLASS": "timeout"})
	a := c.Topology.Endpoints["a"]
	if c.Listen != "127.0.0.1:9000" || c.MaxPayload != 2<<20 || httptransport.Of(a).URL != "https://127.0.0.1/in" ||
		a.MaxConcurrency != 3 || !reflect.DeepEqual(a.TimeoutOn, []courier.ErrorClass{"timeout"}) {
		t.Errorf("expansion: listen %q, max_payload %d, endpoint %+v", c.Listen, c.MaxPayload, a)
	}
}

func TestApplyEnv(t *testing.T) {
	t.Parallel()
	c := Default()
	err := c.ApplyEnv(envOf(map[string]string{
		"COURIER_LISTEN":          "0.0.0.0:9000",
		"COURIER_RETENTION":       "24h",
		"COURIER_MAX_PAYLOAD":     "2MiB",
		"COURIER_MAX_BATCH_BYTES": "64MB",
		"COURIER_PUBLIC_URL":      "https://courier.example.org",
		"COURIER_STORE_DRIVER":    "postgres",
		"COURIER_STORE_PATH":      "/data/courier.db",
		"COURIER_STORE_DSN":       "postgres://courier@db/courier",
		"COURIER_LOG_FORMAT":      "json",
		"COURIER_LOG_LEVEL":       "debug",
		"COURIER_TLS_CERT":        "/tls/crt",
		"COURIER_TLS_KEY":         "/tls/key",
		"COURIER_UNRELATED":       "x",
	}))
	if err != nil {
		t.Fatalf("ApplyEnv: %v", err)
	}
	if c.Listen != "0.0.0.0:9000" || c.Retention != 24*time.Hour || c.MaxPayload != 2<<20 || c.MaxBatchBytes != 64e6 ||
		c.PublicURL != "https://courier.example.org" ||
		c.Store != (Store{Driver: "postgres", Path: "/data/courier.db", DSN: "postgres://courier@db/courier"}) ||
		c.Log != (Log{Format: "json", Level: "debug"}) || c.TLS != (TLS{Cert: "/tls/crt", Key: "/tls/key"}) {
		t.Errorf("after ApplyEnv: %+v", c)
	}

	// The environment wins over the file; a blank variable changes nothing.
	c = mustParse(t, "listen: 127.0.0.1:1000\nlog: {level: warn}\n", map[string]string{
		"COURIER_LISTEN": "127.0.0.1:2000", "COURIER_LOG_LEVEL": ""})
	if c.Listen != "127.0.0.1:2000" || c.Log.Level != "warn" {
		t.Errorf("listen %q, log level %q; want 127.0.0.1:2000 and warn", c.Listen, c.Log.Level)
	}
}

func TestApplyEnvErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		file string // "" for Default()
		env  map[string]string
		want []string
	}{
		{"bad duration", "", map[string]string{"COURIER_RETENTION": "7d"},
			[]string{`COURIER_RETENTION: "7d" is not a duration: write a Go duration such as 30s, 5m or 48h`}},
		{"negative duration", "", map[string]string{"COURIER_RETENTION": "-1h"},
			[]string{`COURIER_RETENTION: duration -1h must not be negative`}},
		{"zero retention", "", map[string]string{"COURIER_RETENTION": "0s"},
			[]string{`COURIER_RETENTION: retention: must be greater than 0`}},
		{"zero shutdown timeout", "", map[string]string{"COURIER_SHUTDOWN_TIMEOUT": "0s"},
			[]string{`COURIER_SHUTDOWN_TIMEOUT: shutdown_timeout: must be greater than 0`}},
		{"bad size", "", map[string]string{"COURIER_MAX_PAYLOAD": "1 megabyte"},
			[]string{`COURIER_MAX_PAYLOAD: "1 megabyte" is not a size: the unit must be one of B, KiB, MiB, GiB, TiB, KB, MB, GB or TB`}},
		{"payload over the ceiling", "", map[string]string{"COURIER_MAX_PAYLOAD": "2GiB"},
			[]string{`COURIER_MAX_PAYLOAD: max_payload: must be at most 1GiB`}},
		{"postgres without dsn", "", map[string]string{"COURIER_STORE_DRIVER": "postgres"},
			[]string{`COURIER_STORE_DRIVER: store.dsn: required with driver postgres: postgres://user:password@host/db`}},
		{"bad driver", "", map[string]string{"COURIER_STORE_DRIVER": "mysql"},
			[]string{`COURIER_STORE_DRIVER: store.driver: must be sqlite or postgres, not "mysql"`}},
		{"bad listen", "", map[string]string{"COURIER_LISTEN": "localhost"},
			[]string{`COURIER_LISTEN: listen: "localhost" is not host:port`}},
		{"bad log", "", map[string]string{"COURIER_LOG_FORMAT": "xml", "COURIER_LOG_LEVEL": "trace"},
			[]string{`COURIER_LOG_FORMAT: log.format: must be text or json, not "xml"`,
				`COURIER_LOG_LEVEL: log.level: must be debug, info, warn or error, not "trace"`}},
		{"cert without key", "", map[string]string{"COURIER_TLS_CERT": "a.crt"},
			[]string{`COURIER_TLS_CERT: tls.key: required when tls.cert is set`}},
		{"bad public url", "", map[string]string{"COURIER_PUBLIC_URL": "courier.example.org"},
			[]string{`COURIER_PUBLIC_URL: public_url: must be an absolute http or https URL`}},
		// With a file, the problem points at the variable when it set the
		// value, and at the file's line when the file did.
		{"env over file", "store: {driver: postgres, dsn: \"postgres://db/c\"}\n", map[string]string{"COURIER_STORE_DSN": "db=c"},
			[]string{`COURIER_STORE_DSN: store.dsn: must be a URL starting with postgres:// or postgresql://`}},
		{"file and env", "tls:\n  key: a.key\n", map[string]string{"COURIER_MAX_PAYLOAD": "x"},
			[]string{`c.yaml:2: tls.cert: required when tls.key is set`, `COURIER_MAX_PAYLOAD: "x" is not a size: write a whole number of bytes, or one with a unit such as 512KiB, 1MiB, 1GiB or 10MB`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var err error
			if tt.file == "" {
				err = Default().ApplyEnv(envOf(tt.env))
			} else {
				_, err = Parse("c.yaml", []byte(tt.file), envOf(tt.env))
			}
			wantErrorLines(t, err, tt.want)
		})
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64
	}{
		{"1048576", 1 << 20},
		{"0", 0},
		{"512KiB", 512 << 10},
		{"1MiB", 1 << 20},
		{"32MiB", 32 << 20},
		{"1GiB", 1 << 30},
		{"2TiB", 2 << 40},
		{"10KB", 10000},
		{"5MB", 5000000},
		{"1GB", 1e9},
		{"100B", 100},
		{"1 MiB", 1 << 20},
		{"1mib", 1 << 20},
	}
	for _, tt := range tests {
		if got, err := ParseSize(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
	for _, in := range []string{"", "MiB", "-1MiB", "1.5MiB", "1M", "1 Mi B", "9223372036854775807KiB", "99999999999999999999"} {
		if got, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", in, got)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{File: "c.yaml", Line: 12, Field: "endpoints.acme.url", Message: "must be an absolute http or https URL"},
			"c.yaml:12: endpoints.acme.url: must be an absolute http or https URL"},
		{&Error{File: "c.yaml", Line: 3, Message: "YAML syntax: did not find expected key"}, "c.yaml:3: YAML syntax: did not find expected key"},
		{&Error{Field: "COURIER_LISTEN", Message: "bad"}, "COURIER_LISTEN: bad"},
		{&Error{Line: 4, Field: "listen", Message: "bad"}, "line 4: listen: bad"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	es := Errors{tests[0].err, tests[2].err}
	if got, want := es.Error(), tests[0].want+"\n"+tests[2].want; got != want {
		t.Errorf("Errors.Error() = %q, want %q", got, want)
	}
	var e *Error
	if !errors.As(error(es), &e) || e != tests[0].err {
		t.Errorf("errors.As does not reach the first *Error")
	}
}

func TestReceivers(t *testing.T) {
	c := mustParse(t, `
endpoints: {a: {transport: file, dir: /out}}
routes: {acme: {endpoints: [a]}}
receivers:
  erp-queue:
    transport: amqp
    url: amqp://guest:guest@127.0.0.1:5672/
    queue: erp.outbound
    type: invoice
    route: acme
    id_header: message-id
    ordering_key_header: x-customer
    batch: 50
    on_error: stop
  events:
    transport: nats
    url: nats://127.0.0.1:4222
    stream: ORDERS
    type_header: x-type
    route_header: x-route
  drop:
    transport: dir
    path: /srv/in
    pattern: "*.xml"
    done_marker: true
    type: invoice
    route: acme
`, nil)
	want := map[string]*courier.Receiver{
		"erp-queue": {Name: "erp-queue", Transport: courier.ReceiveAMQP,
			AMQP: courier.AMQPSource{URL: "amqp://guest:guest@127.0.0.1:5672/", Queue: "erp.outbound"},
			Type: "invoice", Route: "acme", IDHeader: "message-id", OrderingKeyHeader: "x-customer",
			Batch: 50, OnError: courier.OnErrorStop},
		"events": {Name: "events", Transport: courier.ReceiveNATS,
			NATS:       courier.NATSSource{URL: "nats://127.0.0.1:4222", Stream: "ORDERS", Consumer: "events"},
			TypeHeader: "x-type", RouteHeader: "x-route", Batch: courier.DefaultReceiveBatch, OnError: courier.OnErrorSuspend},
		"drop": {Name: "drop", Transport: courier.ReceiveDir,
			Dir:  courier.DirSource{Path: "/srv/in", Pattern: "*.xml", Settle: time.Second, DoneMarker: true},
			Type: "invoice", Route: "acme", Batch: courier.DefaultReceiveBatch, OnError: courier.OnErrorSuspend},
	}
	if !reflect.DeepEqual(c.Receivers, want) {
		for name, r := range c.Receivers {
			t.Errorf("%s: got %+v\nwant %+v", name, r, want[name])
		}
	}
}

func TestWorkflowRoute(t *testing.T) {
	c := mustParse(t, `
endpoints:
  accounts: {transport: http, url: "https://accounts.example/check"}
  packages: {transport: http, url: "https://packages.example/"}
  packages-cancel: {transport: http, url: "https://packages.example/cancel"}
routes:
  schedule-delivery:
    workflow:
      - {endpoint: accounts, compensate: null}
      - {endpoint: packages, compensate: packages-cancel}
    envelope: true
    compensation_policy: undo
policies:
  undo: {backoff: {initial: 1s, max: 1m}, max_age: 24h}
`, nil)
	r := c.Topology.Routes["schedule-delivery"]
	want := &courier.Workflow{Steps: []courier.WorkflowStep{{Endpoint: "accounts"}, {Endpoint: "packages", Compensate: "packages-cancel"}},
		Envelope: true, CompensationPolicy: "undo"}
	if r == nil || !reflect.DeepEqual(r.Workflow, want) || len(r.Endpoints) != 0 {
		t.Fatalf("route %+v, workflow %+v", r, r.Workflow)
	}
	step := c.Topology.Route(courier.StepRoute("schedule-delivery", 2))
	undo := c.Topology.Route(courier.UndoRoute("schedule-delivery", 2))
	if step == nil || step.Endpoints[0] != "packages" || undo == nil || undo.Endpoints[0] != "packages-cancel" ||
		c.Topology.Route(courier.UndoRoute("schedule-delivery", 1)) != nil || c.Topology.Route(courier.StepRoute("schedule-delivery", 3)) != nil {
		t.Fatalf("implicit routes: step 2 %+v, undo 2 %+v", step, undo)
	}
}

// TestLookupRoute reads the route nemhandel of everything, whose
// endpoints a lookup names.
func TestLookupRoute(t *testing.T) {
	c := mustParse(t, everything, everythingEnv)
	r := c.Topology.Routes["nemhandel"]
	if r == nil || r.Lookup == nil || r.EndpointTemplate == nil {
		t.Fatalf("route %+v", r)
	}
	want := courier.Lookup{URL: "https://registry.example/lookup?participant={recipient}&doctype={type}", Timeout: 10 * time.Second,
		CacheTTL: 5 * time.Minute, NegativeTTL: time.Minute}
	if *r.Lookup != want {
		t.Fatalf("lookup %+v, want %+v", *r.Lookup, want)
	}
	if e := r.EndpointTemplate; e.Transport != courier.TransportHTTP || e.Timeout != 30*time.Second || e.MinInterval != 10*time.Second ||
		e.MaxConcurrency != 16 || httptransport.Of(e).Method != "POST" {
		t.Fatalf("template %+v", e)
	}
	if got := r.Lookup.LookupURL("0088:5798000000001", "invoice"); got != "https://registry.example/lookup?participant=0088%3A5798000000001&doctype=invoice" {
		t.Fatalf("LookupURL = %s", got)
	}
}

func TestSubscriptions(t *testing.T) {
	t.Parallel()
	// everything has subscriptions with and without filters, their types
	// in either form of a YAML list.
	c := mustParse(t, everything, everythingEnv)
	want := map[string]*courier.Subscription{
		"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "spread",
			Headers: map[string]string{"X-Tenant": "acme", "X-Region": "eu", "X-Empty": "", "X-Price": "5$"}},
		"signups":  {Name: "signups", Types: []string{"customer.created", "customer.reopened"}, Route: "onboard"},
		"invoices": {Name: "invoices", Types: []string{"invoice", "invoice.credit-note"}, Route: "nemhandel"},
	}
	if got := c.Topology.Subscriptions; !reflect.DeepEqual(got, want) {
		for name, s := range got {
			t.Errorf("%s:\n got %+v\nwant %+v", name, s, want[name])
		}
		t.Errorf("%d subscriptions, want %d", len(got), len(want))
	}

	// Without the section there are none, and the map is there to read.
	c = mustParse(t, "listen: 127.0.0.1:1\n", nil)
	if got := c.Topology.Subscriptions; got == nil || len(got) != 0 {
		t.Errorf("Subscriptions without the section = %#v, want an empty map", got)
	}
}

// A bucket for the blobs, on either driver: the secret key from the
// environment, the upload grace an hour unless given.
func TestBlobS3(t *testing.T) {
	t.Parallel()
	c := mustParse(t, lines(
		"store:",
		"  driver: postgres",
		"  dsn: postgres://courier@db/courier",
		"  blob_s3:",
		"    endpoint: https://s3.eu-west-1.amazonaws.com",
		"    bucket: courier-blobs",
		"    prefix: prod/",
		"    region: eu-west-1",
		"    access_key: AKIAEXAMPLE",
		"    secret_key: ${S3_SECRET_KEY}",
	), map[string]string{"S3_SECRET_KEY": "s3cr3t"})
	want := BlobS3{Endpoint: "https://s3.eu-west-1.amazonaws.com", Bucket: "courier-blobs", Prefix: "prod/", Region: "eu-west-1",
		AccessKey: "AKIAEXAMPLE", SecretKey: "s3cr3t", UploadGrace: time.Hour}
	if got := c.Store.BlobS3; got != want {
		t.Errorf("BlobS3 = %+v, want %+v", got, want)
	}

	c = mustParse(t, "store: {blob_s3: {endpoint: 'http://127.0.0.1:7070', bucket: blobs, access_key: a, secret_key: s, upload_grace: 0s}}\n", nil)
	if got, want := c.Store, (Store{Driver: "sqlite", Path: "./courier-data/courier.db",
		BlobS3: BlobS3{Endpoint: "http://127.0.0.1:7070", Bucket: "blobs", AccessKey: "a", SecretKey: "s"}}); got != want {
		t.Errorf("Store = %+v, want %+v", got, want)
	}
}
