package amqp_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/tcpproxy"
	"github.com/courier-gw/courier/internal/testenv"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
)

var now = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func brokerURL(t testing.TB) string {
	t.Helper()
	return testenv.Service(t, "COURIER_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
}

// admin is a connection of the test's own to declare and consume with.
type admin struct {
	t  testing.TB
	ch *amqp.Channel
}

func newAdmin(t testing.TB) *admin {
	t.Helper()
	c, err := amqp.Dial(brokerURL(t))
	if err != nil {
		t.Fatalf("connect to the broker: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	ch, err := c.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return &admin{t: t, ch: ch}
}

func unique(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + "." + hex.EncodeToString(b[:])
}

// queue declares a queue that goes away with the test, bound to exchange
// with key when exchange is not the default one.
func (a *admin) queue(exchange, key string, args amqp.Table) string {
	a.t.Helper()
	q, err := a.ch.QueueDeclare(unique("courier.test"), false, true, false, false, args)
	if err != nil {
		a.t.Fatal(err)
	}
	if exchange != "" {
		if err := a.ch.QueueBind(q.Name, key, exchange, false, nil); err != nil {
			a.t.Fatal(err)
		}
	}
	return q.Name
}

func (a *admin) exchange(kind string) string {
	a.t.Helper()
	name := unique("courier.test")
	if err := a.ch.ExchangeDeclare(name, kind, false, true, false, false, nil); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { a.ch.ExchangeDelete(name, false, false) })
	return name
}

// get takes the next message from queue, waiting for it a while.
func (a *admin) get(queue string) amqp.Delivery {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, ok, err := a.ch.Get(queue, true)
		if err != nil {
			a.t.Fatal(err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("nothing arrived on %s", queue)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newTransport(t testing.TB) *amqptransport.Transport {
	t.Helper()
	tr := amqptransport.New(amqptransport.Options{Logger: slog.New(slog.DiscardHandler), Clock: fixedClock{now},
		ConnectTimeout: 2 * time.Second})
	t.Cleanup(tr.Close)
	return tr
}

func endpoint(name, brokerURL, exchange, key string) *courier.Endpoint {
	e := courier.NewEndpoint(name, courier.TransportAMQP)
	e.Timeout = 5 * time.Second
	e.AMQP = courier.AMQPTarget{URL: brokerURL, Exchange: exchange, RoutingKey: key}
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
	a := newAdmin(t)
	tr := newTransport(t)
	for _, tc := range []struct {
		name     string
		exchange func() string
	}{
		{"default exchange", func() string { return "" }},
		{"direct exchange", func() string { return a.exchange("direct") }},
		{"topic exchange", func() string { return a.exchange("topic") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := tc.exchange()
			key := "erp.in"
			q := a.queue(ex, key, nil)
			if ex == "" {
				key = q // the default exchange routes by queue name
			}
			e := endpoint("erp-mq", brokerURL(t), ex, key)
			m := message("inv-1")
			if res := send(t, tr, e, m, 2); !res.Delivered() {
				t.Fatalf("result %+v", res)
			}
			d := a.get(q)
			if !bytes.Equal(d.Body, m.Payload) {
				t.Errorf("body %q, want %q", d.Body, m.Payload)
			}
			got := map[string]any{"message_id": d.MessageId, "type": d.Type, "content_type": d.ContentType,
				"delivery_mode": d.DeliveryMode, "priority": d.Priority, "app_id": d.AppId, "timestamp": d.Timestamp.UTC(),
				"X-Tenant": d.Headers["X-Tenant"], "courier-attempt": d.Headers["courier-attempt"]}
			want := map[string]any{"message_id": "inv-1", "type": "invoice", "content_type": "application/xml",
				"delivery_mode": amqp.Persistent, "priority": uint8(5), "app_id": "courier", "timestamp": now,
				"X-Tenant": "acme", "courier-attempt": int64(2)}
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
	a := newAdmin(t)
	tr := newTransport(t)
	ex := a.exchange("direct") // no queue bound
	e := endpoint("erp-mq", brokerURL(t), ex, "nobody.listens")
	res := send(t, tr, e, message("inv-1"), 1)
	if res.Class != courier.ClassRejected || res.Status != 312 || !strings.Contains(res.Error, "NO_ROUTE") {
		t.Fatalf("%+v, want rejected 312 NO_ROUTE", res)
	}
	// The channel stays fit: the next message with a queue goes through.
	q := a.queue(ex, "nobody.listens", nil)
	if res := send(t, tr, e, message("inv-2"), 1); !res.Delivered() {
		t.Fatalf("after a return: %+v", res)
	}
	if d := a.get(q); d.MessageId != "inv-2" {
		t.Errorf("got %s", d.MessageId)
	}
}

func TestMissingExchangeIsRejected(t *testing.T) {
	t.Parallel()
	tr := newTransport(t)
	e := endpoint("erp-mq", brokerURL(t), unique("courier.test.missing"), "k")
	res := send(t, tr, e, message("inv-1"), 1)
	if res.Class != courier.ClassRejected || res.Status != 404 || !strings.Contains(res.Error, "no exchange") {
		t.Fatalf("%+v, want rejected 404", res)
	}
}

// TestNackIsTransport publishes to a queue that refuses new messages when
// full (x-overflow: reject-publish, at most one): the broker nacks.
func TestNackIsTransport(t *testing.T) {
	t.Parallel()
	a := newAdmin(t)
	tr := newTransport(t)
	q := a.queue("", "", amqp.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	e := endpoint("erp-mq", brokerURL(t), "", q)
	if res := send(t, tr, e, message("inv-1"), 1); !res.Delivered() {
		t.Fatalf("first: %+v", res)
	}
	res := send(t, tr, e, message("inv-2"), 1)
	if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "nacked") {
		t.Fatalf("second: %+v, want transport: nacked", res)
	}
	// Once there is room, it goes through: the nack was for that message only.
	a.get(q)
	if res := send(t, tr, e, message("inv-2"), 2); !res.Delivered() {
		t.Fatalf("after room: %+v", res)
	}
}

func TestLoginRefused(t *testing.T) {
	t.Parallel()
	u, _ := url.Parse(brokerURL(t))
	u.User = url.UserPassword("courier-nobody", "wrong")
	res := send(t, newTransport(t), endpoint("erp-mq", u.String(), "", "q"), message("inv-1"), 1)
	if res.Class != courier.ClassTransport || !strings.Contains(res.Error, "refused the connection") {
		t.Fatalf("%+v, want transport: refused the connection", res)
	}
}

// TestBrokerAwayAndBack points the endpoint at a proxy in front of the
// broker: with the proxy down the broker is unreachable, as a stopped
// broker is; cutting the proxy's connections is a broker that restarts.
// Each failure is transient, and the next attempt after the broker is back
// delivers on a new connection.
func TestBrokerAwayAndBack(t *testing.T) {
	t.Parallel()
	a := newAdmin(t)
	tr := newTransport(t)
	upstream, _ := url.Parse(brokerURL(t))
	addr, err := tcpproxy.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := *upstream
	viaProxy.Host = addr
	q := a.queue("", "", nil)
	e := endpoint("erp-mq", viaProxy.String(), "", q)

	// Stopped: nothing listens.
	res := send(t, tr, e, message("inv-1"), 1)
	if res.Class != courier.ClassConnectRefused || res.Class.PermanentByDefault() {
		t.Fatalf("broker away: %+v, want connect_refused", res)
	}
	// Back: the retry delivers.
	proxy := mustProxy(t, addr, upstream.Host)
	if res := send(t, tr, e, message("inv-1"), 2); !res.Delivered() {
		t.Fatalf("broker back: %+v", res)
	}
	// Goes down again, cutting the open connection.
	proxy.Close()
	res = send(t, tr, e, message("inv-2"), 1)
	switch res.Class {
	case courier.ClassConnectRefused, courier.ClassConnectionClosed:
	default:
		t.Fatalf("broker gone: %+v, want connect_refused or connection_closed", res)
	}
	// And back: the transport connects anew.
	mustProxy(t, addr, upstream.Host)
	if res := send(t, tr, e, message("inv-2"), 2); !res.Delivered() {
		t.Fatalf("broker back again: %+v", res)
	}
	for _, want := range []string{"inv-1", "inv-2"} {
		if d := a.get(q); d.MessageId != want {
			t.Errorf("got %s, want %s", d.MessageId, want)
		}
	}
}

func mustProxy(t testing.TB, addr, upstream string) *tcpproxy.Proxy {
	t.Helper()
	p, err := tcpproxy.Start(addr, upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// TestSilentBrokerHoldsUpOnlyItsEndpoint connects one endpoint to a port
// that accepts and then says nothing: while that attempt waits for the
// broker's greeting, another endpoint publishes all the same.
func TestSilentBrokerHoldsUpOnlyItsEndpoint(t *testing.T) {
	t.Parallel()
	a := newAdmin(t)
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

	q := a.queue("", "", nil)
	if res := send(t, tr, endpoint("erp-mq", brokerURL(t), "", q), message("inv-2"), 1); !res.Delivered() {
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

// TestStalledBroker freezes the connection to the broker (a proxy holds
// every byte): the attempt ends at the endpoint's timeout, as does the next
// one, and once bytes flow again an attempt delivers.
func TestStalledBroker(t *testing.T) {
	t.Parallel()
	a := newAdmin(t)
	tr := newTransport(t)
	upstream, _ := url.Parse(brokerURL(t))
	proxy := mustProxy(t, "127.0.0.1:0", upstream.Host)
	viaProxy := *upstream
	viaProxy.Host = proxy.Addr()
	q := a.queue("", "", nil)
	e := endpoint("erp-mq", viaProxy.String(), "", q)
	e.Timeout = 300 * time.Millisecond

	if res := send(t, tr, e, message("inv-1"), 1); !res.Delivered() {
		t.Fatalf("before the stall: %+v", res)
	}
	proxy.Freeze()
	for i := range 2 {
		if res := send(t, tr, e, message("inv-2"), i+1); res.Class != courier.ClassTimeout {
			t.Fatalf("stalled, attempt %d: %+v, want timeout", i+1, res)
		}
	}
	proxy.Thaw()
	if res := send(t, tr, e, message("inv-2"), 3); !res.Delivered() {
		t.Fatalf("after the stall: %+v", res)
	}
	// inv-2 may be there more than once: a publish held in the stall can
	// reach the broker once bytes flow (at least once, deduplicated by id).
	seen := map[string]bool{}
	for !seen["inv-2"] {
		seen[a.get(q).MessageId] = true
	}
	if !seen["inv-1"] {
		t.Errorf("got %v", seen)
	}
}
