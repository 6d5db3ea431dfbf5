package amqp_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/amqptest"
	"github.com/courier-gw/courier/internal/testkit/blobtest"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
)

// A blob is read from the store and published whole; one over the limit
// is rejected before anything reaches the broker, and one the store cannot
// give fails the attempt as transport.
func TestBlobPayload(t *testing.T) {
	t.Parallel()
	a := amqptest.NewAdmin(t)
	blobs := blobtest.Area(t)
	tr := amqptransport.New(amqptransport.Options{Logger: slog.New(slog.DiscardHandler), Clock: clocktest.New(now),
		ConnectTimeout: 2 * time.Second, MaxPayload: 3 << 20})
	t.Cleanup(tr.Close)
	q := a.Queue(nil)
	e := endpoint("erp-mq", a.URL, "", q)
	e.Timeout = 30 * time.Second
	sendBlob := func(m *courier.Message, blobs courier.Blobs) courier.Result {
		return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Blobs: blobs})
	}

	m := blobtest.Message(t, blobs, "big-1", 2<<20, 1)
	if res := sendBlob(m, blobs); !res.Delivered() {
		t.Fatalf("result %+v", res)
	}
	d := a.Get(q)
	if got := courier.PayloadDigest(d.Body); got != m.Digest || len(d.Body) != m.Size || d.MessageId != "big-1" {
		t.Fatalf("the broker got %s: %d bytes with sha256 %s, want %d with %s", d.MessageId, len(d.Body), got, m.Size, m.Digest)
	}

	over := blobtest.Message(t, blobs, "big-2", 4<<20, 2)
	res := sendBlob(over, blobs)
	if res.Class != courier.ClassRejected || res.Error != "payload of 4194304 bytes is over the broker's limit of 3145728 bytes" {
		t.Fatalf("over the limit: %+v", res)
	}

	blobtest.WantUnreadable(t, sendBlob(blobtest.Missing(2<<20), blobs), "is not there")

	// Neither reached the queue: the next message is the first after big-1.
	if res := sendBlob(message("inv-1"), nil); !res.Delivered() {
		t.Fatalf("after the refusals: %+v", res)
	}
	if d := a.Get(q); d.MessageId != "inv-1" {
		t.Fatalf("the queue had %s next, want inv-1", d.MessageId)
	}
}
