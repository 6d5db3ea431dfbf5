package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/google/uuid"
)

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
		{"no route and no subscription", "PUT", "/v1/messages/a", `{"type":"invoice","payload":1}`, 422, courier.CodeInvalidArgument, `no subscription wants messages of type "invoice"`},
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
