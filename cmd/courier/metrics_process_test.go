package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/httpcheck"
	"github.com/courier-gw/courier/internal/testkit/promtest"
	"github.com/courier-gw/courier/internal/testkit/sink"
	dto "github.com/prometheus/client_model/go"
)

// TestMetricsAfterARun: after courier serve has delivered some messages and
// had others rejected, its /metrics agree with what the receiver counted,
// and its log has a line per suspension but none per delivery.
func TestMetricsAfterARun(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{})
	// Two of every three requests are taken, the third is refused for good.
	sk.Script("/in", sink.Respond(http.StatusNoContent), sink.Respond(http.StatusNoContent), sink.Respond(http.StatusBadRequest), sink.Cycle)

	const opsSecret = "courier_test_ops_secret"
	p := startNode(t, t.TempDir(), fmt.Sprintf(`keys:
  ops: {role: admin, hash: "%s"}
endpoints:
  acme: {transport: http, url: "%s/in", max_concurrency: 4}
routes:
  acme: {endpoints: [acme]}
`, api.HashSecret(opsSecret), sk.URL()))

	const total = 90
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := api.NewClient(p.url, opsSecret)
	var batch []api.IngestRequest
	for i := range total {
		batch = append(batch, api.IngestRequest{ID: fmt.Sprintf("o-%03d", i), Type: "order", Route: "acme", Payload: []byte(`{"n":1}`)})
	}
	if _, err := c.IngestBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := sk.Wait(ctx, "/in", total); err != nil {
		t.Fatalf("the receiver got %d of %d: %v", sk.Count("/in"), total, err)
	}
	ok, refused := sk.StatusCount(http.StatusNoContent), sk.StatusCount(http.StatusBadRequest)
	if ok+refused != total || refused == 0 {
		t.Fatalf("the receiver answered %d with 204 and %d with 400, want %d in all", ok, refused, total)
	}

	// The outcomes are written shortly after the receiver answered.
	var fams map[string]*dto.MetricFamily
	for {
		fams = scrapeMetrics(t, p.url, opsSecret)
		d, _ := promtest.Value(fams, "courier_messages_delivered_total", "type", "order", "route", "acme")
		s, _ := promtest.Value(fams, "courier_messages_suspended_total", "type", "order", "route", "acme", "reason", "rejected")
		if int(d+s) == total {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("metrics count %v delivered and %v suspended, want %d in all\n%s", d, s, total, p.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, tt := range []struct {
		name   string
		labels []string
		want   int
	}{
		{"courier_messages_ingested_total", []string{"type", "order", "route", "acme"}, total},
		{"courier_messages_delivered_total", []string{"type", "order", "route", "acme"}, ok},
		{"courier_messages_suspended_total", []string{"reason", "rejected"}, refused},
		{"courier_attempts_total", []string{"endpoint", "acme", "outcome", "delivered"}, ok},
		{"courier_attempts_total", []string{"endpoint", "acme", "outcome", "failed", "class", "http_4xx"}, refused},
		{"courier_attempt_duration_seconds", []string{"endpoint", "acme"}, total},
		{"courier_delivery_latency_seconds", []string{"route", "acme"}, ok},
		{"courier_endpoint_health", []string{"endpoint", "acme", "state", "active"}, 1},
		{"courier_endpoint_inflight", []string{"endpoint", "acme"}, 0},
	} {
		if got, found := promtest.Value(fams, tt.name, tt.labels...); !found || int(got) != tt.want {
			t.Errorf("%s%v = %v (found %v), want %d", tt.name, tt.labels, got, found, tt.want)
		}
	}
	if _, found := promtest.Value(fams, "courier_queue_messages", "state", "queued"); !found {
		t.Error("no queue depth")
	}

	// Without a key there are no metrics.
	if status, _ := getMetrics(t, p.url, ""); status != http.StatusUnauthorized {
		t.Errorf("/metrics without a key: %d, want 401", status)
	}

	log := p.log()
	if n := strings.Count(log, "message suspended"); n != refused {
		t.Errorf("%d log lines of suspended messages, want %d", n, refused)
	}
	if strings.Contains(log, "message delivered") {
		t.Error("deliveries are logged at the default level")
	}
}

// scrapeMetrics reads /metrics with a key and parses it as Prometheus does.
func scrapeMetrics(t *testing.T, base, secret string) map[string]*dto.MetricFamily {
	t.Helper()
	status, body := getMetrics(t, base, secret)
	if status != http.StatusOK {
		t.Fatalf("/metrics: %d", status)
	}
	return promtest.Parse(t, bytes.NewReader(body))
}

// getMetrics reads /metrics of the node at base, with the key secret when
// there is one, and returns the answer's status and body.
func getMetrics(t *testing.T, base, secret string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	if secret != "" {
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	status, body, _ := httpcheck.Do(t, nil, req)
	return status, body
}
