package config

import (
	"errors"
	"os"
	"testing"

	"github.com/courier-gw/courier"
)

// FuzzParse feeds Parse arbitrary files. It must never panic; every problem
// it reports must point at a line of the file, the same way every time; what
// it accepts must hang together (every reference resolves, the default
// policy exists); and its topology must come back whole from its specs, as
// the store would hold them.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("testdata/courier.yaml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	for _, seed := range []string{
		"",
		"listen: 127.0.0.1:8425\n",
		"lisen: x\n",
		"a: [b,\n",
		"endpoints:\n  a: {transport: http, url: https://${HOST}/}\nroutes:\n  r: {endpoints: [a, b]}\n",
		"endpoints:\n  a: &x {transport: file, dir: out}\n  b:\n    <<: *x\n    name: '{id}.xml'\n",
		"endpoints:\n  a: &x {<<: *x}\n",
		"policies:\n  default: {schedule: [1m]}\n  invoice: {max_attempts: 0, fallback: {route: r}}\n",
		"keys:\n  k: {role: sender, hash: 'sha256:00', routes: [r]}\n",
		"store: {driver: postgres}\nmax_payload: 1GiB\n",
		"- a\n- b\n",
		"a: 1\n---\nb: 2\n",
		"x: *y\n",
		"\xff\xfe",
		"listen: $${X}\npublic_url: http://${X}/\n",
		"routes: {r: {endpoints: [a]}}\nsubscriptions:\n  s: {types: [a.*, b], route: r, filter: {headers: {X-A: '1'}}}\n",
		"endpoints:\n  a: {transport: file, dir: \"a\\x7f\\N\\u2028$$b\", max_concurrency: 010}\n",
		"policies:\n  default: {backoff: {initial: 1s, max: 5s}}\n  a: {backoff: {max: 2s, factor: 1.50}}\n",
	} {
		f.Add([]byte(seed))
	}
	env := envOf(map[string]string{"X": "x", "HOST": "example.org", "ACME_SECRET": "s", "SMTP_PASSWORD": "p", "AMQP_PASSWORD": "a"})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("f.yaml", data, env)
		if _, again := Parse("f.yaml", data, env); (err == nil) != (again == nil) || (err != nil && err.Error() != again.Error()) {
			t.Fatalf("Parse is not deterministic:\n%v\n----\n%v", err, again)
		}
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty Errors", err, err)
			}
			for _, e := range es {
				if e.Line <= 0 || e.File != "f.yaml" {
					t.Errorf("problem without a place in the file: %#v", e)
				}
			}
			return
		}
		checkTopology(t, c.Topology)
		checkRoundTrip(t, c)
	})
}

// checkTopology fails t when an accepted topology refers to something that
// is not there.
func checkTopology(t *testing.T, top *courier.Topology) {
	t.Helper()
	if top.Policies[courier.DefaultPolicyName] == nil {
		t.Fatal("no default policy")
	}
	for name, r := range top.Routes {
		if len(r.Endpoints) == 0 {
			t.Errorf("route %s has no endpoints", name)
		}
		for _, e := range r.Endpoints {
			if top.Endpoints[e] == nil {
				t.Errorf("route %s uses undefined endpoint %s", name, e)
			}
		}
	}
	for name, p := range top.Policies {
		if p.Name != name || p.MaxAttempts < 1 || p.MaxAge <= 0 || p.Backoff.Initial <= 0 || p.Backoff.Max < p.Backoff.Initial {
			t.Errorf("policy %s is not valid: %+v", name, p)
		}
		if p.Fallback != nil && top.Routes[p.Fallback.Route] == nil {
			t.Errorf("policy %s falls back to undefined route %s", name, p.Fallback.Route)
		}
		for _, e := range p.Escalate {
			if top.Endpoints[e.Notify] == nil {
				t.Errorf("policy %s notifies undefined endpoint %s", name, e.Notify)
			}
		}
	}
	for name, s := range top.Subscriptions {
		if s.Name != name || len(s.Types) == 0 || top.Routes[s.Route] == nil {
			t.Errorf("subscription %s is not valid: %+v", name, s)
		}
		for _, p := range s.Types {
			if !courier.ValidTypePattern(p) {
				t.Errorf("subscription %s has type %q", name, p)
			}
		}
		for k, v := range s.Headers {
			if !courier.ValidHeaderName(k) || !courier.ValidHeaderValue(v) {
				t.Errorf("subscription %s filters on header %q: %q", name, k, v)
			}
		}
	}
	for name, e := range top.Endpoints {
		if e.Name != name || e.Timeout <= 0 || e.MaxConcurrency < 1 {
			t.Errorf("endpoint %s is not valid: %+v", name, e)
		}
	}
}
