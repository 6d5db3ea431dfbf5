package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/promtest"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// TestTenantStatsAndMetrics: courier serve with tenants answers each
// tenant's statistics of its own messages (courier stats --tenant), the
// server's to the system's key, and reports on /metrics a tenant's
// refusals by its quotas and that it is throttled.
func TestTenantStatsAndMetrics(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{})
	const rootSecret, acmeSecret = "courier_test_root_secret", "courier_test_acme_secret"
	p := startNode(t, t.TempDir(), fmt.Sprintf(`tenants:
  acme: {quotas: {ingest_rate: 1/h, max_queued: 100}}
  beta: {}
keys:
  root: {tenant: system, role: admin, hash: "%s"}
  acme-admin: {tenant: acme, role: admin, hash: "%s"}
endpoints:
  acme/crm: {transport: http, url: "%s/acme"}
routes:
  acme/orders: {endpoints: [crm]}
`, api.HashSecret(rootSecret), api.HashSecret(acmeSecret), sk.URL()))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	acme := api.NewClient(p.url, acmeSecret)
	send := func(id string) error {
		_, _, err := acme.Ingest(ctx, api.IngestRequest{ID: id, Type: "order", Route: "orders", Payload: []byte(`{"n":1}`)})
		return err
	}
	if err := send("o-1"); err != nil {
		t.Fatal(err)
	}
	if err := send("o-2"); courier.ErrorCode(err) != courier.CodeRateLimited {
		t.Fatalf("acme's second message in the hour: %v; want rate_limited", err)
	}
	if err := sk.Wait(ctx, "/acme", 1); err != nil {
		t.Fatal(err)
	}

	stats := func(args ...string) api.Stats {
		t.Helper()
		out, _, err := runCLI(t, "", append([]string{"--server", p.url, "-o", "json"}, append(args, "stats")...)...)
		if err != nil {
			t.Fatalf("courier %v stats: %v", args, err)
		}
		var st api.Stats
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("courier %v stats: %v\n%s", args, err, out)
		}
		return st
	}
	// The delivery is counted shortly after the receiver answered.
	for st := stats("--api-key", acmeSecret); st.Node == nil || st.Node.Delivered != 1; st = stats("--api-key", acmeSecret) {
		if ctx.Err() != nil {
			t.Fatalf("acme's stats: %+v; want its delivery\n%s", st, p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, c := range []struct {
		args                []string
		ingested, delivered int64
	}{
		{[]string{"--api-key", acmeSecret}, 1, 1},
		{[]string{"--api-key", rootSecret, "--tenant", "acme"}, 1, 1},
		{[]string{"--api-key", rootSecret, "--tenant", "beta"}, 0, 0},
		{[]string{"--api-key", rootSecret}, 0, 0}, // the default tenant's
		{[]string{"--api-key", rootSecret, "--tenant", "system"}, 1, 1},
	} {
		if st := stats(c.args...); st.Node == nil || st.Node.Ingested != c.ingested || st.Node.Delivered != c.delivered {
			t.Errorf("courier %v stats: %+v; want %d ingested and %d delivered", c.args[2:], st.Node, c.ingested, c.delivered)
		}
	}
	_, _, err := runCLI(t, "", "--server", p.url, "--api-key", acmeSecret, "--tenant", "beta", "stats")
	if courier.ErrorCode(err) != courier.CodeNotFound {
		t.Errorf("acme's key asks for beta's stats: %v; want not found", err)
	}

	fams := scrapeMetrics(t, p.url, rootSecret)
	promtest.Check(t, fams, []promtest.Sample{
		{Name: "courier_tenant_refused_total", Labels: []string{"tenant", "acme", "quota", "ingest_rate"}, Value: 1},
		{Name: "courier_tenant_throttled", Labels: []string{"tenant", "acme"}, Value: 1},
		{Name: "courier_tenant_throttled", Labels: []string{"tenant", "beta"}, Value: 0},
		{Name: "courier_tenant_quota", Labels: []string{"tenant", "acme", "quota", "max_queued"}, Value: 100},
	})
	// A tenant's key has no /metrics, which are the server's.
	if status, _ := getMetrics(t, p.url, acmeSecret); status != http.StatusNotFound {
		t.Errorf("/metrics with acme's key: %d; want 404", status)
	}
}
