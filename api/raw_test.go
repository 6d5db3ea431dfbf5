package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// putRaw sends body as the payload itself of PUT /v1/messages/{id}, with
// the given headers; chunked makes its length unknown beforehand.
func (ts *testServer) putRaw(t *testing.T, id string, body []byte, header map[string]string, chunked bool) (int, []byte) {
	t.Helper()
	var r io.Reader = bytes.NewReader(body)
	if chunked {
		r = io.MultiReader(r) // hides the length: sent chunked
	}
	req, err := http.NewRequest("PUT", ts.URL+"/v1/messages/"+id, r)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	status, out, _ := ts.send(t, req)
	return status, out
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func hexSHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func blobUsage(t *testing.T, ts *testServer) (int, int64) {
	t.Helper()
	n, size, err := ts.store.Blobs().Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n, size
}

// A payload given as the body of a PUT is streamed to the blob area when
// it is over 1 MiB, read back whole through its payload URL, and a repeat
// is answered from the stored message without keeping a second copy.
func TestRawPutLargePayload(t *testing.T) {
	ts := newTestServer(t, func(o *api.Options) { o.MaxPayload = 16 << 20 })
	payload := randomBytes(t, 5<<20+123)
	header := map[string]string{
		api.HeaderType: "invoice", api.HeaderRoute: "acme", "Content-Type": "application/pdf",
		api.HeaderPrefix + "X-Tenant": "acme", api.HeaderOrderingKey: "customer-7", api.HeaderPriority: "3",
	}
	for _, chunked := range []bool{false, true} {
		id := "big-known-length"
		if chunked {
			id = "big-chunked"
		}
		status, body := ts.putRaw(t, id, payload, header, chunked)
		if status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", id, status, body)
		}
		m := decode[api.Message](t, body)
		if m.Size != len(payload) || m.ContentType != "application/pdf" || m.Headers["X-Tenant"] != "acme" ||
			m.OrderingKey != "customer-7" || m.Priority != 3 || m.Type != "invoice" {
			t.Fatalf("created %+v; want the fields of the headers and size %d", m, len(payload))
		}
		status, body, _ = ts.call(t, "GET", "/v1/messages/"+id, "")
		if status != http.StatusOK {
			t.Fatalf("GET: %d %s", status, body)
		}
		got := decode[api.Message](t, body)
		if got.PayloadURL != "/v1/messages/"+id+"/payload" || got.PayloadSHA256 != hexSHA256(payload) || got.Payload != nil || got.PayloadBase64 != "" {
			t.Fatalf("a large message shows payload_url %q sha256 %q and %d bytes of payload; want its URL and digest only",
				got.PayloadURL, got.PayloadSHA256, len(got.Payload)+len(got.PayloadBase64))
		}
		status, body, hdr := ts.call(t, "GET", got.PayloadURL, "")
		if status != http.StatusOK || !bytes.Equal(body, payload) {
			t.Fatalf("GET payload: %d, %d bytes, equal %v", status, len(body), bytes.Equal(body, payload))
		}
		if hdr.Get("Content-Type") != "application/pdf" || hdr.Get(api.HeaderSHA256) != hexSHA256(payload) {
			t.Errorf("payload served as %q with digest %q", hdr.Get("Content-Type"), hdr.Get(api.HeaderSHA256))
		}
		if !strings.HasPrefix(hdr.Get("Content-Disposition"), "attachment") || !strings.Contains(hdr.Get("Content-Security-Policy"), "sandbox") {
			t.Errorf("a sender's bytes served as a page: disposition %q, policy %q", hdr.Get("Content-Disposition"), hdr.Get("Content-Security-Policy"))
		}
		status, body, _ = ts.call(t, "GET", "/v1/messages/"+id+"?payload=base64", "")
		if asked := decode[api.Message](t, body); status != http.StatusOK || asked.PayloadBase64 != "" || asked.PayloadURL != got.PayloadURL {
			t.Fatalf("?payload=base64 of a large message: %d, %d bytes of base64, payload_url %q; want its URL only", status, len(asked.PayloadBase64), asked.PayloadURL)
		}
	}
	stored, err := ts.store.Message(context.Background(), "big-chunked")
	if err != nil || !stored.HasBlob() {
		t.Fatalf("stored %+v, %v; want it kept as a blob", stored, err)
	}
	if n, size := blobUsage(t, ts); n != 2 || size != 2*int64(len(payload)) {
		t.Fatalf("blob area: %d blobs of %d bytes, want 2 of %d", n, size, 2*len(payload))
	}

	// A repeat is 200, a different payload under the id 409: neither keeps
	// a copy.
	status, body := ts.putRaw(t, "big-chunked", payload, header, true)
	if status != http.StatusOK {
		t.Fatalf("repeat: %d %s", status, body)
	}
	other := bytes.Clone(payload)
	other[len(other)/2] ^= 1
	status, body = ts.putRaw(t, "big-chunked", other, header, false)
	wantError(t, status, body, http.StatusConflict, courier.CodeConflict, "big-chunked")
	if n, _ := blobUsage(t, ts); n != 2 {
		t.Fatalf("after a repeat and a conflict the blob area holds %d blobs, want the 2 stored", n)
	}

	// Over max_payload: 413, known beforehand or found while streaming, and
	// nothing kept.
	tooBig := randomBytes(t, 16<<20+1)
	for _, chunked := range []bool{false, true} {
		status, body = ts.putRaw(t, "too-big", tooBig, header, chunked)
		wantError(t, status, body, http.StatusRequestEntityTooLarge, courier.CodePayloadTooLarge, "max_payload")
	}
	if n, _ := blobUsage(t, ts); n != 2 {
		t.Fatalf("a refused upload left blobs behind: %d, want the 2 stored", n)
	}
	if _, err := ts.store.Message(context.Background(), "too-big"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("a refused upload was stored: %v", err)
	}
}

// A small raw payload stays inline; the header fields are checked as the
// JSON form's are.
func TestRawPutSmallPayloadAndBadHeaders(t *testing.T) {
	ts := newTestServer(t)
	status, body := ts.putRaw(t, "note-1", []byte("hello"), map[string]string{
		api.HeaderType: "invoice", api.HeaderRoute: "acme", "Content-Type": "text/plain",
		api.HeaderDeliverAfter: "2099-01-01T00:00:00Z",
	}, false)
	if status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if m := decode[api.Message](t, body); m.DeliverAfter == nil || m.DeliverAfter.Year() != 2099 {
		t.Errorf("deliver_after %v, want the header's", m.DeliverAfter)
	}
	stored, err := ts.store.Message(context.Background(), "note-1")
	if err != nil || stored.HasBlob() || string(stored.Payload) != "hello" {
		t.Fatalf("stored %q blob %q (%v); want the payload inline", stored.Payload, stored.Blob, err)
	}
	status, got, _ := ts.call(t, "GET", "/v1/messages/note-1/payload", "")
	if status != http.StatusOK || string(got) != "hello" {
		t.Fatalf("payload: %d %q", status, got)
	}
	for _, tc := range []struct {
		header, value, want string
	}{
		{api.HeaderPriority, "high", api.HeaderPriority},
		{api.HeaderDeliverAfter, "tomorrow", api.HeaderDeliverAfter},
		{api.HeaderRoute, "nowhere", "nowhere"},
	} {
		status, body := ts.putRaw(t, "bad", []byte("x"), map[string]string{api.HeaderType: "invoice", api.HeaderRoute: "acme", tc.header: tc.value}, false)
		if status < 400 || status >= 500 || !strings.Contains(string(body), tc.want) {
			t.Errorf("%s: %s: %d %s; want a refusal naming %s", tc.header, tc.value, status, body, tc.want)
		}
	}
}

// A JSON payload over 1 MiB is kept as a blob too, so the same message
// sent either way is the same content: its raw repeat is answered 200.
func TestJSONPayloadOverInlineMaxIsABlob(t *testing.T) {
	ts := newTestServer(t, func(o *api.Options) { o.MaxPayload, o.MaxBatchBytes = 4<<20, 8<<20 })
	payload := randomBytes(t, courier.InlineMax+1000)
	status, body, _ := ts.call(t, "PUT", "/v1/messages/both-ways",
		`{"type":"invoice","route":"acme","content_type":"application/octet-stream","payload_base64":"`+base64.StdEncoding.EncodeToString(payload)+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("JSON PUT: %d %s", status, body)
	}
	stored, err := ts.store.Message(context.Background(), "both-ways")
	if err != nil || !stored.HasBlob() || stored.Digest != hexSHA256(payload) {
		t.Fatalf("stored blob %q digest %s (%v); want a blob of the payload", stored.Blob, stored.Digest, err)
	}
	status, body = ts.putRaw(t, "both-ways", payload, map[string]string{
		api.HeaderType: "invoice", api.HeaderRoute: "acme", "Content-Type": "application/octet-stream"}, false)
	if status != http.StatusOK {
		t.Fatalf("the same message sent raw: %d %s, want 200", status, body)
	}
	// In a batch too; an item refused keeps no blob.
	status, body, _ = ts.call(t, "POST", "/v1/messages/batch", `{"messages":[
		{"id":"b1","type":"invoice","route":"acme","payload_base64":"`+base64.StdEncoding.EncodeToString(payload[:courier.InlineMax+1])+`"},
		{"id":"b2","type":"invoice","route":"nowhere","payload_base64":"`+base64.StdEncoding.EncodeToString(payload[:courier.InlineMax+2])+`"}]}`)
	if status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, body)
	}
	if n, _ := blobUsage(t, ts); n != 2 {
		t.Fatalf("blob area holds %d blobs, want 2 (both-ways and b1)", n)
	}
}

// committedButFailed is a store whose Ingest stores the messages and then
// reports a failure, as a store does when its caller's wait ended just
// before the commit it had asked for.
type committedButFailed struct{ courier.Store }

func (s committedButFailed) Ingest(ctx context.Context, msgs []*courier.Message) ([]courier.IngestResult, error) {
	if _, err := s.Store.Ingest(ctx, msgs); err != nil {
		return nil, err
	}
	return nil, courier.Errorf(courier.CodeUnavailable, "the answer was lost")
}

// An ingest whose outcome the store did not tell keeps its blob, held from
// the sweep: the message may be stored, as here, and must keep its payload.
func TestRawPutKeepsTheBlobWhenTheStoreFails(t *testing.T) {
	var inner courier.Store
	ts := newTestServer(t, func(o *api.Options) {
		o.MaxPayload = 8 << 20
		inner = o.Store
		o.Store = committedButFailed{o.Store}
	})
	payload := randomBytes(t, 2<<20)
	status, body := ts.putRaw(t, "lost-answer", payload, map[string]string{api.HeaderType: "invoice", api.HeaderRoute: "acme", "Content-Type": "application/octet-stream"}, false)
	wantError(t, status, body, http.StatusServiceUnavailable, courier.CodeUnavailable, "lost")
	m, err := inner.Message(context.Background(), "lost-answer")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := inner.Blobs().Sweep(context.Background(), inner.ReferencedBlobs); err != nil || n != 0 {
		t.Fatalf("a sweep removed %d blobs (%v)", n, err)
	}
	r, err := m.OpenPayload(context.Background(), inner.Blobs())
	if err != nil {
		t.Fatalf("the stored message lost its payload: %v", err)
	}
	got, _ := io.ReadAll(r)
	r.Close()
	if !bytes.Equal(got, payload) {
		t.Fatal("the stored message's payload differs")
	}
	// The sender tries again and is told it is there.
	status, body = ts.putRaw(t, "lost-answer", payload, map[string]string{api.HeaderType: "invoice", api.HeaderRoute: "acme", "Content-Type": "application/octet-stream"}, false)
	if status != http.StatusOK {
		t.Fatalf("repeat: %d %s", status, body)
	}
}

// A message over 1 MiB stored in its row, as one that large was before
// blobs, sent again is a repeat: its hash is compared as it was made then.
func TestRepeatOfAMessageStoredBeforeBlobs(t *testing.T) {
	ts := newTestServer(t, func(o *api.Options) { o.MaxPayload, o.MaxBatchBytes = 4<<20, 8<<20 })
	payload := randomBytes(t, courier.InlineMax+500)
	old := &courier.Message{ID: "from-before", Type: "invoice", Route: "acme", Payload: payload, ContentType: "application/octet-stream"}
	courier.Accept(old, courier.DefaultPolicy(), false, time.Now())
	if _, err := ts.store.Ingest(context.Background(), []*courier.Message{old}); err != nil {
		t.Fatal(err)
	}
	body := `{"type":"invoice","route":"acme","payload_base64":"` + base64.StdEncoding.EncodeToString(payload) + `"}`
	if status, answer, _ := ts.call(t, "PUT", "/v1/messages/from-before", body); status != http.StatusOK {
		t.Fatalf("repeat of a message stored in its row: %d %s, want 200", status, answer)
	}
	status, answer, _ := ts.call(t, "POST", "/v1/messages/batch", `{"messages":[{"id":"from-before",`+body[1:]+`]}`)
	if status != http.StatusOK || !strings.Contains(string(answer), `"status":200`) {
		t.Fatalf("repeat in a batch: %d %s, want its item 200", status, answer)
	}
	if n, _ := blobUsage(t, ts); n != 0 {
		t.Fatalf("the repeats kept %d blobs", n)
	}
	other := bytes.Clone(payload)
	other[0] ^= 1
	body = `{"type":"invoice","route":"acme","content_type":"application/octet-stream","payload_base64":"` + base64.StdEncoding.EncodeToString(other) + `"}`
	status, answer, _ = ts.call(t, "PUT", "/v1/messages/from-before", body)
	wantError(t, status, answer, http.StatusConflict, courier.CodeConflict, "from-before")
}
