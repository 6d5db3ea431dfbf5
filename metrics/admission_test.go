package metrics_test

import (
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/promtest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/metrics"
)

// TestIngestAdmission checks the series of the API's admission: what is
// in flight, read at the scrape, and the refusals by reason.
func TestIngestAdmission(t *testing.T) {
	m := metrics.New(metrics.Options{Source: sqlitetest.Open(t), TopologyFunc: func() *courier.Topology { return &courier.Topology{} },
		IngestInFlightFunc: func() (int64, int64) { return 12345, 67 }})
	m.IngestRefused("bytes")
	m.IngestRefused("bytes")
	m.IngestRefused("sender_messages")
	fams := scrape(t, m)
	for _, tt := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"courier_ingest_in_flight_bytes", nil, 12345},
		{"courier_ingest_in_flight_messages", nil, 67},
		{"courier_ingest_refused_total", []string{"reason", "bytes"}, 2},
		{"courier_ingest_refused_total", []string{"reason", "messages"}, 0},
		{"courier_ingest_refused_total", []string{"reason", "sender_bytes"}, 0},
		{"courier_ingest_refused_total", []string{"reason", "sender_messages"}, 1},
	} {
		if got, ok := promtest.Value(fams, tt.name, tt.labels...); !ok || got != tt.want {
			t.Errorf("%s%v = %v (present %v), want %v", tt.name, tt.labels, got, ok, tt.want)
		}
	}
}
