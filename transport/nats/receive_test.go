package nats

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/tcpproxy"
	"github.com/courier-gw/courier/internal/testkit/natstest"
	"github.com/courier-gw/courier/internal/testkit/receivertest"
	"github.com/courier-gw/courier/internal/testkit/sourcetest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/storetest"
)

// receiveStream is a stream of one test's own, for a receive location to
// read.
type receiveStream struct{ *natstest.Stream }

func newReceiveStream(t *testing.T) *receiveStream {
	t.Helper()
	return &receiveStream{natstest.NewStream(t, jetstream.StreamConfig{Storage: jetstream.FileStorage})}
}

// consumer creates the consumer inbox with an AckWait of a second, so that
// items left unsettled come back soon.
func (s *receiveStream) consumer(t *testing.T) {
	t.Helper()
	_, err := s.JS.CreateConsumer(context.Background(), s.Name, jetstream.ConsumerConfig{
		Durable: "inbox", AckPolicy: jetstream.AckExplicitPolicy, AckWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
}

// receiver is a receive location reading s through consumer.
func (s *receiveStream) receiver(consumer string) *courier.Receiver {
	return &courier.Receiver{Name: "inbox", Transport: courier.ReceiveNATS, Batch: 10,
		NATS: courier.NATSSource{URL: s.URL, Stream: s.Name, Consumer: consumer}}
}

// publish sends one message per body, each with the headers h.
func (s *receiveStream) publish(t *testing.T, h nats.Header, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		m := nats.NewMsg(s.Subject)
		m.Data = []byte(b)
		for k, v := range h {
			m.Header[k] = v
		}
		if _, err := s.JS.PublishMsg(context.Background(), m); err != nil {
			t.Fatalf("publish %q: %v", b, err)
		}
	}
}

func mustOpen(t *testing.T, r *courier.Receiver) *Source {
	t.Helper()
	src, err := Open(context.Background(), r)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { src.Close() })
	return src
}

func mustPending(t *testing.T, src *Source, want int64) {
	t.Helper()
	got, err := src.Pending(context.Background())
	if err != nil || got != want {
		t.Fatalf("pending = %d, %v; want %d", got, err, want)
	}
}

func TestReceiveFetchInOrder(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	h := nats.Header{"Content-Type": {"application/json"}, "X-Tenant": {"acme", "other"}, "x-lower": {"kept\tas is"}}
	want := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`, `{"n":4}`, `{"n":5}`}
	s.publish(t, h, want...)
	src := mustOpen(t, s.receiver("inbox"))
	mustPending(t, src, 5)

	got := sourcetest.FetchN(t, src, len(want))
	if !slices.Equal(sourcetest.Bodies(got), want) {
		t.Fatalf("bodies %q, want %q", sourcetest.Bodies(got), want)
	}
	wantHeaders := map[string]string{"Content-Type": "application/json", "X-Tenant": "acme", "x-lower": "kept\tas is"}
	for i, it := range got {
		if fmt.Sprint(it.Headers) != fmt.Sprint(wantHeaders) {
			t.Errorf("item %d: headers %q, want %q", i, it.Headers, wantHeaders)
		}
		if it.ContentType != "application/json" || it.Redelivered || it.Name != "" || len(it.Unreadable) != 0 {
			t.Errorf("item %d: content type %q, redelivered %v, name %q, unreadable %q", i, it.ContentType, it.Redelivered, it.Name, it.Unreadable)
		}
	}
	mustPending(t, src, 0)
}

func TestReceiveFetchMapsHeaders(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	tests := []struct {
		name            string
		header          nats.Header
		wantHeaders     map[string]string
		wantUnreadable  []string
		wantContentType string
	}{
		{"no headers", nil, nil, nil, ""},
		{"content type in other case", nats.Header{"content-type": {"text/plain"}}, map[string]string{"content-type": "text/plain"}, nil, "text/plain"},
		{"control character", nats.Header{"X-Bad": {"a\x01b"}, "X-Good": {"ok"}}, map[string]string{"X-Good": "ok"}, []string{"X-Bad"}, ""},
		{"not utf-8", nats.Header{"X-Bin": {"\xff\xfe"}, "X-Del": {"a\x7f"}}, map[string]string{}, []string{"X-Bin", "X-Del"}, ""},
		{"unreadable content type", nats.Header{"Content-Type": {"text/\x01"}}, map[string]string{}, []string{"Content-Type"}, "text/\x01"},
	}
	for _, tt := range tests {
		s.publish(t, tt.header, tt.name)
	}
	got := sourcetest.FetchN(t, mustOpen(t, s.receiver("inbox")), len(tests))
	for i, tt := range tests {
		it := got[i]
		if string(it.Body) != tt.name {
			t.Fatalf("item %d is %q, want %q", i, it.Body, tt.name)
		}
		if fmt.Sprint(it.Headers) != fmt.Sprint(tt.wantHeaders) || !slices.Equal(it.Unreadable, tt.wantUnreadable) || it.ContentType != tt.wantContentType {
			t.Errorf("%s: headers %q, unreadable %q, content type %q; want %q, %q, %q", tt.name,
				it.Headers, it.Unreadable, it.ContentType, tt.wantHeaders, tt.wantUnreadable, tt.wantContentType)
		}
	}
}

// TestReceiveCreatesAndReusesConsumer opens a consumer that does not exist,
// acks part of the stream, and opens it again: the second source goes on
// after what the first acked.
func TestReceiveCreatesAndReusesConsumer(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	s.publish(t, nil, "a", "b", "c", "d")
	r := s.receiver("inbox")

	first := mustOpen(t, r)
	info, err := s.JS.Consumer(context.Background(), s.Name, "inbox")
	if err != nil {
		t.Fatalf("the consumer was not created: %v", err)
	}
	cfg := info.CachedInfo().Config
	if cfg.Durable != "inbox" || cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.DeliverPolicy != jetstream.DeliverAllPolicy ||
		cfg.MaxAckPending < 2*r.Batch || cfg.AckWait != receiveAckWait {
		t.Errorf("consumer config %+v", cfg)
	}
	got := sourcetest.FetchN(t, first, 2)
	if err := first.Ack(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	second := mustOpen(t, r)
	mustPending(t, second, 2)
	got = sourcetest.FetchN(t, second, 2)
	if want := []string{"c", "d"}; !slices.Equal(sourcetest.Bodies(got), want) {
		t.Fatalf("second source fetched %q, want %q", sourcetest.Bodies(got), want)
	}
	if got[0].Redelivered {
		t.Errorf("%q is marked redelivered", got[0].Body)
	}
}

func TestReceiveAckForgets(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	s.publish(t, nil, "a", "b", "c")
	r := s.receiver("inbox")
	src := mustOpen(t, r)
	if err := src.Ack(context.Background(), sourcetest.FetchN(t, src, 3)); err != nil {
		t.Fatal(err)
	}
	src.Close()

	again := mustOpen(t, r)
	sourcetest.FetchNone(t, again)
	mustPending(t, again, 0)
	c, err := s.JS.Consumer(context.Background(), s.Name, "inbox")
	if err != nil {
		t.Fatal(err)
	}
	if n := c.CachedInfo().NumAckPending; n != 0 {
		t.Errorf("%d items wait for an ack, want 0", n)
	}
}

func TestReceiveReleaseRedelivers(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	want := []string{"a", "b", "c"}
	s.publish(t, nil, want...)
	src := mustOpen(t, s.receiver("inbox"))
	if err := src.Release(context.Background(), sourcetest.FetchN(t, src, 3)); err != nil {
		t.Fatal(err)
	}
	sourcetest.FetchAgain(t, src, want...)
}

// A consumer created for a receiver without a batch size allows the
// batches of a batch of 1 (the default is receiver.New's).
func TestReceiveConsumerBatchBelowOne(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	r := s.receiver("inbox")
	r.Batch = 0
	mustOpen(t, r)
	c, err := s.JS.Consumer(context.Background(), s.Name, "inbox")
	if err != nil {
		t.Fatal(err)
	}
	if got := c.CachedInfo().Config.MaxAckPending; got != ackPendingBatches {
		t.Fatalf("max ack pending = %d, want %d", got, ackPendingBatches)
	}
}

// A fetch of fewer than one item takes one rather than none, so that a
// caller looping on it does not spin.
func TestReceiveFetchBelowOneTakesOne(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	s.publish(t, nil, "a", "b")
	src := mustOpen(t, s.receiver("inbox"))
	for _, max := range []int{0, -1} {
		got, err := src.Fetch(context.Background(), max)
		if err != nil {
			t.Fatalf("fetch %d: %v", max, err)
		}
		if len(got) != 1 {
			t.Fatalf("fetch %d: %q, want one item", max, sourcetest.Bodies(got))
		}
	}
}

// TestReceiveUnsettledComeBack closes a source with items neither acked nor
// released: once the consumer's AckWait passes they are handed out again.
func TestReceiveUnsettledComeBack(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	s.consumer(t)
	s.publish(t, nil, "a", "b")
	r := s.receiver("inbox")
	src := mustOpen(t, r)
	sourcetest.FetchN(t, src, 2)
	src.Close()

	sourcetest.FetchAgain(t, mustOpen(t, r), "a", "b")
}

func TestReceiveMissingStream(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	r := s.receiver("inbox")
	r.NATS.Stream = "COURIER_TEST_MISSING_" + natstest.Unique()
	_, err := Open(context.Background(), r)
	if err == nil || !strings.Contains(err.Error(), r.NATS.Stream) || !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("open: %v, want an error naming stream %s", err, r.NATS.Stream)
	}
}

// TestReceiveRefusesUnfitConsumer opens existing consumers that cannot give
// at-least-once: the error says why.
func TestReceiveRefusesUnfitConsumer(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	tests := []struct {
		name string
		cfg  jetstream.ConsumerConfig
		want string
	}{
		{"push", jetstream.ConsumerConfig{Durable: "push", AckPolicy: jetstream.AckExplicitPolicy, DeliverSubject: "courier.test.deliver." + natstest.Unique()}, "push consumer"},
		{"noack", jetstream.ConsumerConfig{Durable: "noack", AckPolicy: jetstream.AckNonePolicy}, "explicit acks"},
		{"ackall", jetstream.ConsumerConfig{Durable: "ackall", AckPolicy: jetstream.AckAllPolicy}, "explicit acks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.cfg.DeliverSubject != "" {
				_, err = s.JS.CreatePushConsumer(context.Background(), s.Name, tt.cfg)
			} else {
				_, err = s.JS.CreateConsumer(context.Background(), s.Name, tt.cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			src, err := Open(context.Background(), s.receiver(tt.cfg.Durable))
			if err == nil {
				src.Close()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("open: %v, want an error saying %q", err, tt.want)
			}
		})
	}
}

func TestReceiveEmptyStream(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	src := mustOpen(t, s.receiver("inbox"))
	sourcetest.FetchNone(t, src)
	mustPending(t, src, 0)
	if err := src.Ack(context.Background(), nil); err != nil {
		t.Errorf("ack of nothing: %v", err)
	}
}

func TestReceiveFetchCanceled(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	src := mustOpen(t, s.receiver("inbox"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := src.Fetch(ctx, 10); !errors.Is(err, context.Canceled) {
		t.Fatalf("fetch: %v, want canceled", err)
	}
}

// TestReceiveLostConnection reads through a proxy and cuts it: Fetch fails,
// and a new source, once the server is there again, gets the items that
// were not acked.
func TestReceiveLostConnection(t *testing.T) {
	t.Parallel()
	s := newReceiveStream(t)
	s.consumer(t)
	s.publish(t, nil, "a", "b")
	proxy, viaProxy := tcpproxy.Via(t, s.URL)
	r := s.receiver("inbox")
	r.NATS.URL = viaProxy
	src := mustOpen(t, r)
	sourcetest.FetchN(t, src, 2)
	proxy.Close()

	var fetchErr error
	for i := 0; i < 10 && fetchErr == nil; i++ {
		_, fetchErr = src.Fetch(context.Background(), 10)
	}
	if fetchErr == nil {
		t.Fatal("fetch after the connection was cut: no error")
	}
	src.Close()

	r.NATS.URL = s.URL
	got := sourcetest.FetchN(t, mustOpen(t, r), 2)
	if want := []string{"a", "b"}; !slices.Equal(sourcetest.Bodies(got), want) {
		t.Fatalf("fetched %q after reconnecting, want %q", sourcetest.Bodies(got), want)
	}
}

// A message over courier.InlineMax, taken by a receive location, is stored
// as a blob of the store's and read back as sent; the same message sent
// again is the same message and keeps no second blob. A server that carries
// no message over InlineMax (its max_payload is 1 MiB by default) cannot
// bring a blob: the test then sends the largest message it carries, which
// must arrive whole, in the row.
func TestReceiveLargeMessage(t *testing.T) {
	s := newReceiveStream(t)
	limit := int(s.JS.Conn().MaxPayload())
	size := min(3<<20-5, limit-4096) // room for the headers the publish adds
	if size <= courier.InlineMax {
		t.Logf("the server carries at most %d bytes, not over courier.InlineMax: a message of %d bytes, kept in the row, not a blob", limit, size)
	}
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i*31) ^ byte(i>>11)
	}
	for range 2 {
		if _, err := s.JS.Publish(context.Background(), s.Subject, body); err != nil {
			t.Fatalf("publish %d bytes: %v", len(body), err)
		}
	}
	store := sqlitetest.Open(t)
	var acked atomic.Int64
	r := s.receiver("inbox")
	r.Type, r.Route = "invoice", "acme"
	svc := receivertest.StartCounting(t, store, r, Open, &acked)
	for deadline := time.Now().Add(20 * time.Second); acked.Load() < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages acknowledged, want 2; status %+v", acked.Load(), svc.Statuses())
		}
	}
	if st := svc.Statuses()[0]; st.Received != 1 {
		t.Fatalf("received %d messages, want 1: the second is the same message", st.Received)
	}
	storetest.WantOnlyPayload(t, store, body)
}
