package http_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/blobtest"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// blobSize is the payload of these tests: well past courier.InlineMax.
const blobSize = 12 << 20

// received is one request as blobReceiver saw it.
type received struct {
	contentLength int64
	header        http.Header
	body          []byte
}

// blobReceiver is a receiver that keeps every request it gets, body whole.
func blobReceiver(t *testing.T) (url string, got func() []received) {
	t.Helper()
	var mu sync.Mutex
	var reqs []received
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		reqs = append(reqs, received{contentLength: r.ContentLength, header: r.Header.Clone(), body: body})
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []received {
		mu.Lock()
		defer mu.Unlock()
		return append([]received(nil), reqs...)
	}
}

func sendBlob(tr *httptransport.Transport, e *courier.Endpoint, m *courier.Message, blobs courier.Blobs) courier.Result {
	return tr.Send(context.Background(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Blobs: blobs})
}

func wantBody(t *testing.T, body []byte, m *courier.Message) {
	t.Helper()
	if got := courier.PayloadDigest(body); got != m.Digest || len(body) != m.Size {
		t.Fatalf("the receiver got %d bytes with sha256 %s, want %d with %s", len(body), got, m.Size, m.Digest)
	}
}

// A blob goes out streamed with its length, signed over its bytes, and a
// second attempt reads it from the store again.
func TestBlobPayloadIsStreamedAndSigned(t *testing.T) {
	t.Parallel()
	blobs := blobtest.Area(t)
	m := blobtest.Message(t, blobs, "big-1", blobSize, 1)
	url, got := blobReceiver(t)
	tr := newTransport(t, httptransport.Options{})
	const secret = "a plain shared secret"
	e := endpoint("blob", url+"/in")
	e.Timeout = 30 * time.Second
	httptransport.Of(e).Secrets = []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", secret}
	for i := range 2 {
		if res := sendBlob(tr, e, m, blobs); !res.Delivered() {
			t.Fatalf("send %d: %+v", i+1, res)
		}
	}
	reqs := got()
	if len(reqs) != 2 {
		t.Fatalf("the receiver got %d requests, want 2", len(reqs))
	}
	for i, r := range reqs {
		if r.contentLength != int64(m.Size) {
			t.Errorf("request %d: Content-Length %d, want %d", i+1, r.contentLength, m.Size)
		}
		wantBody(t, r.body, m)
		if err := verifyStandardWebhook(secret, r.header, r.body, now, time.Minute); err != nil {
			t.Errorf("request %d: %v", i+1, err)
		}
		if got := r.header.Get("Content-Type"); got != "application/octet-stream" {
			t.Errorf("request %d: Content-Type %q", i+1, got)
		}
	}
}

// Every redirect hop reads the blob anew.
func TestBlobPayloadFollowsRedirects(t *testing.T) {
	t.Parallel()
	blobs := blobtest.Area(t)
	m := blobtest.Message(t, blobs, "big-2", 5<<20, 2)
	s, tr := sinkAndTransport(t)
	s.Script("/from", sink.Respond(307).WithHeader("Location", "/via"))
	s.Script("/via", sink.Respond(308).WithHeader("Location", "/to"))
	e := endpoint("blob-redirect", s.URL()+"/from")
	e.Timeout = 30 * time.Second
	httptransport.Of(e).FollowRedirects = true
	httptransport.Of(e).Secrets = []string{"k"}
	if res := sendBlob(tr, e, m, blobs); !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	for _, path := range []string{"/from", "/via", "/to"} {
		a := onlyArrival(t, s, path)
		wantBody(t, a.Body, m)
		if err := verifyStandardWebhook("k", a.Header, a.Body, now, time.Minute); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	}
}

// A kept-alive connection the receiver closed as the request came is
// tried again on a new one, with the blob read from its start.
func TestStaleConnectionResendsTheBlobWhole(t *testing.T) {
	t.Parallel()
	blobs := blobtest.Area(t)
	m := blobtest.Message(t, blobs, "big-3", 3<<20, 3)
	var mu sync.Mutex
	var bodies [][]byte
	conns := 0
	addr := rawServer(t, func(c net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		br := bufio.NewReader(c)
		for i := 1; ; i++ {
			_, body, err := readRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			bodies = append(bodies, body)
			mu.Unlock()
			if first && i == 2 {
				return // closed as the request arrived
			}
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("blob-stale", "http://"+addr+"/in")
	e.Timeout = 30 * time.Second
	for i := range 2 {
		if res := sendBlob(tr, e, m, blobs); !res.Delivered() {
			t.Fatalf("send %d: %+v", i+1, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 3 {
		t.Fatalf("the receiver read %d requests, want 3", len(bodies))
	}
	for _, b := range bodies {
		wantBody(t, b, m)
	}
}

// A payload the store cannot give is an attempt that failed on this side:
// class transport, a sentence that says so, and nothing sent.
func TestUnreadableBlobFailsTheAttempt(t *testing.T) {
	t.Parallel()
	blobs := blobtest.Area(t)
	s, tr := sinkAndTransport(t)
	missing := func() *courier.Message {
		return &courier.Message{ID: "gone", Type: "archive", Blob: blobtest.MissingRef, Size: 2 << 20, Digest: "00"}
	}
	short := blobtest.Message(t, blobs, "short", 2<<20, 4)
	short.Size += 100 // the store's row says more than the blob holds
	for _, tc := range []struct {
		name    string
		m       *courier.Message
		blobs   courier.Blobs
		secrets []string
		want    string
	}{
		{"missing", missing(), blobs, nil, "is not there"},
		{"missing, signed", missing(), blobs, []string{"k"}, "is not there"},
		{"no blob area", missing(), nil, nil, "keeps no payloads larger than"},
		{"shorter than stored, signed", short, blobs, []string{"k"}, "the payload ended after 2097152 of the 2097252 bytes stored"},
		// Last: the receiver may record the start it saw after the send
		// returned, which would be taken for a later case's.
		{"shorter than stored", short, blobs, nil, "the payload ended after 2097152 of the 2097252 bytes stored"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := endpoint("unreadable", s.URL()+"/unreadable")
			httptransport.Of(e).Secrets = tc.secrets
			before := len(s.Arrivals("/unreadable"))
			res := sendBlob(tr, e, tc.m, tc.blobs)
			wantClass(t, res, courier.ClassTransport)
			wantError(t, res, "cannot read the payload from the store")
			wantError(t, res, tc.want)
			// Unsigned, a blob shorter than stored is found short only as
			// it streams: the receiver may see the start of a request cut
			// off before its Content-Length, never a whole one (checked
			// below). Any other case fails before a byte is sent.
			if n := len(s.Arrivals("/unreadable")) - before; n != 0 && (tc.m != short || tc.secrets != nil) {
				t.Fatalf("the receiver got %d requests", n)
			}
		})
	}
	for _, a := range s.Arrivals("/unreadable") {
		if len(a.Body) >= short.Size {
			t.Fatalf("the receiver got a request of %d bytes, the whole stored size", len(a.Body))
		}
	}
}

// A step's envelope carries a blob read whole, up to a bound past which the
// step is rejected for good.
func TestStepEnvelopeWithABlob(t *testing.T) {
	blobs := blobtest.Area(t)
	m := blobtest.Message(t, blobs, "big-4", 2<<20, 5)
	s, tr := sinkAndTransport(t)
	e := endpoint("blob-envelope", s.URL()+"/envelope")
	e.Timeout = 30 * time.Second
	step := &courier.StepContext{Step: 1, Steps: 2, Envelope: true, Responses: map[int]string{}}
	d := courier.Delivery{Message: m, Endpoint: e, Attempt: 1, Step: step, Blobs: blobs}
	if res := tr.Send(context.Background(), d); !res.Delivered() {
		t.Fatalf("result = %+v", res)
	}
	var env struct {
		PayloadBase64 []byte `json:"payload_base64"`
		ContentType   string `json:"content_type"`
	}
	if err := json.Unmarshal(onlyArrival(t, s, "/envelope").Body, &env); err != nil {
		t.Fatal(err)
	}
	wantBody(t, env.PayloadBase64, m)

	defer httptransport.SetMaxEnvelopePayload(1 << 20)()
	res := tr.Send(context.Background(), d)
	wantClass(t, res, courier.ClassRejected)
	wantError(t, res, "the payload of 2097152 bytes is over the 1048576 bytes a step's envelope can carry")
	if n := len(s.Arrivals("/envelope")); n != 1 {
		t.Fatalf("the receiver got %d requests, want the first only", n)
	}
}
