package metrics_test

import (
	"net/http/httptest"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/promtest"
	"github.com/courier-gw/courier/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func TestReceiverCollector(t *testing.T) {
	statuses := []courier.ReceiverStatus{
		{Name: "erp", State: courier.ReceiverRunning, Received: 120, Invalid: 3, Redelivered: 1, Pending: 42},
		{Name: "drop", State: courier.ReceiverStopped, Received: 7, Pending: -1},
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewReceiverCollector(func() []courier.ReceiverStatus { return statuses }))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := promtest.Parse(t, rec.Body)
	tests := []struct {
		name   string
		labels []string
		want   float64
		absent bool
	}{
		{"courier_receiver_received_total", []string{"receiver", "erp"}, 120, false},
		{"courier_receiver_received_total", []string{"receiver", "drop"}, 7, false},
		{"courier_receiver_invalid_total", []string{"receiver", "erp"}, 3, false},
		{"courier_receiver_redelivered_total", []string{"receiver", "erp"}, 1, false},
		{"courier_receiver_pending", []string{"receiver", "erp"}, 42, false},
		{"courier_receiver_pending", []string{"receiver", "drop"}, 0, true}, // the source cannot tell
		{"courier_receiver_state", []string{"receiver", "erp", "state", "running"}, 1, false},
		{"courier_receiver_state", []string{"receiver", "erp", "state", "stopped"}, 0, false},
		{"courier_receiver_state", []string{"receiver", "drop", "state", "stopped"}, 1, false},
	}
	for _, tt := range tests {
		got, ok := promtest.Value(fams, tt.name, tt.labels...)
		if ok == tt.absent || got != tt.want {
			t.Errorf("%s%v = %v (present %v); want %v (present %v)", tt.name, tt.labels, got, ok, tt.want, !tt.absent)
		}
	}
	if f := fams["courier_receiver_received_total"]; f.GetType().String() != "COUNTER" {
		t.Errorf("received is a %s", f.GetType())
	}
}

func TestLookupCollector(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewLookupCollector(func() courier.LookupStats {
		return courier.LookupStats{Hits: 99, Misses: 3, Failures: 1, NotRegistered: 1}
	}))
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	fams := promtest.Parse(t, rec.Body)
	for result, want := range map[string]float64{"hit": 99, "miss": 3, "failure": 1, "not_registered": 1} {
		if got, ok := promtest.Value(fams, "courier_lookups_total", "result", result); !ok || got != want {
			t.Errorf("courier_lookups_total{result=%q} = %v (present %v), want %v", result, got, ok, want)
		}
	}
}
