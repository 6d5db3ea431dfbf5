package nats_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/natstest"
	"github.com/courier-gw/courier/internal/testkit/sendertest"
	"github.com/courier-gw/courier/internal/testkit/testenv"
	"github.com/courier-gw/courier/tracing"
	natstransport "github.com/courier-gw/courier/transport/nats"
	"go.opentelemetry.io/otel/trace"
)

// stream creates a stream of the test's own that keeps its messages in
// memory.
func stream(t testing.TB, cfg jetstream.StreamConfig) *natstest.Stream {
	t.Helper()
	cfg.Storage = jetstream.MemoryStorage
	return natstest.NewStream(t, cfg)
}

func newTransport(t testing.TB) *natstransport.Transport {
	t.Helper()
	tr := natstransport.New(natstransport.Options{Logger: slog.New(slog.DiscardHandler), ConnectTimeout: 2 * time.Second})
	t.Cleanup(tr.Close)
	return tr
}

func endpoint(serverURL, subject string) *courier.Endpoint {
	e := courier.NewEndpoint("events", courier.TransportNATS)
	e.Timeout = 5 * time.Second
	e.Settings = &natstransport.Settings{URL: serverURL, Subject: subject}
	return e
}

func message(id string) *courier.Message {
	return &courier.Message{ID: id, Type: "order.created", Route: "events", Payload: []byte(`{"order":"` + id + `"}`),
		ContentType: "application/json", Headers: map[string]string{"X-Tenant": "acme"}}
}

func send(t testing.TB, tr *natstransport.Transport, e *courier.Endpoint, m *courier.Message, attempt int) courier.Result {
	t.Helper()
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: attempt})
}

// wantStored fails the test unless the stream holds want messages.
func wantStored(t testing.TB, s *natstest.Stream, want uint64) {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := info.State.Msgs; got != want {
		t.Errorf("stream holds %d messages, want %d", got, want)
	}
}

func TestPublishArrivesWithItsHeaders(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{})
	tr := newTransport(t)
	m := message("ord-1")
	m.Sequence, m.PreviousID = 7, "ord-0"
	res := send(t, tr, endpoint(s.URL, s.Subject), m, 3)
	if !res.Delivered() || !strings.Contains(res.Response, "as sequence 1") {
		t.Fatalf("result %+v", res)
	}
	got, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, m.Payload) || got.Subject != s.Subject {
		t.Errorf("got %q on %s, want %q on %s", got.Data, got.Subject, m.Payload, s.Subject)
	}
	for k, want := range map[string]string{"Nats-Msg-Id": "ord-1", "Courier-Type": "order.created", "Courier-Attempt": "3",
		"Content-Type": "application/json", "X-Tenant": "acme", "Courier-Sequence": "7", "Courier-Previous-Id": "ord-0"} {
		if v := got.Header.Get(k); v != want {
			t.Errorf("header %s = %q, want %q", k, v, want)
		}
	}
}

// TestRepeatedAttemptIsStoredOnce sends one message twice, as a retry after
// a lost ack does: the stream keeps one copy, and both attempts count as
// delivered.
func TestRepeatedAttemptIsStoredOnce(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{Duplicates: time.Minute})
	tr := newTransport(t)
	e := endpoint(s.URL, s.Subject)
	if res := send(t, tr, e, message("ord-1"), 1); !res.Delivered() {
		t.Fatalf("first: %+v", res)
	}
	res := send(t, tr, e, message("ord-1"), 2)
	if !res.Delivered() || !strings.Contains(res.Response, "duplicate") {
		t.Fatalf("second: %+v, want delivered as a duplicate", res)
	}
	wantStored(t, s, 1)
}

// TestDeliveriesOfOneMessageAreStoredApart sends the deliveries of one
// published message to two subscriptions whose routes reach one stream:
// each is its own message (Nats-Msg-Id is the delivery's id), and the
// stream's deduplication keeps both.
func TestDeliveriesOfOneMessageAreStoredApart(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{Duplicates: time.Minute})
	tr := newTransport(t)
	e := endpoint(s.URL, s.Subject)
	for _, sub := range []string{"sales", "billing"} {
		m := message("ord-1")
		m.Subscription = sub
		if res := send(t, tr, e, m, 1); !res.Delivered() || strings.Contains(res.Response, "duplicate") {
			t.Fatalf("delivery to %s: %+v, want delivered and stored", sub, res)
		}
	}
	wantStored(t, s, 2) // one for each delivery
}

func TestNoStreamIsRejected(t *testing.T) {
	t.Parallel()
	res := send(t, newTransport(t), endpoint(testenv.NATS.URL(t), "courier.test.nostream."+natstest.Unique()), message("ord-1"), 1)
	if res.Class != courier.ClassRejected || !strings.Contains(res.Error, "no JetStream stream") {
		t.Fatalf("%+v, want rejected", res)
	}
}

// TestFullStreamIsTransport publishes to a stream that keeps one message
// and discards new ones: the stream refuses the second for now.
func TestFullStreamIsTransport(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{MaxMsgs: 1, Discard: jetstream.DiscardNew})
	tr := newTransport(t)
	e := endpoint(s.URL, s.Subject)
	if res := send(t, tr, e, message("ord-1"), 1); !res.Delivered() {
		t.Fatalf("first: %+v", res)
	}
	res := send(t, tr, e, message("ord-2"), 1)
	if res.Class != courier.ClassTransport || res.Status == 0 || !strings.Contains(res.Error, "refused") {
		t.Fatalf("second: %+v, want transport with the stream's code", res)
	}
	if err := s.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	if res := send(t, tr, e, message("ord-2"), 2); !res.Delivered() {
		t.Fatalf("after room: %+v", res)
	}
}

// TestServerAwayAndBack takes the server away and brings it back: each
// failure is transient, and the next attempt after the server is back
// delivers on a new connection.
func TestServerAwayAndBack(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{})
	tr := newTransport(t)
	sendertest.AwayAndBack(t, s.URL, [2]string{"ord-1", "ord-2"}, func(url, id string, attempt int) courier.Result {
		return send(t, tr, endpoint(url, s.Subject), message(id), attempt)
	})
	wantStored(t, s, 2)
}

// TestStalledServer freezes the connection to the server: the attempts end
// at the endpoint's timeout, and once bytes flow again an attempt delivers,
// stored once whatever the stalled ones did.
func TestStalledServer(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{Duplicates: time.Minute})
	tr := newTransport(t)
	sendertest.Stalled(t, s.URL, [2]string{"ord-1", "ord-2"}, func(url, id string, attempt int) courier.Result {
		e := endpoint(url, s.Subject)
		e.Timeout = 300 * time.Millisecond
		return send(t, tr, e, message(id), attempt)
	})
	wantStored(t, s, 2) // ord-2 once
}

// TestPublishCarriesTraceParent checks that an attempt made under a span
// hands its trace context to the receiver as the traceparent header.
func TestPublishCarriesTraceParent(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{})
	tr := newTransport(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), tracing.Remote(tp))
	res := tr.Send(ctx, courier.Delivery{Message: message("ord-1"), Endpoint: endpoint(s.URL, s.Subject), Attempt: 1})
	if !res.Delivered() {
		t.Fatalf("result %+v", res)
	}
	got, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Header.Get("traceparent"); v != tp {
		t.Errorf("traceparent = %q, want %q", v, tp)
	}
}
