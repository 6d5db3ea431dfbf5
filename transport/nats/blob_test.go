package nats_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/blobtest"
)

// maxPayload is the max_payload the test's server announces.
func maxPayload(t *testing.T, url string) int64 {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	return nc.MaxPayload()
}

// A payload kept as a blob is read from the store and published whole, up
// to the server's max_payload; a larger one is rejected before it is read,
// and one the store cannot give fails the attempt as transport.
func TestBlobPayload(t *testing.T) {
	t.Parallel()
	s := stream(t, jetstream.StreamConfig{})
	limit := maxPayload(t, s.URL)
	blobs := blobtest.Area(t)
	tr := newTransport(t)
	e := endpoint(s.URL, s.Subject)
	e.Timeout = 30 * time.Second
	sendBlob := func(m *courier.Message, blobs courier.Blobs) courier.Result {
		return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Blobs: blobs})
	}

	// The largest blob that fits with the headers. A server at its default
	// max_payload (1 MiB, courier.InlineMax) takes no payload larger than a
	// row holds, but a blob of any size below the limit goes the same way.
	size := min(int(limit)-4<<10, 2<<20)
	m := blobtest.Message(t, blobs, "big-1", size, 1)
	if res := sendBlob(m, blobs); !res.Delivered() {
		t.Fatalf("result %+v", res)
	}
	got, err := s.GetMsg(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := courier.PayloadDigest(got.Data); d != m.Digest || len(got.Data) != m.Size {
		t.Fatalf("the stream got %d bytes with sha256 %s, want %d with %s", len(got.Data), d, m.Size, m.Digest)
	}

	over := blobtest.Message(t, blobs, "big-2", int(max(limit+1, 2<<20)), 2)
	res := sendBlob(over, blobs)
	want := "payload of " + strconv.Itoa(over.Size) + " bytes is over the broker's limit of " + strconv.FormatInt(limit, 10) + " bytes"
	if res.Class != courier.ClassRejected || !strings.HasPrefix(res.Error, want) {
		t.Fatalf("over the limit: %+v, want rejected: %s", res, want)
	}

	blobtest.WantUnreadable(t, sendBlob(blobtest.Missing(512<<10), blobs), "is not there")
	wantStored(t, s, 1)
}
