package storetest

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// blobTests are the tests of a store's blob area.
var blobTests = suite[courier.Store]{
	{"BlobIngest", testBlobIngest},
	{"BlobSweep", testBlobSweep},
	{"BlobPublished", testBlobPublished},
	{"EraseBlob", testEraseBlob},
}

// payloadOf returns n bytes that differ from one position to the next, so
// that a blob read back out of order or cut short does not compare equal.
func payloadOf(n int, seed byte) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7) ^ byte(i>>13) ^ seed
	}
	return p
}

// spoolMessage takes payload through a Spool of s's blob area, in pieces,
// onto a message ready to ingest; the caller closes the spool.
func spoolMessage(t *testing.T, s courier.Store, id string, payload []byte) (*courier.Message, *courier.Spool) {
	t.Helper()
	sp := courier.NewSpool(context.Background(), s.Blobs(), 0)
	for p := payload; len(p) > 0; {
		n := min(len(p), 100_000)
		if _, err := sp.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	m := newMessage(id, base)
	if err := sp.Finish(m); err != nil {
		t.Fatal(err)
	}
	courier.Accept(m, courier.DefaultPolicy(), true, base)
	return m, sp
}

// IngestSpooled ingests m with payload as the ingest API does: through a
// Spool of s's blob area, so that a payload larger than courier.InlineMax
// is stored as a blob, accepted under the default policy.
func IngestSpooled(t testing.TB, s courier.Store, m *courier.Message, payload []byte) {
	t.Helper()
	sp := courier.NewSpool(context.Background(), s.Blobs(), 0)
	defer sp.Close()
	if _, err := sp.Write(payload); err != nil {
		t.Fatal(err)
	}
	if err := sp.Finish(m); err != nil {
		t.Fatal(err)
	}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
}

// publishSpooled ingests a message id published to the subscriptions a
// and b (on the route acme), its payload spooled to one blob that both
// deliveries refer to.
func publishSpooled(t *testing.T, s courier.Store, id string, payload []byte) {
	t.Helper()
	m, sp := spoolMessage(t, s, id, payload)
	defer sp.Close()
	m.Route = ""
	var deliveries []*courier.Message
	for _, sub := range []string{"a", "b"} {
		d := *m
		d.Route, d.Subscription = "acme", sub
		deliveries = append(deliveries, &d)
	}
	mustIngest(t, s, deliveries...)
}

// ReadPayload reads a stored message's payload back, from its row or its
// blob.
func ReadPayload(t testing.TB, s courier.Store, m *courier.Message) []byte {
	t.Helper()
	r, err := m.OpenPayload(context.Background(), s.Blobs())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// WantBlobUsage fails t unless the blob area of s holds n blobs of size
// bytes in all.
func WantBlobUsage(t testing.TB, s courier.Store, n int, size int64) {
	t.Helper()
	gotN, gotSize, err := s.Blobs().Usage(context.Background())
	if err != nil || gotN != n || gotSize != size {
		t.Fatalf("blob usage %d blobs of %d bytes (%v), want %d of %d", gotN, gotSize, err, n, size)
	}
}

func sweep(t *testing.T, s courier.Store) int {
	t.Helper()
	n, err := s.Blobs().Sweep(context.Background(), s.ReferencedBlobs)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A payload over InlineMax is a blob: stored apart, read back whole, and
// hashed by its digest; one up to InlineMax stays in the row.
func testBlobIngest(t *testing.T, s courier.Store) {
	payload := payloadOf(courier.InlineMax+300_000, 1)
	m, sp := spoolMessage(t, s, "large", payload)
	defer sp.Close()
	if !m.HasBlob() || m.Payload != nil || m.Size != len(payload) || m.Digest != courier.PayloadDigest(payload) {
		t.Fatalf("spooled: blob %q, payload %d bytes, size %d, digest %s; want a blob of %d bytes", m.Blob, len(m.Payload), m.Size, m.Digest, len(payload))
	}
	if res := mustIngest(t, s, m); res[0].Status != courier.IngestCreated {
		t.Fatalf("ingest: %v", res[0].Status)
	}
	sp.Close()
	got := mustGet(t, s, "large")
	if got.Blob != m.Blob || got.Digest != m.Digest || got.Size != len(payload) || len(got.Payload) != 0 || got.Hash != m.Hash {
		t.Fatalf("stored: blob %q digest %s size %d payload %d bytes hash %s; want blob %q digest %s size %d, no payload, hash %s",
			got.Blob, got.Digest, got.Size, len(got.Payload), got.Hash, m.Blob, m.Digest, len(payload), m.Hash)
	}
	if !bytes.Equal(ReadPayload(t, s, got), payload) {
		t.Fatal("the blob read back differs from the payload")
	}
	// Claimed for delivery, it comes with its blob.
	claimed, err := s.ClaimDue(context.Background(), courier.Claim{Now: base.Add(2 * time.Minute), Owner: "w",
		LeaseUntil: base.Add(time.Hour), Routes: []courier.RouteQuota{{Route: "acme", Limit: 10}}, Max: 10})
	if err != nil || len(claimed) != 1 || claimed[0].Blob != m.Blob || claimed[0].Size != len(payload) {
		t.Fatalf("claim: %v, %v; want the large message with its blob", claimed, err)
	}

	small, sp2 := spoolMessage(t, s, "small", payloadOf(courier.InlineMax, 2))
	defer sp2.Close()
	if small.HasBlob() || len(small.Payload) != courier.InlineMax {
		t.Fatalf("a payload of InlineMax bytes: blob %q, %d bytes inline; want it inline", small.Blob, len(small.Payload))
	}
	mustIngest(t, s, small)
	WantBlobUsage(t, s, 1, int64(len(payload)))
}

// A sweep removes exactly the blobs that no message refers to and no
// writer holds: an upload cut off, a blob whose message was not stored,
// and a blob whose message the retention purge took.
func testBlobSweep(t *testing.T, s courier.Store) {
	ctx := context.Background()
	blobs := s.Blobs()
	// Kept: a stored message's blob.
	kept := payloadOf(courier.InlineMax+1, 3)
	m, sp := spoolMessage(t, s, "kept", kept)
	mustIngest(t, s, m)
	sp.Close()

	// Held: being written, and committed but its message not stored yet.
	writing, err := blobs.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer writing.Close()
	writing.Write(payloadOf(1000, 4))
	committed, err := blobs.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer committed.Close()
	committed.Write(payloadOf(2000, 5))
	ref, err := committed.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if n := sweep(t, s); n != 0 {
		t.Fatalf("a sweep removed %d blobs while every one was referred to or held", n)
	}
	if r, err := blobs.Open(ctx, ref); err != nil {
		t.Fatalf("a held committed blob: %v", err)
	} else {
		r.Close()
	}

	// Let go of: the committed one without a message is an orphan now.
	committed.Close()
	// An upload cut off (closed without commit) leaves nothing.
	writing.Close()
	if n := sweep(t, s); n != 1 {
		t.Fatalf("a sweep removed %d blobs, want the 1 whose message was never stored", n)
	}
	if _, err := blobs.Open(ctx, ref); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("an orphan blob after the sweep: %v, want not found", err)
	}
	WantBlobUsage(t, s, 1, int64(len(kept)))

	// A committed blob that is aborted is gone at once.
	w, err := blobs.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("x"))
	aborted, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, err := blobs.Open(ctx, aborted); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("an aborted blob: %v, want not found", err)
	}

	// The purge takes the message; the sweep after it takes the blob.
	if _, err := s.Discard(ctx, "kept", courier.Action{At: base, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, courier.Purge{Before: base.Add(time.Hour)}, 10); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v", n, err)
	}
	if n := sweep(t, s); n != 1 {
		t.Fatalf("a sweep after the purge removed %d blobs, want 1", n)
	}
	WantBlobUsage(t, s, 0, 0)
}

// Every delivery of a published message refers to its blob, which stays
// while one of them is left.
func testBlobPublished(t *testing.T, s courier.Store) {
	ctx := context.Background()
	payload := payloadOf(courier.InlineMax+10, 6)
	publishSpooled(t, s, "pub", payload)
	if _, err := s.Discard(ctx, courier.DeliveryKey("pub", "b"), courier.Action{At: base, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Purge(ctx, courier.Purge{Before: base.Add(time.Hour)}, 10); err != nil || n != 1 {
		t.Fatalf("purge of one delivery: %d, %v", n, err)
	}
	if n := sweep(t, s); n != 0 {
		t.Fatalf("a sweep removed %d blobs while a delivery was left", n)
	}
	a := mustGet(t, s, courier.DeliveryKey("pub", "a"))
	if !bytes.Equal(ReadPayload(t, s, a), payload) {
		t.Fatal("the delivery left reads another payload")
	}
}

// A store's secret is made once and stays the same.
func testSecret(t *testing.T, s courier.Store) {
	ctx := context.Background()
	a, err := s.Secret(ctx, "claims")
	if err != nil || len(a) != 32 {
		t.Fatalf("secret: %d bytes, %v; want 32", len(a), err)
	}
	again, err := s.Secret(ctx, "claims")
	if err != nil || !bytes.Equal(a, again) {
		t.Fatalf("the secret asked again differs (%v)", err)
	}
	other, err := s.Secret(ctx, "other")
	if err != nil || bytes.Equal(a, other) {
		t.Fatalf("two secrets are the same (%v)", err)
	}
}

// WantOnlyPayload fails t unless s holds exactly one message, queued, whose
// payload is body, kept as a blob exactly when body is over InlineMax, and
// the blob area holds nothing else; it returns the message.
func WantOnlyPayload(t testing.TB, s courier.Store, body []byte) *courier.Message {
	t.Helper()
	ctx := context.Background()
	page, err := s.Messages(ctx, courier.MessageFilter{Limit: 10})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("%d messages stored (%v), want 1", len(page.Messages), err)
	}
	m, err := s.Message(ctx, page.Messages[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	blob := len(body) > courier.InlineMax
	if m.HasBlob() != blob || m.Size != len(body) || m.State != courier.StateQueued || (blob && m.Digest != courier.PayloadDigest(body)) {
		t.Fatalf("stored %s: blob %q, size %d, digest %q, %s; want a queued message of %d bytes, a blob: %v",
			m.ID, m.Blob, m.Size, m.Digest, m.State, len(body), blob)
	}
	if got := ReadPayload(t, s, m); !bytes.Equal(got, body) {
		t.Fatalf("read back %d bytes, want the %d sent", len(got), len(body))
	}
	wantBlobs, wantSize := 0, int64(0)
	if blob {
		wantBlobs, wantSize = 1, int64(len(body))
	}
	WantBlobUsage(t, s, wantBlobs, wantSize)
	return m
}
