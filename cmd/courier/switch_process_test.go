package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// healthBound is how long after a switch's commit another node may still
// start an attempt by the health it read before (the engine's
// healthMaxAge): waited out, it is a bound the nodes keep, not a guess of
// how long something takes.
const healthBound = 100 * time.Millisecond

// switchRounds switches the endpoint crm off and on in rounds, through the
// API of the nodes in turn, with a message sent right after each switch
// off; the receiver must never see it while crm is off. Each round: a
// message delivered while crm is on; crm switched off through one node;
// a message for crm sent through another (after healthBound when that is
// another node), then one for erp, which is on: once erp's has arrived,
// crm's is still queued with no attempt, and nothing came for it; crm
// switched on: its message arrives, with one attempt that started after
// the switch on was asked for.
func switchRounds(t *testing.T, sk *sink.Sink, nodes []*process, rounds int, prefix string) {
	t.Helper()
	ctx := context.Background()
	crm0, erp0 := sk.Count("/crm"), sk.Count("/erp")
	deadline := func() time.Time { return time.Now().Add(30 * time.Second) }
	send := func(p *process, id, route string) {
		t.Helper()
		p.create(t, id, fmt.Sprintf(`{"type":"order","route":%q,"payload":{"id":%q}}`, route, id))
	}
	arrived := func(p *process, path string, n int) {
		t.Helper()
		wctx, cancel := context.WithDeadline(ctx, deadline())
		defer cancel()
		if err := sk.Wait(wctx, path, n); err != nil {
			t.Fatalf("%d requests at %s, want %d: %v\n%s", sk.Count(path), path, n, err, p.log())
		}
	}
	for i := range rounds {
		a, b := nodes[i%len(nodes)], nodes[(i+1)%len(nodes)]
		ca, cb := api.NewClient(a.url, ""), api.NewClient(b.url, "")
		send(a, fmt.Sprintf("%s-on-%d", prefix, i), "crm")
		arrived(a, "/crm", crm0+2*i+1)

		if ep, err := ca.SwitchEndpoint(ctx, "crm", false); err != nil || ep.State != courier.HealthOff {
			t.Fatalf("round %d: switch off: %+v, %v", i, ep, err)
		}
		if a != b {
			time.Sleep(healthBound)
		}
		held := fmt.Sprintf("%s-held-%d", prefix, i)
		send(b, held, "crm")
		send(b, fmt.Sprintf("%s-erp-%d", prefix, i), "erp")
		arrived(b, "/erp", erp0+i+1)
		m, err := cb.Message(ctx, held)
		if err != nil {
			t.Fatal(err)
		}
		if n := sk.Count("/crm"); n != crm0+2*i+1 || m.State != courier.StateQueued || m.Attempts != 0 {
			t.Fatalf("round %d: with crm off, %d requests at /crm (want %d) and %s is %s after %d attempts (want queued, none)\n%s",
				i, n, crm0+2*i+1, held, m.State, m.Attempts, b.log())
		}

		asked := time.Now()
		if ep, err := cb.SwitchEndpoint(ctx, "crm", true); err != nil || ep.State != courier.HealthActive {
			t.Fatalf("round %d: switch on: %+v, %v", i, ep, err)
		}
		arrived(b, "/crm", crm0+2*i+2)
		waitForState(t, b, cb, held, courier.StateDelivered, deadline())
		attempts, err := cb.Attempts(ctx, held)
		if err != nil {
			t.Fatal(err)
		}
		if len(attempts) != 1 || attempts[0].StartedAt.Before(asked) {
			t.Fatalf("round %d: %s had attempts %+v; want one, started after the switch on was asked for at %s", i, held, attempts, asked)
		}
	}
}

// switchConfig is the endpoints and routes of the switch tests.
func switchConfig(sinkURL string) string {
	return fmt.Sprintf(`endpoints:
  crm: {transport: http, url: "%[1]s/crm", timeout: 5s}
  erp: {transport: http, url: "%[1]s/erp", timeout: 5s}
routes:
  crm: {endpoints: [crm]}
  erp: {endpoints: [erp]}
`, sinkURL)
}

// An endpoint switched off through the API takes no attempt from the
// moment the switch is answered: a message sent right after waits for it.
func TestSwitchOffHoldsAtOnce(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{})
	p := startNode(t, t.TempDir(), switchConfig(sk.URL()))
	switchRounds(t, sk, []*process{p}, 15, "sqlite")
}

// On PostgreSQL the same, on one node; then with a second node on the same
// database, which obeys a switch made through the first within
// healthBound.
func TestSwitchOffHoldsAtOnceOnPostgres(t *testing.T) {
	skipIfShort(t)
	dsn, _ := pgtest.SchemaDSN(t)
	sk := sink.MustStart(t, sink.Options{})
	first := startPostgresNode(t, dsn, switchConfig(sk.URL()))
	switchRounds(t, sk, []*process{first}, 10, "one-node")
	switchRounds(t, sk, []*process{first, startPostgresNode(t, dsn, switchConfig(sk.URL()))}, 10, "two-nodes")
}

// courier endpoints off and on switch every endpoint their filter flags
// select, in one request, and say which; the audit names the filter.
func TestEndpointsSwitchByFilter(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{})
	p := startNode(t, t.TempDir(), fmt.Sprintf(`endpoints:
  crm-eu: {transport: http, url: "%[1]s/crm-eu"}
  crm-us: {transport: http, url: "%[1]s/crm-us"}
  erp: {transport: http, url: "%[1]s/erp"}
routes:
  crm: {endpoints: [crm-eu, crm-us]}
  erp: {endpoints: [erp]}
`, sk.URL()))
	run := func(wantErr bool, args ...string) string {
		t.Helper()
		out, err := exec.Command(courierBin, append([]string{"--server", p.url}, args...)...).CombinedOutput()
		if (err != nil) != wantErr {
			t.Fatalf("courier %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	out := run(false, "endpoints", "off", "--prefix", "crm-", "--transport", "http")
	for _, want := range []string{"endpoint crm-eu is off", "endpoint crm-us is off", "2 endpoints switched off"} {
		if !strings.Contains(out, want) {
			t.Errorf("endpoints off --prefix crm-: %q lacks %q", out, want)
		}
	}
	if strings.Contains(out, "erp") {
		t.Errorf("endpoints off --prefix crm- switched erp: %q", out)
	}
	c := api.NewClient(p.url, "")
	eps, err := c.Endpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range eps {
		if want := map[bool]courier.HealthState{true: courier.HealthOff, false: courier.HealthActive}[strings.HasPrefix(e.Name, "crm-")]; e.State != want {
			t.Errorf("%s is %s, want %s", e.Name, e.State, want)
		}
	}
	if out := run(false, "endpoints", "show", "crm-eu"); !strings.Contains(out, "endpoint_off by local") {
		t.Errorf("endpoints show crm-eu: %q lacks the switch", out)
	}
	if out := run(false, "audit", "-o", "json"); !strings.Contains(out, "by filter name_prefix=crm- transport=http") {
		t.Errorf("the audit does not name the filter: %s", out)
	}
	if out := run(false, "endpoints", "on", "--state", "off", "--host", "127.0.0.1"); !strings.Contains(out, "2 endpoints switched on") {
		t.Errorf("endpoints on --state off: %q", out)
	}
	if out := run(false, "endpoints", "on", "--state", "off"); !strings.Contains(out, "0 endpoints switched on") {
		t.Errorf("endpoints on --state off again: %q", out)
	}
	if out := run(true, "endpoints", "off"); !strings.Contains(out, "at least one of --prefix") {
		t.Errorf("endpoints off without a name or filter: %q", out)
	}
	if out := run(true, "endpoints", "off", "erp", "--prefix", "crm-"); !strings.Contains(out, "not both") {
		t.Errorf("endpoints off with a name and a filter: %q", out)
	}
}

// courier bench switch measures switches one request each and by filter,
// and every switch it asks for is made.
func TestBenchSwitch(t *testing.T) {
	skipIfShort(t)
	out, err := exec.Command(courierBin, "bench", "switch", "--endpoints", "200", "--clients", "8", "--rate", "20", "-o", "json").Output()
	if err != nil {
		t.Fatalf("bench switch: %v\n%s", err, out)
	}
	var res struct {
		Phases []struct {
			Phase     string  `json:"phase"`
			Switches  int     `json:"switches"`
			Errors    int     `json:"errors"`
			PerSecond float64 `json:"switches_per_sec"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(res.Phases) != 4 {
		t.Fatalf("phases %+v, want off and on, one request each and by filter", res.Phases)
	}
	for _, p := range res.Phases {
		if p.Switches != 200 || p.Errors != 0 || p.PerSecond <= 0 {
			t.Errorf("phase %q: %d switches, %d errors, %.0f/s; want all 200, no error", p.Phase, p.Switches, p.Errors, p.PerSecond)
		}
	}
}
