package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
)

type testServer struct {
	*httptest.Server
	store    courier.Store
	ingested atomic.Int64
}

func testTopology() *courier.Topology {
	invoice := courier.DefaultPolicy()
	invoice.Name, invoice.Priority = "invoice", 8
	return &courier.Topology{
		Routes: map[string]*courier.Route{
			"acme":   {Name: "acme", Endpoints: []string{"acme-primary"}, Strategy: courier.StrategySingle},
			"globex": {Name: "globex", Endpoints: []string{"globex"}, Strategy: courier.StrategySingle},
		},
		Policies: map[string]*courier.Policy{"default": courier.DefaultPolicy(), "invoice": invoice},
	}
}

func newTestServer(t *testing.T, mutate ...func(*api.Options)) *testServer {
	t.Helper()
	store := sqlitetest.Open(t)
	ts := &testServer{store: store}
	o := api.Options{
		Store: store, Topology: testTopology(), MaxPayload: 4096, MaxBatchBytes: 1 << 20,
		DueFunc: func([]string) { ts.ingested.Add(1) },
	}
	for _, f := range mutate {
		f(&o)
	}
	ts.Server = httptest.NewServer(validated(t, api.NewServer(o)))
	t.Cleanup(ts.Close)
	return ts
}

// call sends a request without a key and returns the status, body and
// headers of the answer.
func (ts *testServer) call(t *testing.T, method, path, body string) (int, []byte, http.Header) {
	t.Helper()
	return ts.callAs(t, "", method, path, body)
}

// wantError checks an error answer: its status and the error body of docs/design.md §7.
func wantError(t *testing.T, status int, body []byte, wantStatus int, wantCode courier.Code, wantIn string) {
	t.Helper()
	if status != wantStatus {
		t.Fatalf("status %d, want %d; body %s", status, wantStatus, body)
	}
	var eb struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error body %s is not {\"error\":{\"code\",\"message\"}}: %v", body, err)
	}
	if eb.Error.Code != string(wantCode) {
		t.Errorf("code %q, want %q (message %q)", eb.Error.Code, wantCode, eb.Error.Message)
	}
	if eb.Error.Message == "" || !strings.Contains(eb.Error.Message, wantIn) {
		t.Errorf("message %q does not mention %q", eb.Error.Message, wantIn)
	}
}

func decode[T any](t *testing.T, body []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	return v
}

const invoiceBody = `{"type":"invoice","route":"acme","payload":{"total":42},"headers":{"X-Tenant":"acme"}}`

func suspendMessage(t *testing.T, store courier.Store, id, typ string, reason courier.Reason) {
	t.Helper()
	m := &courier.Message{ID: id, Type: typ, Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	m.State, m.Reason, m.FinishedAt = courier.StateSuspended, reason, time.Now()
	if _, err := store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
}

func TestRoutingErrors(t *testing.T) {
	ts := newTestServer(t)
	status, body, _ := ts.call(t, "GET", "/v2/nothing", "")
	wantError(t, status, body, 404, courier.CodeNotFound, "/v2/nothing")
	status, body, hdr := ts.call(t, "DELETE", "/v1/messages/x", "")
	wantError(t, status, body, 405, courier.CodeInvalidArgument, "DELETE")
	if !strings.Contains(hdr.Get("Allow"), "GET") {
		t.Errorf("Allow %q", hdr.Get("Allow"))
	}
}

// A node that should take no traffic although its store answers (on
// PostgreSQL: it lost its presence, and delivers nothing) is not ready,
// and says why; it is still alive.
func TestNotReadyWhileTheNodeSaysSo(t *testing.T) {
	var why atomic.Pointer[error]
	ts := newTestServer(t, func(o *api.Options) {
		o.ReadyFunc = func() ([]string, error) {
			if err := why.Load(); err != nil {
				return nil, *err
			}
			return []string{"a note"}, nil
		}
	})
	if status, body, _ := ts.call(t, "GET", "/readyz", ""); status != 200 || !strings.Contains(string(body), `"notes":["a note"]`) {
		t.Fatalf("readyz of a ready node: %d %s, want 200 with its note", status, body)
	}
	err := errors.New("this node is not present in the store")
	why.Store(&err)
	status, body, _ := ts.call(t, "GET", "/readyz", "")
	wantError(t, status, body, 503, courier.CodeUnavailable, "not present")
	if status, _, _ := ts.call(t, "GET", "/healthz", ""); status != 200 {
		t.Errorf("healthz is liveness and stays 200, got %d", status)
	}
	why.Store(nil)
	if status, _, _ := ts.call(t, "GET", "/readyz", ""); status != 200 {
		t.Fatalf("readyz once the node is back: %d", status)
	}
}

// A store that cannot write makes ingest answer 503, never 201.
func TestStoreDown(t *testing.T) {
	ts := newTestServer(t)
	if status, _, _ := ts.call(t, "GET", "/readyz", ""); status != 200 {
		t.Fatalf("readyz with a working store: %d", status)
	}
	if status, _, _ := ts.call(t, "GET", "/healthz", ""); status != 200 {
		t.Fatalf("healthz: %d", status)
	}
	ts.store.Close()
	status, body, hdr := ts.call(t, "PUT", "/v1/messages/x", invoiceBody)
	wantError(t, status, body, 503, courier.CodeUnavailable, "store")
	if hdr.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/batch", `{"messages":[`+invoiceBody+`]}`)
	wantError(t, status, body, 503, courier.CodeUnavailable, "store")
	status, body, _ = ts.call(t, "GET", "/readyz", "")
	wantError(t, status, body, 503, courier.CodeUnavailable, "store")
	if status, _, _ := ts.call(t, "GET", "/healthz", ""); status != 200 {
		t.Errorf("healthz is liveness and stays 200, got %d", status)
	}
}

func TestClient(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	c := api.NewClient(strings.TrimPrefix(ts.URL, "http://"), "")
	m, created, err := c.Ingest(ctx, api.IngestRequest{ID: "c-1", Type: "invoice", Route: "acme", Payload: json.RawMessage(`[1,2]`)})
	if err != nil || !created || m.ID != "c-1" {
		t.Fatalf("Ingest: %+v %v %v", m, created, err)
	}
	_, created, err = c.Ingest(ctx, api.IngestRequest{ID: "c-1", Type: "invoice", Route: "acme", Payload: json.RawMessage(`[1,2]`)})
	if err != nil || created {
		t.Fatalf("repeat Ingest: created %v, %v", created, err)
	}
	_, _, err = c.Ingest(ctx, api.IngestRequest{Type: "invoice", Route: "nowhere", Payload: json.RawMessage(`1`)})
	if courier.ErrorCode(err) != courier.CodeInvalidArgument || !strings.Contains(courier.ErrorMessage(err), "nowhere") {
		t.Fatalf("unknown route through the client: %v", err)
	}
	got, err := c.Message(ctx, "c-1")
	if err != nil || string(got.Payload) != "[1,2]" {
		t.Fatalf("Message: %+v %v", got, err)
	}
	if _, err := c.Message(ctx, "nope"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("missing message: %v", err)
	}
	res, err := c.IngestBatch(ctx, []api.IngestRequest{{Type: "t", Route: "acme", Payload: json.RawMessage(`1`)}, {Type: "t", Route: "x", Payload: json.RawMessage(`1`)}})
	if err != nil || len(res) != 2 || res[0].Status != 201 || res[1].Status != 422 {
		t.Fatalf("IngestBatch: %+v %v", res, err)
	}
	list, err := c.Messages(ctx, courier.MessageFilter{Route: "acme", Limit: 1})
	if err != nil || len(list.Messages) != 1 || list.NextCursor == "" {
		t.Fatalf("Messages: %+v %v", list, err)
	}
	if err := c.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	down := api.NewClient("127.0.0.1:1", "")
	if err := down.Ready(ctx); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Fatalf("unreachable server: %v", err)
	}
}

// Answers are JSON, not HTML: <, > and & are written as they are, in error
// messages and in the rest, as a person reading the body expects.
func TestBodiesKeepAngleBracketsAndAmpersands(t *testing.T) {
	ts := newTestServer(t)
	status, body, _ := ts.call(t, "PUT", "/v1/messages/a", `{"type":"invoice","route":"<acme&co>","payload":1}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "<acme&co>")
	if !bytes.Contains(body, []byte("<acme&co>")) {
		t.Errorf("the error body escapes the route's name: %s", body)
	}
	if status, body, _ = ts.call(t, "PUT", "/v1/messages/b", `{"type":"invoice","route":"acme","payload":{"html":"<b>&amp;</b>"}}`); status != http.StatusCreated {
		t.Fatalf("ingest: %d %s", status, body)
	}
	if status, body, _ = ts.call(t, "GET", "/v1/messages/b", ""); status != http.StatusOK || !bytes.Contains(body, []byte(`"<b>&amp;</b>"`)) {
		t.Errorf("GET answered %d with %s, want the payload's <, > and & as they are", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages?state=bogus", "")
	wantError(t, status, body, 422, courier.CodeInvalidArgument, courier.OneOf(courier.States))
}
