package amqp_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/amqptest"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/sendertest"
	"github.com/courier-gw/courier/internal/testkit/testenv"
	"github.com/courier-gw/courier/tracing"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	"go.opentelemetry.io/otel/trace"
)

var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func newTransport(t testing.TB) *amqptransport.Transport {
	t.Helper()
	tr := amqptransport.New(amqptransport.Options{Logger: slog.New(slog.DiscardHandler), Clock: clocktest.New(now),
		ConnectTimeout: 2 * time.Second})
	t.Cleanup(tr.Close)
	return tr
}

func endpoint(name, brokerURL, exchange, key string) *courier.Endpoint {
	e := courier.NewEndpoint(name, courier.TransportAMQP)
	e.Timeout = 5 * time.Second
	e.Settings = &amqptransport.Settings{URL: brokerURL, Exchange: exchange, RoutingKey: key}
	return e
}

func message(id string) *courier.Message {
	return &courier.Message{ID: id, Type: "invoice", Route: "erp", Payload: []byte(`<Invoice id="` + id + `"/>`),
		ContentType: "application/xml", Priority: 5, Headers: map[string]string{"X-Tenant": "acme"}}
}

func send(t testing.TB, tr *amqptransport.Transport, e *courier.Endpoint, m *courier.Message, attempt int) courier.Result {
	t.Helper()
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: attempt})
}

func TestPublishArrivesWithItsProperties(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	tr := newTransport(t)
	for _, tc := range []struct {
		name     string
		exchange func() string
	}{
		{"default exchange", func() string { return "" }},
		{"direct exchange", func() string { return a.Exchange("direct") }},
		{"topic exchange", func() string { return a.Exchange("topic") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := tc.exchange()
			key := "erp.in"
			q := a.Queue(nil)
			if ex == "" {
				key = q // the default exchange routes by queue name
			} else {
				a.Bind(q, ex, key)
			}
			e := endpoint("erp-mq", a.URL, ex, key)
			m := message("inv-1")
			m.Sequence, m.PreviousID = 7, "inv-0"
			if res := send(t, tr, e, m, 2); !res.Delivered() {
				t.Fatalf("result %+v", res)
			}
			d := a.Get(q)
			if !bytes.Equal(d.Body, m.Payload) {
				t.Errorf("body %q, want %q", d.Body, m.Payload)
			}
			got := map[string]any{"message_id": d.MessageId, "type": d.Type, "content_type": d.ContentType,
				"delivery_mode": d.DeliveryMode, "priority": d.Priority, "app_id": d.AppId, "timestamp": d.Timestamp.UTC(),
				"X-Tenant": d.Headers["X-Tenant"], "courier-attempt": d.Headers["courier-attempt"],
				"courier-sequence": d.Headers["courier-sequence"], "courier-previous-id": d.Headers["courier-previous-id"]}
			want := map[string]any{"message_id": "inv-1", "type": "invoice", "content_type": "application/xml",
				"delivery_mode": amqp.Persistent, "priority": uint8(5), "app_id": "courier", "timestamp": now,
				"X-Tenant": "acme", "courier-attempt": int64(2), "courier-sequence": int64(7), "courier-previous-id": "inv-0"}
			for k, w := range want {
				if got[k] != w {
					t.Errorf("%s = %#v, want %#v", k, got[k], w)
				}
			}
		})
	}
}

func TestUnroutableIsRejected(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	tr := newTransport(t)
	ex := a.Exchange("direct") // no queue bound
	e := endpoint("erp-mq", a.URL, ex, "nobody.listens")
	res := send(t, tr, e, message("inv-1"), 1)
	if res.Class != courier.ClassRejected || res.Status != 312 || !strings.Contains(res.Error, "NO_ROUTE") {
		t.Fatalf("%+v, want rejected 312 NO_ROUTE", res)
	}
	// The channel stays fit: the next message with a queue goes through.
	q := a.Queue(nil)
	a.Bind(q, ex, "nobody.listens")
	if res := send(t, tr, e, message("inv-2"), 1); !res.Delivered() {
		t.Fatalf("after a return: %+v", res)
	}
	if d := a.Get(q); d.MessageId != "inv-2" {
		t.Errorf("got %s", d.MessageId)
	}
}

func TestMissingExchangeIsRejected(t *testing.T) {
	t.Parallel()
	tr := newTransport(t)
	e := endpoint("erp-mq", testenv.AMQP.URL(t), amqptest.Unique("courier.test.missing"), "k")
	res := send(t, tr, e, message("inv-1"), 1)
	if res.Class != courier.ClassRejected || res.Status != 404 || !strings.Contains(res.Error, "no exchange") {
		t.Fatalf("%+v, want rejected 404", res)
	}
}

// TestNackIsTransport publishes to a queue that refuses new messages when
// full (x-overflow: reject-publish, at most one): the broker nacks.
func TestNackIsTransport(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	tr := newTransport(t)
	q := a.Queue(amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	e := endpoint("erp-mq", a.URL, "", q)
	if res := send(t, tr, e, message("inv-1"), 1); !res.Delivered() {
		t.Fatalf("first: %+v", res)
	}
	res := send(t, tr, e, message("inv-2"), 1)
	if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "nacked") {
		t.Fatalf("second: %+v, want transport: nacked", res)
	}
	// Once there is room, it goes through: the nack was for that message only.
	a.Get(q)
	if res := send(t, tr, e, message("inv-2"), 2); !res.Delivered() {
		t.Fatalf("after room: %+v", res)
	}
}

func TestLoginRefused(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse(testenv.AMQP.URL(t))
	u.User = url.UserPassword("courier-nobody", "wrong")
	res := send(t, newTransport(t), endpoint("erp-mq", u.String(), "", "q"), message("inv-1"), 1)
	if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "refused the connection") {
		t.Fatalf("%+v, want transport: refused the connection", res)
	}
}

// queueSender gives an outage test a queue of its own and the sender
// that publishes to it through the broker at the URL it is given, with
// the attempt timeout timeout.
func queueSender(t *testing.T, timeout time.Duration) (*amqptest.Admin, string, sendertest.SendFunc) {
	t.Helper()
	a := amqptest.NewAdmin(t)
	tr := newTransport(t)
	q := a.Queue(nil)
	return a, q, func(url, id string, attempt int) courier.Result {
		e := endpoint("erp-mq", url, "", q)
		e.Timeout = timeout
		return send(t, tr, e, message(id), attempt)
	}
}

// TestBrokerAwayAndBack takes the broker away and brings it back: each
// failure is transient, and the next attempt after the broker is back
// delivers on a new connection.
func TestBrokerAwayAndBack(t *testing.T) {
	t.Parallel()
	a, q, publish := queueSender(t, 5*time.Second)
	sendertest.AwayAndBack(t, a.URL, [2]string{"inv-1", "inv-2"}, publish)
	for _, want := range []string{"inv-1", "inv-2"} {
		if d := a.Get(q); d.MessageId != want {
			t.Errorf("got %s, want %s", d.MessageId, want)
		}
	}
}

// TestSilentBrokerHoldsUpOnlyItsEndpoint connects one endpoint to a port
// that accepts and then says nothing: while that attempt waits for the
// broker's greeting, another endpoint publishes all the same.
func TestSilentBrokerHoldsUpOnlyItsEndpoint(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	tr := amqptransport.New(amqptransport.Options{Logger: slog.New(slog.DiscardHandler), ConnectTimeout: time.Minute})
	t.Cleanup(tr.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	silentDone := make(chan courier.Result, 1)
	go func() {
		silentDone <- send(t, tr, endpoint("silent", "amqp://guest:guest@"+ln.Addr().String()+"/", "", "q"), message("inv-1"), 1)
	}()
	conn := <-accepted // the silent endpoint is dialling now

	q := a.Queue(nil)
	if res := send(t, tr, endpoint("erp-mq", a.URL, "", q), message("inv-2"), 1); !res.Delivered() {
		t.Fatalf("other endpoint: %+v", res)
	}
	select {
	case res := <-silentDone:
		t.Fatalf("the silent endpoint's attempt ended before the other went through: %+v", res)
	default:
	}
	conn.Close()
	ln.Close()
	if res := <-silentDone; res.Delivered() || res.Class.PermanentByDefault() {
		t.Errorf("silent endpoint: %+v, want a transient failure", res)
	}
}

// TestStalledBroker freezes the connection to the broker: the attempt ends
// at the endpoint's timeout, as does the next one, and once bytes flow
// again an attempt delivers.
func TestStalledBroker(t *testing.T) {
	t.Parallel()
	a, q, publish := queueSender(t, 300*time.Millisecond)
	sendertest.Stalled(t, a.URL, [2]string{"inv-1", "inv-2"}, publish)
	// inv-2 may be there more than once: a publish held in the stall can
	// reach the broker once bytes flow (at least once, deduplicated by id).
	seen := map[string]bool{}
	for !seen["inv-2"] {
		seen[a.Get(q).MessageId] = true
	}
	if !seen["inv-1"] {
		t.Errorf("got %v", seen)
	}
}

// TestPublishCarriesTraceParent checks that an attempt made under a span
// hands its trace context to the receiver as the traceparent header.
func TestPublishCarriesTraceParent(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	tr := newTransport(t)
	q := a.Queue(nil)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), tracing.Remote(tp))
	res := tr.Send(ctx, courier.Delivery{Message: message("inv-1"), Endpoint: endpoint("erp-mq", a.URL, "", q), Attempt: 1})
	if !res.Delivered() {
		t.Fatalf("result %+v", res)
	}
	if got := a.Get(q).Headers["traceparent"]; got != tp {
		t.Errorf("traceparent = %#v, want %q", got, tp)
	}
}
