package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/pgtest"
	"github.com/courier-gw/courier/internal/sink"
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
	dir := t.TempDir()
	start := func(i int) *process {
		cfg := filepath.Join(dir, fmt.Sprintf("node-%d.yaml", i))
		writeFile(t, cfg, nodeConfig(freeAddr(t), fmt.Sprintf("{driver: postgres, dsn: %q}", dsn))+switchConfig(sk.URL()))
		return startServerWith(t, cfg)
	}
	first := start(0)
	switchRounds(t, sk, []*process{first}, 10, "one-node")
	switchRounds(t, sk, []*process{first, start(1)}, 10, "two-nodes")
}
