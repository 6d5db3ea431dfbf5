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
	benchSend(b, httptransport.Settings{}, nil)
}

// BenchmarkSendSigned is BenchmarkSend with the request signed: v1 with
// one secret, v1a with one of courier's keys and with two (a rotation).
func BenchmarkSendSigned(b *testing.B) {
	keys := make([]httptransport.SigningKey, 2)
	for i := range keys {
		k, err := httptransport.NewSigningKey()
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = k
	}
	b.Run("v1", func(b *testing.B) {
		benchSend(b, httptransport.Settings{Secrets: []string{"whsec_c2VjcmV0LXNpZ25pbmcta2V5"}}, nil)
	})
	b.Run("v1a", func(b *testing.B) {
		benchSend(b, httptransport.Settings{Signature: httptransport.SignatureV1a}, keys[:1])
	})
	b.Run("v1a-rotation", func(b *testing.B) {
		benchSend(b, httptransport.Settings{Signature: httptransport.SignatureV1a}, keys)
	})
}

// benchSend measures attempts with the endpoint's settings s (its URL and
// method set here), signed with keys.
func benchSend(b *testing.B, s httptransport.Settings, keys []httptransport.SigningKey) {
	srv := benchReceiver(b)
	tr := httptransport.New(httptransport.Options{Logger: slog.New(slog.DiscardHandler), AllowNetworks: loopback})
	b.Cleanup(tr.Close)
	tr.SetSigningKeys(keys)
	ep := courier.NewEndpoint("receiver", courier.TransportHTTP)
	ep.Timeout = 10 * time.Second
	s.URL, s.Method = srv.URL+"/in", http.MethodPost
	ep.Settings = &s
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
