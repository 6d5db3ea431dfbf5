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
	promtest.Check(t, fams, []promtest.Sample{
		{Name: "courier_ingest_in_flight_bytes", Value: 12345},
		{Name: "courier_ingest_in_flight_messages", Value: 67},
		{Name: "courier_ingest_refused_total", Labels: []string{"reason", "bytes"}, Value: 2},
		{Name: "courier_ingest_refused_total", Labels: []string{"reason", "messages"}, Value: 0},
		{Name: "courier_ingest_refused_total", Labels: []string{"reason", "sender_bytes"}, Value: 0},
		{Name: "courier_ingest_refused_total", Labels: []string{"reason", "sender_messages"}, Value: 1},
	})
}
