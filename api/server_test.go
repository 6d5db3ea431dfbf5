package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/sqlite"
	"github.com/google/uuid"
)

type testServer struct {
	*httptest.Server
	store    *sqlite.Store
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
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "courier.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := &testServer{store: store}
	o := api.Options{
		Store: store, Topology: testTopology(), MaxPayload: 4096, MaxBatchBytes: 1 << 20,
		DueFunc: func([]string) { ts.ingested.Add(1) },
	}
	for _, f := range mutate {
		f(&o)
	}
	ts.Server = httptest.NewServer(api.NewServer(o))
	t.Cleanup(func() { ts.Close(); store.Close() })
	return ts
}

// call sends a request and returns the status and body.
func (ts *testServer) call(t *testing.T, method, path, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data, resp.Header
}

// wantError checks an error answer: its status and the DESIGN error body.
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

func TestPutIdempotency(t *testing.T) {
	ts := newTestServer(t)
	status, body, hdr := ts.call(t, "PUT", "/v1/messages/inv-1", invoiceBody)
	if status != http.StatusCreated {
		t.Fatalf("first PUT: %d %s", status, body)
	}
	m := decode[api.Message](t, body)
	if m.ID != "inv-1" || m.State != courier.StateQueued || m.Priority != 8 || m.ContentType != "application/json" {
		t.Errorf("created message: %+v (want queued, priority 8 from the invoice policy, application/json)", m)
	}
	if hdr.Get("Location") != "/v1/messages/inv-1" {
		t.Errorf("Location %q", hdr.Get("Location"))
	}
	if ts.ingested.Load() != 1 {
		t.Errorf("ingest hook called %d times, want 1", ts.ingested.Load())
	}

	status, body, _ = ts.call(t, "PUT", "/v1/messages/inv-1", invoiceBody)
	if status != http.StatusOK {
		t.Fatalf("same PUT again: %d %s, want 200", status, body)
	}
	if again := decode[api.Message](t, body); !again.CreatedAt.Equal(m.CreatedAt) {
		t.Errorf("repeat answered created_at %v, want the first %v", again.CreatedAt, m.CreatedAt)
	}
	if ts.ingested.Load() != 1 {
		t.Errorf("a repeat woke the engine")
	}
	// A message scheduled for later does not wake the engine: its poll finds it.
	later := `{"type":"invoice","route":"acme","payload":1,"deliver_after":"2099-01-01T00:00:00Z"}`
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/later", later); status != http.StatusCreated {
		t.Fatalf("scheduled message: %d %s", status, body)
	}
	if ts.ingested.Load() != 1 {
		t.Errorf("a message due in 2099 woke the engine")
	}

	status, body, _ = ts.call(t, "PUT", "/v1/messages/inv-1", strings.Replace(invoiceBody, "42", "43", 1))
	wantError(t, status, body, http.StatusConflict, courier.CodeConflict, "inv-1")

	// The stored payload is the first one, byte for byte.
	status, body, _ = ts.call(t, "GET", "/v1/messages/inv-1", "")
	if status != http.StatusOK {
		t.Fatalf("GET: %d %s", status, body)
	}
	if got := decode[api.Message](t, body); string(got.Payload) != `{"total":42}` || got.Headers["X-Tenant"] != "acme" {
		t.Errorf("stored payload %s headers %v", got.Payload, got.Headers)
	}
}

func TestPostAssignsUUIDv7(t *testing.T) {
	ts := newTestServer(t)
	status, body, _ := ts.call(t, "POST", "/v1/messages", `{"type":"order.created","route":"globex","payload_base64":"`+
		base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xff})+`"}`)
	if status != http.StatusCreated {
		t.Fatalf("%d %s", status, body)
	}
	m := decode[api.Message](t, body)
	id, err := uuid.Parse(m.ID)
	if err != nil || id.Version() != 7 {
		t.Fatalf("assigned id %q is not a UUIDv7 (%v)", m.ID, err)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/"+m.ID, "")
	if status != http.StatusOK {
		t.Fatalf("%d %s", status, body)
	}
	got := decode[api.Message](t, body)
	if got.ContentType != "application/octet-stream" || got.PayloadBase64 != "AAEC/w==" || got.Priority != 0 {
		t.Errorf("binary message read back as %+v", got)
	}

	// POST with an id in the body is idempotent like PUT.
	for want := range []int{http.StatusCreated, http.StatusOK} {
		status, body, _ := ts.call(t, "POST", "/v1/messages", `{"id":"o-1","type":"order","route":"acme","payload":"x"}`)
		if status != []int{http.StatusCreated, http.StatusOK}[want] {
			t.Fatalf("POST with id, round %d: %d %s", want, status, body)
		}
	}
}

func TestIngestErrors(t *testing.T) {
	ts := newTestServer(t)
	big := strings.Repeat("a", 5000)
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		status int
		code   courier.Code
		in     string
	}{
		{"unknown route", "PUT", "/v1/messages/a", `{"type":"invoice","route":"nowhere","payload":1}`, 422, courier.CodeInvalidArgument, `"nowhere"`},
		{"invalid type", "PUT", "/v1/messages/a", `{"type":"in voice","route":"acme","payload":1}`, 422, courier.CodeInvalidArgument, "type"},
		{"type too long", "PUT", "/v1/messages/a", `{"type":"` + strings.Repeat("t", 129) + `","route":"acme","payload":1}`, 422, courier.CodeInvalidArgument, "type"},
		{"missing type", "PUT", "/v1/messages/a", `{"route":"acme","payload":1}`, 422, courier.CodeInvalidArgument, "type is required"},
		{"missing route", "PUT", "/v1/messages/a", `{"type":"invoice","payload":1}`, 422, courier.CodeInvalidArgument, "route is required"},
		{"invalid id", "PUT", "/v1/messages/a%20b", `{"type":"invoice","route":"acme","payload":1}`, 422, courier.CodeInvalidArgument, "id"},
		{"id too long", "POST", "/v1/messages", `{"id":"` + strings.Repeat("i", 257) + `","type":"invoice","route":"acme","payload":1}`, 422, courier.CodeInvalidArgument, "id"},
		{"ids differ", "PUT", "/v1/messages/a", `{"id":"b","type":"invoice","route":"acme","payload":1}`, 422, courier.CodeInvalidArgument, "differs"},
		{"priority out of range", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"priority":10}`, 422, courier.CodeInvalidArgument, "priority"},
		{"expired", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"expires_at":"2001-01-01T00:00:00Z"}`, 422, courier.CodeInvalidArgument, "expires_at"},
		{"bad content type", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"content_type":"not a type"}`, 422, courier.CodeInvalidArgument, "content_type"},
		{"bad header", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"headers":{"Bad Name":"x"}}`, 422, courier.CodeInvalidArgument, "header"},
		{"both payloads", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"payload_base64":"AA=="}`, 400, courier.CodeInvalidArgument, "exactly one"},
		{"no payload", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme"}`, 400, courier.CodeInvalidArgument, "exactly one"},
		{"null payload", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":null}`, 400, courier.CodeInvalidArgument, "exactly one"},
		{"malformed JSON", "PUT", "/v1/messages/a", `{"type":"invoice",`, 400, courier.CodeInvalidArgument, "JSON"},
		{"not JSON", "POST", "/v1/messages", `hello`, 400, courier.CodeInvalidArgument, "JSON"},
		{"empty body", "POST", "/v1/messages", ``, 400, courier.CodeInvalidArgument, "empty"},
		{"unknown field", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"colour":"red"}`, 400, courier.CodeInvalidArgument, "colour"},
		{"wrong field type", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"priority":"high"}`, 400, courier.CodeInvalidArgument, "priority"},
		{"bad time", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1,"deliver_after":"tomorrow"}`, 400, courier.CodeInvalidArgument, "tomorrow"},
		{"trailing data", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":1} {}`, 400, courier.CodeInvalidArgument, "after the JSON"},
		{"bad base64", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload_base64":"@@@"}`, 400, courier.CodeInvalidArgument, "base64"},
		{"payload too large", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":"` + big + `"}`, 413, courier.CodePayloadTooLarge, "limit is 4096"},
		{"base64 payload too large", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload_base64":"` + base64.StdEncoding.EncodeToString([]byte(big)) + `"}`, 413, courier.CodePayloadTooLarge, "4096"},
		{"body too large", "PUT", "/v1/messages/a", `{"type":"invoice","route":"acme","payload":"` + strings.Repeat("b", 80<<10) + `"}`, 413, courier.CodePayloadTooLarge, "request body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := ts.call(t, tt.method, tt.path, tt.body)
			wantError(t, status, body, tt.status, tt.code, tt.in)
		})
	}
	// Nothing of the refused requests was stored.
	_, body, _ := ts.call(t, "GET", "/v1/messages", "")
	if l := decode[api.MessageList](t, body); len(l.Messages) != 0 {
		t.Fatalf("refused requests stored %d messages", len(l.Messages))
	}
}

func TestBatch(t *testing.T) {
	ts := newTestServer(t)
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/dup", invoiceBody); status != 201 {
		t.Fatalf("%d %s", status, body)
	}
	items := []string{
		`{"id":"b-1","type":"invoice","route":"acme","payload":{"n":1}}`,
		`{"id":"b-2","type":"invoice","route":"nowhere","payload":{"n":2}}`,
		`{"type":"invoice","route":"acme","payload":{"n":3}}`,
		strings.Replace(invoiceBody, `{"type"`, `{"id":"dup","type"`, 1),
		strings.Replace(strings.Replace(invoiceBody, "42", "7", 1), `{"type"`, `{"id":"dup","type"`, 1),
		`{"id":"b-6","type":"invoice","route":"acme"}`,
		`{"id":"b-7","type":"invoice","route":"acme","payload":"` + strings.Repeat("x", 5000) + `"}`,
		`"not an object"`,
		`{"id":"b-1","type":"invoice","route":"acme","payload":{"n":1}}`,
	}
	status, body, _ := ts.call(t, "POST", "/v1/messages/batch", `{"messages":[`+strings.Join(items, ",")+`]}`)
	if status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, body)
	}
	res := decode[api.BatchResponse](t, body).Results
	want := []struct {
		id     string
		status int
		code   courier.Code
	}{
		{"b-1", 201, ""}, {"b-2", 422, courier.CodeInvalidArgument}, {"", 201, ""}, {"dup", 200, ""},
		{"dup", 409, courier.CodeConflict}, {"b-6", 400, courier.CodeInvalidArgument}, {"b-7", 413, courier.CodePayloadTooLarge},
		{"", 400, courier.CodeInvalidArgument}, {"b-1", 200, ""},
	}
	if len(res) != len(want) {
		t.Fatalf("%d results for %d items: %s", len(res), len(want), body)
	}
	for i, w := range want {
		r := res[i]
		if (w.id != "" && r.ID != w.id) || r.Status != w.status {
			t.Errorf("item %d: id %q status %d, want %q %d", i, r.ID, r.Status, w.id, w.status)
		}
		if w.code == "" && r.Error != nil || w.code != "" && (r.Error == nil || r.Error.Code != w.code || r.Error.Message == "") {
			t.Errorf("item %d: error %+v, want code %q", i, r.Error, w.code)
		}
	}
	if _, err := uuid.Parse(res[2].ID); err != nil {
		t.Errorf("item without id got id %q", res[2].ID)
	}
	for _, id := range []string{"b-1", res[2].ID} {
		if status, body, _ := ts.call(t, "GET", "/v1/messages/"+id, ""); status != 200 {
			t.Errorf("stored batch item %s: %d %s", id, status, body)
		}
	}
	if status, _, _ := ts.call(t, "GET", "/v1/messages/b-2", ""); status != 404 {
		t.Errorf("refused batch item was stored")
	}
}

func TestBatchLimits(t *testing.T) {
	ts := newTestServer(t, func(o *api.Options) { o.MaxBatchBytes = 8 << 20 })
	item := `{"type":"t","route":"acme","payload":1}`
	many := `{"messages":[` + strings.Repeat(item+",", api.MaxBatchItems) + item + `]}`
	status, body, _ := ts.call(t, "POST", "/v1/messages/batch", many)
	wantError(t, status, body, 413, courier.CodePayloadTooLarge, "10000")

	small := newTestServer(t, func(o *api.Options) { o.MaxBatchBytes = 1000 })
	status, body, _ = small.call(t, "POST", "/v1/messages/batch", `{"messages":[`+strings.Repeat(item+",", 40)+item+`]}`)
	wantError(t, status, body, 413, courier.CodePayloadTooLarge, "1000 bytes")

	for _, bad := range []string{`{"messages":`, `{}`, `[]`, `{"messages":[],"x":1}`} {
		status, body, _ = ts.call(t, "POST", "/v1/messages/batch", bad)
		wantError(t, status, body, 400, courier.CodeInvalidArgument, "")
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/batch", `{"messages":[]}`)
	if status != 200 || len(decode[api.BatchResponse](t, body).Results) != 0 {
		t.Errorf("empty batch: %d %s", status, body)
	}
}

func TestListAndFilters(t *testing.T) {
	ts := newTestServer(t)
	for i := 0; i < 5; i++ {
		route := []string{"acme", "globex"}[i%2]
		body := fmt.Sprintf(`{"type":"invoice","route":%q,"payload":%d}`, route, i)
		if status, b, _ := ts.call(t, "PUT", fmt.Sprintf("/v1/messages/m-%d", i), body); status != 201 {
			t.Fatalf("%d %s", status, b)
		}
	}
	var ids []string
	path := "/v1/messages?limit=2&route=acme"
	for path != "" {
		status, body, _ := ts.call(t, "GET", path, "")
		if status != 200 {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		l := decode[api.MessageList](t, body)
		for _, m := range l.Messages {
			ids = append(ids, m.ID)
			if m.Payload != nil || m.PayloadBase64 != "" {
				t.Errorf("listing carries the payload of %s", m.ID)
			}
		}
		path = ""
		if l.NextCursor != "" {
			path = "/v1/messages?limit=2&route=acme&cursor=" + l.NextCursor
		}
	}
	if fmt.Sprint(ids) != "[m-4 m-2 m-0]" {
		t.Errorf("acme messages newest first: %v", ids)
	}
	for _, tt := range []struct{ query, in string }{
		{"state=lost", "state"}, {"reason=bored", "reason"}, {"limit=0", "limit"}, {"limit=1001", "limit"},
		{"limit=x", "limit"}, {"cursor=zzz", "cursor"}, {"colour=red", "colour"}, {"created_after=yesterday", "created_after"},
	} {
		status, body, _ := ts.call(t, "GET", "/v1/messages?"+tt.query, "")
		wantError(t, status, body, 422, courier.CodeInvalidArgument, tt.in)
	}
	status, body, _ := ts.call(t, "GET", "/v1/messages?state=queued&type=invoice&created_after=2000-01-01T00:00:00Z", "")
	if l := decode[api.MessageList](t, body); status != 200 || len(l.Messages) != 5 {
		t.Errorf("state+type+created_after: %d, %d messages", status, len(l.Messages))
	}
}

func TestGetAttemptsResubmitDiscard(t *testing.T) {
	ts := newTestServer(t)
	status, body, _ := ts.call(t, "GET", "/v1/messages/missing", "")
	wantError(t, status, body, 404, courier.CodeNotFound, "missing")
	status, body, _ = ts.call(t, "GET", "/v1/messages/missing/attempts", "")
	wantError(t, status, body, 404, courier.CodeNotFound, "missing")

	ts.call(t, "PUT", "/v1/messages/q", invoiceBody)
	status, body, _ = ts.call(t, "GET", "/v1/messages/q/attempts", "")
	if status != 200 || string(bytes.TrimSpace(body)) != `{"attempts":[]}` {
		t.Errorf("attempts of a new message: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/q/resubmit", "")
	wantError(t, status, body, 409, courier.CodeConflict, "queued")

	// A suspended message, as a receive location would store it.
	m := &courier.Message{ID: "s", Type: "invoice", Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	m.State, m.Reason, m.FinishedAt = courier.StateSuspended, courier.ReasonRejected, time.Now()
	if _, err := ts.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/s/resubmit", `{"route":"nowhere"}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "nowhere")
	status, body, _ = ts.call(t, "POST", "/v1/messages/s/resubmit", `{"route":"globex"}`)
	if got := decode[api.Message](t, body); status != 200 || got.State != courier.StateQueued || got.Route != "globex" || got.ResubmitCount != 1 {
		t.Fatalf("resubmit: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/s/discard", "")
	if got := decode[api.Message](t, body); status != 200 || got.State != courier.StateDiscarded {
		t.Fatalf("discard: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/s/discard", "")
	wantError(t, status, body, 409, courier.CodeConflict, "discarded")
	actions, err := ts.store.Actions(context.Background(), "s")
	if err != nil || len(actions) != 2 || actions[0].Who != "local" {
		t.Errorf("recorded actions %+v, %v", actions, err)
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

func suspendMessage(t *testing.T, store courier.Store, id, typ string, reason courier.Reason) {
	t.Helper()
	m := &courier.Message{ID: id, Type: typ, Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	m.State, m.Reason, m.FinishedAt = courier.StateSuspended, reason, time.Now()
	if _, err := store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
}

func TestBulkOperations(t *testing.T) {
	ts := newTestServer(t, func(o *api.Options) {
		o.Bulk = engine.NewBulk(o.Store, nil, nil, nil, nil)
	})
	suspendMessage(t, ts.store, "i1", "invoice", courier.ReasonExhausted)
	suspendMessage(t, ts.store, "i2", "invoice", courier.ReasonRejected)
	suspendMessage(t, ts.store, "o1", "order", courier.ReasonRejected)

	status, body, _ := ts.call(t, "POST", "/v1/messages/resubmit", `{"filter":{"type":"invoice"},"route":"globex","operation_id":"op-1"}`)
	op := decode[api.Operation](t, body)
	if status != 200 || op.Count != 2 || !op.Done || op.ID != "op-1" || op.Kind != courier.ActionResubmit || op.Who != "local" {
		t.Fatalf("bulk resubmit: %d %s", status, body)
	}
	for _, id := range []string{"i1", "i2"} {
		_, body, _ := ts.call(t, "GET", "/v1/messages/"+id, "")
		if m := decode[api.Message](t, body); m.State != courier.StateQueued || m.Route != "globex" {
			t.Errorf("%s after bulk resubmit: %s on %s", id, m.State, m.Route)
		}
	}
	// Repeating the request with its operation id does not do it twice.
	suspendMessage(t, ts.store, "i3", "invoice", courier.ReasonExhausted)
	status, body, _ = ts.call(t, "POST", "/v1/messages/resubmit", `{"filter":{"type":"invoice"},"route":"globex","operation_id":"op-1"}`)
	if again := decode[api.Operation](t, body); status != 200 || again.Count != 2 {
		t.Fatalf("repeated bulk resubmit: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/operations/op-1", "")
	if got := decode[api.Operation](t, body); status != 200 || got.Count != 2 || !got.Done {
		t.Fatalf("operation: %d %s", status, body)
	}

	status, body, _ = ts.call(t, "POST", "/v1/messages/discard", `{"filter":{"reason":"rejected"}}`)
	if got := decode[api.Operation](t, body); status != 200 || got.Count != 1 || got.Kind != courier.ActionDiscard {
		t.Fatalf("bulk discard: %d %s", status, body)
	}
	_, body, _ = ts.call(t, "GET", "/v1/messages/o1", "")
	if m := decode[api.Message](t, body); m.State != courier.StateDiscarded {
		t.Errorf("o1 after bulk discard: %s", m.State)
	}

	for _, tt := range []struct {
		path, body, in string
		status         int
	}{
		{"/v1/messages/resubmit", `{"filter":{"state":"queued"}}`, "suspended", 422},
		{"/v1/messages/discard", `{"filter":{"state":"delivered"}}`, "queued or suspended", 422},
		{"/v1/messages/resubmit", `{"route":"nowhere"}`, "nowhere", 422},
		{"/v1/messages/discard", `{"route":"globex"}`, "only to a resubmit", 422},
		{"/v1/messages/resubmit", `{"filter":{"reason":"tired"}}`, "reason", 422},
		{"/v1/messages/resubmit", `{"filter":{"colour":"red"}}`, "colour", 400},
		{"/v1/messages/resubmit", `{"operation_id":"a b"}`, "operation_id", 422},
		{"/v1/operations/nope", ``, "nope", 404},
	} {
		method := "POST"
		if strings.HasPrefix(tt.path, "/v1/operations") {
			method = "GET"
		}
		status, body, _ := ts.call(t, method, tt.path, tt.body)
		code := map[int]courier.Code{400: courier.CodeInvalidArgument, 422: courier.CodeInvalidArgument, 404: courier.CodeNotFound}[tt.status]
		wantError(t, status, body, tt.status, code, tt.in)
	}

	plain := newTestServer(t)
	status, body, _ = plain.call(t, "POST", "/v1/messages/resubmit", `{}`)
	wantError(t, status, body, 503, courier.CodeUnavailable, "bulk")
}

func TestEndpoints(t *testing.T) {
	woken := 0
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology.Endpoints = map[string]*courier.Endpoint{
			"acme-primary": {Name: "acme-primary", Transport: courier.TransportHTTP, Timeout: 30 * time.Second, MaxConcurrency: 4,
				HTTP: courier.HTTPTarget{URL: "https://erp:s3cret@erp.acme.example/inbox?token=t0ken&tenant=acme", Secrets: []string{"whsec_c2VjcmV0"}}},
			"globex": {Name: "globex", Transport: courier.TransportHTTP, Timeout: time.Second, MaxConcurrency: 16,
				HTTP: courier.HTTPTarget{URL: "http://127.0.0.1:9/in"}},
		}
		o.DueFunc = func([]string) { woken++ }
		o.ActivityFunc = func(name string) courier.EndpointActivity {
			if name == "acme-primary" {
				return courier.EndpointActivity{InFlight: 3, LastHour: map[string]int{"delivered": 5, "http_5xx": 1}}
			}
			return courier.EndpointActivity{}
		}
	})
	for i := 0; i < 2; i++ {
		if status, body, _ := ts.call(t, "PUT", fmt.Sprintf("/v1/messages/q-%d", i), invoiceBody); status != 201 {
			t.Fatalf("%d %s", status, body)
		}
	}
	status, body, _ := ts.call(t, "GET", "/v1/endpoints", "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if strings.Contains(string(body), "s3cret") || strings.Contains(string(body), "whsec") || strings.Contains(string(body), "t0ken") {
		t.Fatalf("the endpoint list shows a secret: %s", body)
	}
	list := decode[api.EndpointList](t, body)
	if len(list.Endpoints) != 2 || list.Endpoints[0].Name != "acme-primary" || list.Endpoints[0].State != courier.HealthActive ||
		list.Endpoints[0].MaxConcurrency != 4 || !strings.Contains(list.Endpoints[0].Target, "erp.acme.example") {
		t.Fatalf("endpoints: %s", body)
	}
	if e := list.Endpoints[0]; e.Queued != 2 || e.InFlight != 3 || e.LastHour["delivered"] != 5 || e.LastHour["http_5xx"] != 1 {
		t.Errorf("acme-primary's queue and activity: queued %d, in flight %d, last hour %v", e.Queued, e.InFlight, e.LastHour)
	}
	if e := list.Endpoints[1]; e.Queued != 0 || e.LastHour == nil {
		t.Errorf("globex's queue and activity: %+v", e)
	}

	status, body, _ = ts.call(t, "POST", "/v1/endpoints/globex/off", "")
	if e := decode[api.Endpoint](t, body); status != 200 || e.State != courier.HealthOff {
		t.Fatalf("off: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/endpoints/globex", "")
	e := decode[api.Endpoint](t, body)
	if status != 200 || e.State != courier.HealthOff || len(e.Actions) != 1 || e.Actions[0].Kind != courier.ActionEndpointOff || e.Actions[0].Who != "local" {
		t.Fatalf("show after off: %d %s", status, body)
	}
	before := woken
	status, body, _ = ts.call(t, "POST", "/v1/endpoints/globex/on", "")
	if e := decode[api.Endpoint](t, body); status != 200 || e.State != courier.HealthActive || woken != before+1 || e.LastHour == nil {
		t.Fatalf("on: %d %s (engine woken %d times)", status, body, woken)
	}
	for _, path := range []string{"/v1/endpoints/nope", "/v1/endpoints/nope/off"} {
		method := "GET"
		if strings.HasSuffix(path, "/off") {
			method = "POST"
		}
		status, body, _ := ts.call(t, method, path, "")
		wantError(t, status, body, 404, courier.CodeNotFound, "nope")
	}
}

// TestOrderingShown: a message behind another of its key says it waits and
// for what; the suspended head says it holds the key.
func TestOrderingShown(t *testing.T) {
	ts := newTestServer(t)
	for _, id := range []string{"o-1", "o-2"} {
		st, body, _ := ts.call(t, "PUT", "/v1/messages/"+id, `{"type":"order","route":"acme","ordering_key":"c-9","payload":{}}`)
		if st != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", id, st, body)
		}
		// The answer says what a read says: the first is due, the second
		// waits for it.
		created := decode[api.Message](t, body)
		_, got, _ := ts.call(t, "GET", "/v1/messages/"+id, "")
		read := decode[api.Message](t, got)
		if created.Ordering != read.Ordering || (created.NextAttemptAt == nil) != (read.NextAttemptAt == nil) ||
			(created.WaitingFor == nil) != (read.WaitingFor == nil) {
			t.Errorf("PUT %s answered %s, a read says %s", id, body, got)
		}
		if id == "o-2" && (created.Ordering != api.OrderingWaiting || created.WaitingFor == nil || created.WaitingFor.ID != "o-1") {
			t.Errorf("PUT o-2 answered %s, want waiting for o-1", body)
		}
	}
	ctx := context.Background()
	now := time.Now()
	claimed, err := ts.store.ClaimDue(ctx, courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Minute), Owner: "t",
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 10}}})
	if err != nil || len(claimed) != 1 || claimed[0].ID != "o-1" {
		t.Fatalf("claimed %v, %v; want o-1 alone", claimed, err)
	}
	head := *claimed[0]
	head.State, head.Reason, head.LastError, head.LeaseUntil = courier.StateSuspended, courier.ReasonRejected, "HTTP 400: bad customer", time.Time{}
	if _, err := ts.store.Apply(ctx, []courier.Change{{Message: &head, From: courier.StateInflight, Token: claimed[0].TotalAttempts}}); err != nil {
		t.Fatal(err)
	}

	_, body, _ := ts.call(t, "GET", "/v1/messages/o-2", "")
	waiting := decode[api.Message](t, body)
	if waiting.Ordering != api.OrderingWaiting || waiting.WaitingFor == nil || waiting.WaitingFor.ID != "o-1" ||
		waiting.WaitingFor.Reason != courier.ReasonRejected || waiting.WaitingFor.LastError != "HTTP 400: bad customer" || waiting.NextAttemptAt != nil {
		t.Fatalf("o-2 shown as %s", body)
	}
	_, body, _ = ts.call(t, "GET", "/v1/messages/o-1", "")
	if m := decode[api.Message](t, body); m.Ordering != api.OrderingHoldsKey || m.WaitingFor != nil {
		t.Fatalf("o-1 shown as %s", body)
	}
}

// TestGetPayloadAsStored: ?payload=base64 gives the payload's bytes as
// stored, also for a JSON value, which the JSON form compacts and escapes.
func TestGetPayloadAsStored(t *testing.T) {
	ts := newTestServer(t)
	payload := `{ "note": "<b>fish & chips</b>" }`
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/j1", `{"type":"t","route":"acme","payload":`+payload+`}`); status != 201 {
		t.Fatalf("ingest: %d %s", status, body)
	}
	status, body, _ := ts.call(t, "GET", "/v1/messages/j1?payload=base64", "")
	if status != 200 {
		t.Fatalf("get: %d %s", status, body)
	}
	m := decode[api.Message](t, body)
	raw, err := base64.StdEncoding.DecodeString(m.PayloadBase64)
	if err != nil || string(raw) != payload || len(m.Payload) != 0 || m.Size != len(payload) {
		t.Errorf("payload as stored: %q (size %d, JSON %s), want %q", raw, m.Size, m.Payload, payload)
	}
	// Without it the payload is a JSON value, as before.
	_, body, _ = ts.call(t, "GET", "/v1/messages/j1", "")
	if m := decode[api.Message](t, body); m.PayloadBase64 != "" || !json.Valid(m.Payload) {
		t.Errorf("payload as JSON: %s", body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/j1?payload=hex", "")
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "base64")
}

// A message stored to come due later is announced with its route and time,
// a batch's earliest per route; one due now goes to DueFunc as before.
func TestScheduledMessagesAreAnnounced(t *testing.T) {
	type call struct {
		route string
		at    time.Time
	}
	var mu sync.Mutex
	var scheduled []call
	var due [][]string
	ts := newTestServer(t, func(o *api.Options) {
		o.DueFunc = func(routes []string) { mu.Lock(); due = append(due, routes); mu.Unlock() }
		o.ScheduledFunc = func(route string, at time.Time) {
			mu.Lock()
			scheduled = append(scheduled, call{route, at})
			mu.Unlock()
		}
	})
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	body := fmt.Sprintf(`{"type":"invoice","route":"acme","payload":{},"deliver_after":%q}`, later.Format(time.RFC3339))
	if status, b, _ := ts.call(t, "PUT", "/v1/messages/later-1", body); status != 201 {
		t.Fatalf("%d %s", status, b)
	}
	mu.Lock()
	if len(scheduled) != 1 || scheduled[0].route != "acme" || !scheduled[0].at.Equal(later) || len(due) != 0 {
		t.Fatalf("after a PUT due in an hour: scheduled %v, due %v; want acme at %v only", scheduled, due, later)
	}
	scheduled = nil
	mu.Unlock()

	batch := fmt.Sprintf(`{"messages":[
		{"id":"b-1","type":"invoice","route":"acme","payload":{},"deliver_after":%q},
		{"id":"b-2","type":"invoice","route":"acme","payload":{},"deliver_after":%q},
		{"id":"b-3","type":"invoice","route":"acme","payload":{}}]}`,
		later.Add(time.Minute).Format(time.RFC3339), later.Format(time.RFC3339))
	if status, b, _ := ts.call(t, "POST", "/v1/messages/batch", batch); status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(scheduled) != 1 || scheduled[0].route != "acme" || !scheduled[0].at.Equal(later) {
		t.Errorf("after a batch: scheduled %v; want acme once, at the earlier %v", scheduled, later)
	}
	if len(due) != 1 || len(due[0]) != 1 || due[0][0] != "acme" {
		t.Errorf("after a batch with a message due now: due %v; want [[acme]]", due)
	}
}
