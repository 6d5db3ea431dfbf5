package amqp

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/tcpproxy"
	"github.com/courier-gw/courier/internal/testkit/amqptest"
	"github.com/courier-gw/courier/internal/testkit/receivertest"
	"github.com/courier-gw/courier/internal/testkit/sourcetest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/testenv"
	"github.com/courier-gw/courier/storetest"
)

// sourceOn declares a queue holding one message per body and opens a
// source on it, with a batch of 10.
func sourceOn(t testing.TB, bodies ...string) (*amqptest.Admin, string, *Source) {
	t.Helper()
	a := amqptest.NewAdmin(t)
	q := a.Queue(nil)
	a.PublishBodies(q, bodies...)
	return a, q, mustOpenSource(t, q, 10)
}

func mustOpenSource(t testing.TB, queue string, batch int) *Source {
	t.Helper()
	return mustOpenSourceAt(t, testenv.AMQP.URL(t), queue, batch)
}

func mustOpenSourceAt(t testing.TB, url, queue string, batch int) *Source {
	t.Helper()
	r := &courier.Receiver{Name: "test", Transport: courier.ReceiveAMQP, Batch: batch,
		AMQP: courier.AMQPSource{URL: url, Queue: queue}}
	s, err := Open(context.Background(), r)
	if err != nil {
		t.Fatalf("open the source of %s: %v", queue, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// eventually polls cond for a while and fails when it never holds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 500 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func mustPending(t testing.TB, s *Source, want int64) {
	t.Helper()
	var got int64
	var err error
	eventually(t, fmt.Sprintf("pending is %d (last %d, %v)", want, got, err), func() bool {
		got, err = s.Pending(context.Background())
		return err == nil && got == want
	})
}

func TestSourceReadsHeadersAndProperties(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	q := a.Queue(nil)
	stamp := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	a.Publish(q, amqp.Publishing{
		Headers: amqp.Table{
			"x-text":    "hello",
			"x-int":     int32(42),
			"x-long":    int64(-7),
			"x-bool":    true,
			"x-float":   1.5,
			"x-time":    stamp,
			"x-bytes":   []byte("raw"),
			"x-decimal": amqp.Decimal{Scale: 2, Value: 12345},
			"x-bad":     []byte{0xff, 0xfe},
			"x-nested":  amqp.Table{"a": "b"},
			"x-list":    []any{"a", int32(1)},
		},
		ContentType:   "application/json",
		MessageId:     "m-0",
		Type:          "order.created",
		CorrelationId: "c-0",
		AppId:         "shop",
		Body:          []byte(`{"n":0}`),
	})
	// A header of a property's name is the sender's: it stays.
	a.Publish(q, amqp.Publishing{Headers: amqp.Table{"Message-ID": "from-header", "type": "from-header"},
		MessageId: "m-1", Type: "t-1", ContentType: "text/plain", Body: []byte("one")})
	a.Publish(q, amqp.Publishing{Body: []byte("two")})

	s := mustOpenSource(t, q, 10)
	items := sourcetest.FetchN(t, s, 3)

	want := []courier.InboundItem{
		{
			Body: []byte(`{"n":0}`),
			Headers: map[string]string{
				"x-text": "hello", "x-int": "42", "x-long": "-7", "x-bool": "true", "x-float": "1.5",
				"x-time": "2026-11-21T10:00:00Z", "x-bytes": "raw", "x-decimal": "123.45",
				"message-id": "m-0", "type": "order.created", "correlation-id": "c-0", "app-id": "shop",
				"content-type": "application/json",
			},
			Unreadable:  []string{"x-bad", "x-list", "x-nested"},
			ContentType: "application/json",
		},
		{
			Body:        []byte("one"),
			Headers:     map[string]string{"Message-ID": "from-header", "type": "from-header", "content-type": "text/plain"},
			ContentType: "text/plain",
		},
		{Body: []byte("two"), Headers: map[string]string{}},
	}
	for i, it := range items {
		if _, ok := it.Handle.(amqp.Delivery); !ok {
			t.Errorf("item %d: handle is %T, want an amqp.Delivery", i, it.Handle)
		}
		got := *it
		got.Handle = nil
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("item %d:\n got %+v\nwant %+v", i, got, want[i])
		}
	}
	if got := len(items); got != 3 {
		t.Errorf("delivered = %d, want 3", got)
	}

	if err := s.Ack(context.Background(), items); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	// Acked items are gone for good: not back when the consumer goes away.
	s2 := mustOpenSource(t, q, 10)
	sourcetest.FetchNone(t, s2)
	mustPending(t, s2, 0)
}

func TestSourceReleaseRedelivers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		release []int // indexes of the fetched items to release; the others are acked
	}{
		{"all", []int{0, 1, 2}},
		{"a run at the start", []int{0, 1}},
		{"with a gap", []int{0, 2}},
		{"the last", []int{2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, q, s := sourceOn(t, "0", "1", "2")
			items := sourcetest.FetchN(t, s, 3)

			var release, ack []*courier.InboundItem
			var want []string
			for i, it := range items {
				if contains(tt.release, i) {
					release = append(release, it)
					want = append(want, string(it.Body))
				} else {
					ack = append(ack, it)
				}
			}
			// Ack first where it leaves released tags below the acked ones,
			// so that a multiple ack would wrongly take them too.
			if err := s.Ack(context.Background(), ack); err != nil {
				t.Fatalf("ack: %v", err)
			}
			if err := s.Release(context.Background(), release); err != nil {
				t.Fatalf("release: %v", err)
			}

			again := sourcetest.FetchAgain(t, s, want...)
			if got := redelivered(items) + redelivered(again); got != len(want) {
				t.Errorf("redelivered = %d, want %d", got, len(want))
			}
			sourcetest.FetchNone(t, s)
			if err := s.Ack(context.Background(), again); err != nil {
				t.Fatalf("ack: %v", err)
			}
			s.Close()
			sourcetest.FetchNone(t, mustOpenSource(t, q, 10))
		})
	}
}

// The prefetch is twice the batch, a batch below 1 counting as 1 (the
// default is receiver.New's), within what AMQP can carry.
func TestPrefetch(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ batch, want int }{{-1, 2}, {0, 2}, {1, 2}, {100, 200}, {40000, maxPrefetch}} {
		if got := prefetch(tt.batch); got != tt.want {
			t.Errorf("prefetch(%d) = %d, want %d", tt.batch, got, tt.want)
		}
	}
}

// redelivered counts the items the broker had handed out before.
func redelivered(items []*courier.InboundItem) int {
	n := 0
	for _, it := range items {
		if it.Redelivered {
			n++
		}
	}
	return n
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestSourceRefusesToSettleTwice(t *testing.T) {
	t.Parallel()
	a, q, s := sourceOn(t, "0", "1")
	items := sourcetest.FetchN(t, s, 2)
	if err := s.Ack(context.Background(), items[:1]); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := s.Ack(context.Background(), items[:1]); err == nil {
		t.Error("a second ack of an item: no error")
	}
	if err := s.Release(context.Background(), items); err == nil {
		t.Error("a release of an acked item: no error")
	}
	other := &courier.InboundItem{Handle: "someone else's"}
	if err := s.Ack(context.Background(), []*courier.InboundItem{other}); err == nil {
		t.Error("an ack of an item of another source: no error")
	}
	// The refusals sent nothing that closes the channel: it still works.
	if err := s.Ack(context.Background(), items[1:]); err != nil {
		t.Fatalf("ack: %v", err)
	}
	a.PublishBodies(q, "2")
	if got := sourcetest.Bodies(sourcetest.FetchN(t, s, 1)); !reflect.DeepEqual(got, []string{"2"}) {
		t.Errorf("fetched %q, want [2]", got)
	}
}

func TestSourceCloseReturnsUnacked(t *testing.T) {
	t.Parallel()
	_, q, s := sourceOn(t, "0", "1")
	sourcetest.FetchN(t, s, 2)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	s2 := mustOpenSource(t, q, 10)
	sourcetest.FetchAgain(t, s2, "0", "1")
}

func TestSourcePendingCountsReady(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	q := a.Queue(nil)
	a.PublishBodies(q, "0", "1", "2", "3", "4")
	// Batch 1: a prefetch of 2, so three of the five wait in the queue.
	s := mustOpenSource(t, q, 1)
	mustPending(t, s, 3)
	items, err := s.Fetch(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) == 0 || len(items) > 2 {
		t.Fatalf("fetched %d items, want 1 or 2 (the prefetch)", len(items))
	}
	if err := s.Ack(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	mustPending(t, s, int64(3-len(items)))

	// Without its queue, the source cannot tell.
	if _, err := a.Ch.QueueDelete(q, false, false, false); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Pending(context.Background()); err == nil || n != -1 {
		t.Errorf("pending of a deleted queue = %d, %v; want -1 and an error", n, err)
	}
}

func TestSourceEmptyQueue(t *testing.T) {
	t.Parallel()
	_, _, s := sourceOn(t)
	sourcetest.FetchNone(t, s)
	mustPending(t, s, 0)
}

func TestOpenMissingQueue(t *testing.T) {
	t.Parallel()
	q := amqptest.Unique("courier.test.missing")
	r := &courier.Receiver{Name: "test", Transport: courier.ReceiveAMQP,
		AMQP: courier.AMQPSource{URL: testenv.AMQP.URL(t), Queue: q}}
	s, err := Open(context.Background(), r)
	if err == nil {
		s.Close()
		t.Fatal("open of a missing queue: no error")
	}
	if !strings.Contains(err.Error(), q) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("error %q does not say that queue %s does not exist", err, q)
	}
}

func TestOpenCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := &courier.Receiver{Name: "test", Transport: courier.ReceiveAMQP,
		AMQP: courier.AMQPSource{URL: "amqp://guest:guest@127.0.0.1:1/", Queue: "q"}}
	if s, err := Open(ctx, r); err == nil {
		s.Close()
		t.Fatal("open with a canceled context: no error")
	}
}

// lossCase is what a test of a lost consumer has at hand to lose it.
type lossCase struct {
	admin *amqptest.Admin
	src   *Source
	queue string
	proxy *tcpproxy.Proxy // between the source and the broker
}

func TestFetchFailsWhenConsumerLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		lose func(t *testing.T, c lossCase)
	}{
		{"queue deleted", func(t *testing.T, c lossCase) {
			if _, err := c.admin.Ch.QueueDelete(c.queue, false, false, false); err != nil {
				t.Fatal(err)
			}
		}},
		{"channel closed by the broker", func(t *testing.T, c lossCase) {
			// An unknown delivery tag is a channel error: the broker closes it.
			if err := c.src.ch.Ack(1<<40, false); err != nil {
				t.Fatal(err)
			}
		}},
		{"connection cut", func(t *testing.T, c lossCase) { c.proxy.Close() }},
		{"connection closed", func(t *testing.T, c lossCase) {
			if err := c.src.conn.Close(); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := amqptest.NewAdmin(t)
			q := a.Queue(nil)
			proxy, viaProxy := tcpproxy.Via(t, a.URL)
			s := mustOpenSourceAt(t, viaProxy, q, 10)

			tt.lose(t, lossCase{admin: a, src: s, queue: q, proxy: proxy})
			var err error
			for try := 0; err == nil && try < 10; try++ {
				_, err = s.Fetch(context.Background(), 10)
			}
			if err == nil {
				t.Fatal("fetch after the consumer was lost: no error")
			}
			if !strings.Contains(err.Error(), q) {
				t.Errorf("error %q does not name the queue %s", err, q)
			}
			t.Logf("fetch: %v", err)
			if err := s.Close(); err != nil {
				t.Errorf("close after the loss: %v", err)
			}
		})
	}
}

func TestHeaderText(t *testing.T) {
	t.Parallel()
	stamp := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	tests := []struct {
		in     any
		want   string
		wantOK bool
	}{
		{"text", "text", true},
		{"", "", true},
		{string([]byte{0xff}), "", false},
		{[]byte("bytes"), "bytes", true},
		{[]byte{0xc3, 0x28}, "", false},
		{true, "true", true},
		{int8(-8), "-8", true},
		{int16(16), "16", true},
		{int32(-32), "-32", true},
		{int64(1 << 40), "1099511627776", true},
		{uint8(8), "8", true},
		{uint16(16), "16", true},
		{uint32(32), "32", true},
		{float32(0.25), "0.25", true},
		{float64(1e21), "1e+21", true},
		{stamp, "2026-01-02T02:04:05Z", true},
		{amqp.Decimal{Scale: 0, Value: 7}, "7", true},
		{amqp.Decimal{Scale: 2, Value: 12345}, "123.45", true},
		{amqp.Decimal{Scale: 3, Value: -5}, "-0.005", true},
		{amqp.Table{"a": "b"}, "", false},
		{[]any{"a"}, "", false},
		{nil, "", false},
	}
	for _, tt := range tests {
		got, ok := headerText(tt.in)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("headerText(%#v) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

// A message over courier.InlineMax, taken by a receive location, is stored
// as a blob of the store's and read back as sent; the same message sent
// again is the same message, and keeps no second blob.
func TestReceiveLargeMessageBecomesBlob(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	q := a.Queue(nil)
	body := make([]byte, 3<<20-5)
	for i := range body {
		body[i] = byte(i*31) ^ byte(i>>11)
	}
	for range 2 {
		a.Publish(q, amqp.Publishing{Body: body, ContentType: "application/octet-stream", DeliveryMode: amqp.Persistent})
	}
	store := sqlitetest.Open(t)
	var acked atomic.Int64
	r := &courier.Receiver{Name: "erp", Transport: courier.ReceiveAMQP, Type: "invoice", Route: "acme", Batch: 10,
		AMQP: courier.AMQPSource{URL: a.URL, Queue: q}}
	svc := receivertest.StartCounting(t, store, r, Open, &acked)
	eventually(t, "both messages acknowledged", func() bool { return acked.Load() == 2 })
	if st := svc.Statuses()[0]; st.Received != 1 {
		t.Fatalf("received %d messages, want 1: the second is the same message", st.Received)
	}
	if err := svc.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Ch.QueueDeclarePassive(q, true, false, false, false, nil); err != nil || got.Messages != 0 {
		t.Fatalf("%d messages left in the queue (%v), want none: both acknowledged", got.Messages, err)
	}
	if m := storetest.WantOnlyPayload(t, store, body); !m.HasBlob() {
		t.Fatalf("a message of %d bytes kept in its row, want a blob", len(body))
	}
}
