package nats_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/tcpproxy"
	"github.com/courier-gw/courier/internal/testenv"
	natstransport "github.com/courier-gw/courier/transport/nats"
)

func serverURL(t testing.TB) string {
	t.Helper()
	return testenv.Service(t, "COURIER_TEST_NATS", "nats://127.0.0.1:4222")
}

func unique() string {
	var b [6]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// stream creates a stream of the test's own on a subject of its own and
// returns both; it is deleted with the test. It keeps its messages in
// memory unless onDisk.
func stream(t testing.TB, cfg jetstream.StreamConfig, onDisk bool) (jetstream.Stream, string) {
	t.Helper()
	nc, err := nats.Connect(serverURL(t))
	if err != nil {
		t.Fatalf("connect to the server: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := unique()
	subject := "courier.test." + id
	cfg.Name, cfg.Subjects, cfg.Storage = "COURIER_TEST_"+id, []string{subject}, jetstream.MemoryStorage
	if onDisk {
		cfg.Storage = jetstream.FileStorage
	}
	return testenv.CreateStream(t, js, cfg), subject
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
	e.NATS = courier.NATSTarget{URL: serverURL, Subject: subject}
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

func msgCount(t testing.TB, s jetstream.Stream) uint64 {
	t.Helper()
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func TestPublishArrivesWithItsHeaders(t *testing.T) {
	t.Parallel()
	s, subject := stream(t, jetstream.StreamConfig{}, false)
	tr := newTransport(t)
	m := message("ord-1")
	res := send(t, tr, endpoint(serverURL(t), subject), m, 3)
	if !res.Delivered() || !strings.Contains(res.Response, "as sequence 1") {
		t.Fatalf("result %+v", res)
	}
	got, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Data, m.Payload) || got.Subject != subject {
		t.Errorf("got %q on %s, want %q on %s", got.Data, got.Subject, m.Payload, subject)
	}
	for k, want := range map[string]string{"Nats-Msg-Id": "ord-1", "Courier-Type": "order.created", "Courier-Attempt": "3",
		"Content-Type": "application/json", "X-Tenant": "acme"} {
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
	s, subject := stream(t, jetstream.StreamConfig{Duplicates: time.Minute}, false)
	tr := newTransport(t)
	e := endpoint(serverURL(t), subject)
	if res := send(t, tr, e, message("ord-1"), 1); !res.Delivered() {
		t.Fatalf("first: %+v", res)
	}
	res := send(t, tr, e, message("ord-1"), 2)
	if !res.Delivered() || !strings.Contains(res.Response, "duplicate") {
		t.Fatalf("second: %+v, want delivered as a duplicate", res)
	}
	if n := msgCount(t, s); n != 1 {
		t.Errorf("stream holds %d messages, want 1", n)
	}
}

func TestNoStreamIsRejected(t *testing.T) {
	t.Parallel()
	res := send(t, newTransport(t), endpoint(serverURL(t), "courier.test.nostream."+unique()), message("ord-1"), 1)
	if res.Class != courier.ClassRejected || !strings.Contains(res.Error, "no JetStream stream") {
		t.Fatalf("%+v, want rejected", res)
	}
}

// TestFullStreamIsTransport publishes to a stream that keeps one message
// and discards new ones: the stream refuses the second for now.
func TestFullStreamIsTransport(t *testing.T) {
	t.Parallel()
	s, subject := stream(t, jetstream.StreamConfig{MaxMsgs: 1, Discard: jetstream.DiscardNew}, false)
	tr := newTransport(t)
	e := endpoint(serverURL(t), subject)
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

// TestServerAwayAndBack points the endpoint at a proxy in front of the
// server: with the proxy down the server is unreachable, as a stopped one
// is; cutting the proxy's connections is a server that restarts.
func TestServerAwayAndBack(t *testing.T) {
	t.Parallel()
	s, subject := stream(t, jetstream.StreamConfig{}, false)
	tr := newTransport(t)
	upstream, _ := url.Parse(serverURL(t))
	addr, err := tcpproxy.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := *upstream
	viaProxy.Host = addr
	e := endpoint(viaProxy.String(), subject)

	res := send(t, tr, e, message("ord-1"), 1)
	if res.Class != courier.ClassConnectRefused {
		t.Fatalf("server away: %+v, want connect_refused", res)
	}
	proxy := mustProxy(t, addr, upstream.Host)
	if res := send(t, tr, e, message("ord-1"), 2); !res.Delivered() {
		t.Fatalf("server back: %+v", res)
	}
	proxy.Close()
	res = send(t, tr, e, message("ord-2"), 1)
	switch res.Class {
	case courier.ClassConnectRefused, courier.ClassConnectionClosed:
	default:
		t.Fatalf("server gone: %+v, want connect_refused or connection_closed", res)
	}
	mustProxy(t, addr, upstream.Host)
	if res := send(t, tr, e, message("ord-2"), 2); !res.Delivered() {
		t.Fatalf("server back again: %+v", res)
	}
	if n := msgCount(t, s); n != 2 {
		t.Errorf("stream holds %d messages, want 2", n)
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

// TestStalledServer freezes the connection to the server (a proxy holds
// every byte): the attempt ends at the endpoint's timeout, and once bytes
// flow again an attempt delivers, stored once whatever the stalled one did.
func TestStalledServer(t *testing.T) {
	t.Parallel()
	s, subject := stream(t, jetstream.StreamConfig{Duplicates: time.Minute}, false)
	tr := newTransport(t)
	upstream, _ := url.Parse(serverURL(t))
	proxy := mustProxy(t, "127.0.0.1:0", upstream.Host)
	viaProxy := *upstream
	viaProxy.Host = proxy.Addr()
	e := endpoint(viaProxy.String(), subject)
	e.Timeout = 300 * time.Millisecond

	if res := send(t, tr, e, message("ord-1"), 1); !res.Delivered() {
		t.Fatalf("before the stall: %+v", res)
	}
	proxy.Freeze()
	if res := send(t, tr, e, message("ord-2"), 1); res.Class != courier.ClassTimeout {
		t.Fatalf("stalled: %+v, want timeout", res)
	}
	proxy.Thaw()
	if res := send(t, tr, e, message("ord-2"), 2); !res.Delivered() {
		t.Fatalf("after the stall: %+v", res)
	}
	if n := msgCount(t, s); n != 2 {
		t.Errorf("stream holds %d messages, want 2 (ord-2 once)", n)
	}
}
