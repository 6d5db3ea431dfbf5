package api_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
)

// refusalCounter is an Observer that counts the refusals by Admission.
type refusalCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *refusalCounter) Ingested(*courier.Message)     {}
func (c *refusalCounter) Acted(courier.ActionKind, int) {}
func (c *refusalCounter) IngestRefused(reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[reason]++
}

func (c *refusalCounter) count(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[reason]
}

// admissionServer is a keyed server with the Admission given, served
// without the OpenAPI check (which reads every body before the handler).
func admissionServer(t *testing.T, a api.Admission, store ...courier.Store) (*httptest.Server, *api.Server, *refusalCounter) {
	t.Helper()
	obs := &refusalCounter{}
	if len(store) == 0 {
		store = append(store, sqlitetest.Open(t))
	}
	srv := api.NewServer(api.Options{
		Store: store[0], Topology: testTopology(), MaxPayload: 4096, MaxBatchBytes: 1 << 20,
		Keys: testKeys(t), Observer: obs, Admission: a,
	})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts, srv, obs
}

// sendHeaders opens a connection and sends a request's head, announcing a
// body of length bytes, and none of the body: the sender then blocks, as
// a slow one would. The connection closes at the test's end (before the
// server does, as its handler may wait for the body).
func sendHeaders(t *testing.T, ts *httptest.Server, key, method, path string, length int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
		method, path, ts.Listener.Addr(), testSecrets[key], length)
	return conn
}

// readAnswer reads the answer on a connection whose request sent no body.
// The deadline only keeps a broken server from hanging the test.
func readAnswer(t *testing.T, conn net.Conn) (int, []byte, http.Header) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer while the body is still to come: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, resp.Header
}

// waitInFlight waits until the server has admitted bytes and items.
func waitInFlight(t *testing.T, srv *api.Server, bytes, items int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, n := srv.InFlight()
		if b == bytes && n == items {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("in flight: %d bytes, %d items; want %d, %d", b, n, bytes, items)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func call(t *testing.T, ts *httptest.Server, key, method, path, body string) (int, []byte, http.Header) {
	t.Helper()
	return (&testServer{Server: ts}).callAs(t, key, method, path, body)
}

func wantRetryAfter(t *testing.T, hdr http.Header) {
	t.Helper()
	if got := hdr.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
}

// TestAdmissionBytes fills the node's bound on bytes in flight with a
// batch whose sender is slow to send it: another sender's batch is
// refused 503 at once, before its body (which never comes) is read; the
// slow sender's own PUT is over its share, 429; reads, probes and a small
// PUT that fits still answer; once the slow batch goes, a PUT is taken.
func TestAdmissionBytes(t *testing.T) {
	ts, srv, obs := admissionServer(t, api.Admission{MaxBytes: 64 << 10, SenderShare: 0.5})
	slow := sendHeaders(t, ts, "erp", "POST", "/v1/messages/batch", 40<<10)
	waitInFlight(t, srv, 40<<10, 0)

	refused := sendHeaders(t, ts, "shop", "POST", "/v1/messages/batch", 40<<10)
	status, body, hdr := readAnswer(t, refused)
	wantError(t, status, body, http.StatusServiceUnavailable, courier.CodeUnavailable, "in flight")
	wantRetryAfter(t, hdr)

	// A sender that writes its whole body before it reads gets the answer.
	big := `{"messages":[` + strings.Repeat(" ", 40<<10) + `]}`
	status, body, hdr = call(t, ts, "shop", "POST", "/v1/messages/batch", big)
	wantError(t, status, body, http.StatusServiceUnavailable, courier.CodeUnavailable, "in flight")
	wantRetryAfter(t, hdr)

	status, body, hdr = call(t, ts, "erp", "PUT", "/v1/messages/erp-1", invoiceBody)
	wantError(t, status, body, http.StatusTooManyRequests, courier.CodeRateLimited, "share")
	wantRetryAfter(t, hdr)
	if obs.count(api.RefusedBytes) != 2 || obs.count(api.RefusedSenderBytes) != 1 {
		t.Errorf("refusals counted: %v, want two for bytes and one for a sender's bytes", obs.n)
	}

	for _, c := range []struct{ key, method, path, body string }{
		{"shop", "PUT", "/v1/messages/shop-1", invoiceBody}, // fits beside the slow batch
		{"ops", "GET", "/v1/messages", ""},
		{"ops", "GET", "/v1/endpoints", ""},
		{"", "GET", "/healthz", ""},
		{"", "GET", "/readyz", ""},
	} {
		if status, body, _ := call(t, ts, c.key, c.method, c.path, c.body); status >= 300 {
			t.Errorf("%s %s during the flood: %d %s", c.method, c.path, status, body)
		}
	}

	slow.Close()
	waitInFlight(t, srv, 0, 0)
	if status, body, _ := call(t, ts, "erp", "PUT", "/v1/messages/erp-1", invoiceBody); status != http.StatusCreated {
		t.Errorf("PUT after the flood: %d %s", status, body)
	}
}

// TestAdmissionItems fills the node's bound on messages in flight with
// single PUTs whose senders are slow: the next is refused 503 before its
// body is read, and a batch whose list would go over its key's share is
// refused 429.
func TestAdmissionItems(t *testing.T) {
	ts, srv, obs := admissionServer(t, api.Admission{MaxMessages: 4, SenderShare: 0.5})
	sendHeaders(t, ts, "erp", "PUT", "/v1/messages/a", 100)
	sendHeaders(t, ts, "shop", "PUT", "/v1/messages/b", 100)
	sendHeaders(t, ts, "shop", "PUT", "/v1/messages/c", 100)
	waitInFlight(t, srv, 300, 3)

	batch := `{"messages":[` + strings.TrimSuffix(strings.Repeat(invoiceBody+",", 2), ",") + `]}`
	status, body, hdr := call(t, ts, "erp", "POST", "/v1/messages/batch", batch)
	wantError(t, status, body, http.StatusTooManyRequests, courier.CodeRateLimited, "share")
	wantRetryAfter(t, hdr)

	sendHeaders(t, ts, "root", "PUT", "/v1/messages/d", 100)
	waitInFlight(t, srv, 400, 4)
	status, body, hdr = readAnswer(t, sendHeaders(t, ts, "limited", "PUT", "/v1/messages/e", 100))
	wantError(t, status, body, http.StatusServiceUnavailable, courier.CodeUnavailable, "messages")
	wantRetryAfter(t, hdr)
	if obs.count(api.RefusedMessages) != 1 || obs.count(api.RefusedSenderMessages) != 1 {
		t.Errorf("refusals counted: %v, want one for items and one for a sender's items", obs.n)
	}
	if status, body, _ := call(t, ts, "", "GET", "/readyz", ""); status != http.StatusOK {
		t.Errorf("readyz during the flood: %d %s", status, body)
	}
}

// TestAdmissionChunked counts a body without a length as the largest the
// request may have, until it is read.
func TestAdmissionChunked(t *testing.T) {
	ts, srv, _ := admissionServer(t, api.Admission{MaxBytes: 2 << 20})
	conn, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/messages/batch HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"mes\r\n", testSecrets["erp"])
	waitInFlight(t, srv, 1<<20, 0) // MaxBatchBytes
}

// TestAdmissionAlone checks that a request larger than the bound is
// taken when nothing else is in flight: it is not refused for ever.
func TestAdmissionAlone(t *testing.T) {
	ts, _, _ := admissionServer(t, api.Admission{MaxBytes: 10, MaxMessages: 1, SenderShare: 0.5})
	batch := `{"messages":[` + invoiceBody + `,` + strings.Replace(invoiceBody, "acme", "globex", 1) + `]}`
	status, body, _ := call(t, ts, "erp", "POST", "/v1/messages/batch", batch)
	if status != http.StatusOK {
		t.Fatalf("batch alone: %d %s", status, body)
	}
}

// slowPing is a store whose ping waits until its caller gives up while
// slow is set, as one behind a long queue of writes would: SQLite cannot
// be made that slow at will, so this one part is a stand-in.
type slowPing struct {
	courier.Store
	slow atomic.Bool
}

func (s *slowPing) Ping(ctx context.Context) error {
	if !s.slow.Load() {
		return s.Store.Ping(ctx)
	}
	<-ctx.Done()
	return ctx.Err()
}

// TestReadyzThroughAFlood checks that a ping slow behind ingest the store
// is finishing leaves the node ready, and that a slow ping with nothing
// in flight does not.
func TestReadyzThroughAFlood(t *testing.T) {
	store := &slowPing{Store: sqlitetest.Open(t)}
	ts, srv, _ := admissionServer(t, api.Admission{MaxBytes: 1 << 20}, store)
	store.slow.Store(true)
	status, body, _ := call(t, ts, "", "GET", "/readyz", "")
	wantError(t, status, body, http.StatusServiceUnavailable, courier.CodeUnavailable, "store")

	sendHeaders(t, ts, "erp", "PUT", "/v1/messages/slow", 100)
	waitInFlight(t, srv, 100, 1)
	if status, body, _ := call(t, ts, "shop", "PUT", "/v1/messages/done", invoiceBody); status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if status, body, _ := call(t, ts, "", "GET", "/readyz", ""); status != http.StatusOK {
		t.Errorf("readyz with ingest in flight that the store finishes: %d %s, want 200", status, body)
	}
}
