package http_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// benchReceiver answers 204 to everything, as a webhook receiver does.
func benchReceiver(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// BenchmarkSend measures attempts of a 1 KiB message, 64 at a time, over
// kept-alive connections to a receiver in the same process (net/http's
// server, so the figure holds the receiver's work too).
func BenchmarkSend(b *testing.B) {
	srv := benchReceiver(b)
	tr := httptransport.New(httptransport.Options{Logger: slog.New(slog.DiscardHandler), AllowNetworks: loopback})
	b.Cleanup(tr.Close)
	ep := courier.NewEndpoint("receiver", courier.TransportHTTP)
	ep.Timeout = 10 * time.Second
	ep.Settings = &httptransport.Settings{URL: srv.URL + "/in", Method: http.MethodPost}
	payload := bytes.Repeat([]byte("x"), 1024)
	b.SetParallelism(64)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		m := &courier.Message{ID: "inv-1", Type: "invoice", ContentType: "application/json", Payload: payload, TotalAttempts: 1}
		for pb.Next() {
			if res := tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: ep, Attempt: 1}); !res.Delivered() {
				b.Fatalf("not delivered: %+v", res)
			}
		}
	})
}
