package api

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
)

// FuzzDecodeMessage feeds arbitrary bodies to the ingest decoder: it must
// never panic, and every refusal must be a caller's error (4xx), never an
// internal one.
func FuzzDecodeMessage(f *testing.F) {
	for _, seed := range []string{
		`{"id":"inv-1","type":"invoice","route":"acme","payload":{"total":42}}`,
		`{"type":"invoice","route":"acme","payload_base64":"PEludm9pY2UvPg==","content_type":"application/xml"}`,
		`{"type":"t","route":"acme","payload":1,"headers":{"X-A":"b"},"ordering_key":"k","priority":5,
		  "deliver_after":"2026-11-21T10:00:00Z","expires_at":"2099-11-23T10:00:00Z"}`,
		`{"type":"t","route":"acme","payload":1,"payload_base64":"AA=="}`,
		`{"type":"t","route":"acme"}`,
		`{"type":"t","route":"acme","payload":null}`,
		`{"type":"t",`, `[]`, `null`, `"x"`, ``, `{"priority":1e400}`,
	} {
		f.Add([]byte(seed))
	}
	s := NewServer(Options{Topology: &courier.Topology{
		Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"e"}}},
	}, MaxPayload: 1024})
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		ms, err := s.decodeMessage(context.Background(), body, "", now, blobHolds{})
		if err != nil {
			if status := StatusOf(err); status < 400 || status >= 500 {
				t.Fatalf("refusal with status %d: %v", status, err)
			}
			if courier.ErrorMessage(err) == "" {
				t.Fatalf("refusal without a message: %v", err)
			}
			return
		}
		if len(ms) != 1 {
			t.Fatalf("%d messages to ingest from a topology without subscriptions", len(ms))
		}
		m := ms[0]
		if !courier.ValidID(m.ID) || !courier.ValidType(m.Type) || m.Hash == "" || m.State != courier.StateQueued {
			t.Fatalf("accepted an invalid message: %+v", m)
		}
		if int64(len(m.Payload)) > s.opts.MaxPayload {
			t.Fatalf("accepted a payload of %d bytes", len(m.Payload))
		}
	})
}

// FuzzRouter sends arbitrary requests (method, path, query, a header,
// body), as the HTTP server would hand them over, to the API with and
// without keys: no panic, and no 500, since nothing a caller sends is the
// server's fault.
func FuzzRouter(f *testing.F) {
	for _, seed := range []struct{ method, target, header, value, body string }{
		{"GET", "/v1/messages", "Authorization", "Bearer secret-of-ops", ""},
		{"PUT", "/v1/messages/inv-1", "Authorization", "Bearer secret-of-erp", `{"type":"t","route":"acme","payload":1}`},
		{"POST", "/v1/messages/batch", "Authorization", "Bearer secret-of-erp", `{"messages":[{"type":"t","route":"acme","payload":1},1]}`},
		{"GET", "/v1/messages?state=x&limit=-1&cursor=%%%", "Authorization", "Basic x", ""},
		{"POST", "/v1/messages/a/resubmit", "Authorization", "Bearer secret-of-root", `{"route":"nowhere"}`},
		{"POST", "/v1/messages/discard", "Authorization", "Bearer secret-of-ops", `{"filter":{"state":"inflight"}}`},
		{"POST", "/v1/endpoints/x/off", "Authorization", "bearer  secret-of-ops ", ""},
		{"GET", "/v1/operations/..%2f..%2fetc", "X-Forwarded-For", "10.0.0.1", ""},
		{"DELETE", "/v1/../v1/messages//x", "Content-Type", "application/json", "null"},
		{"POST", "/v1/reload", "Authorization", "Bearer secret-of-root", ""},
		{"GET", "/healthz", "", "", ""},
		{"OPTIONS", "*", "", "", ""},
	} {
		f.Add(seed.method, seed.target, seed.header, seed.value, seed.body)
	}
	store := sqlitetest.Open(f)
	top := &courier.Topology{
		Routes:    map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"e"}}},
		Endpoints: map[string]*courier.Endpoint{"e": courier.NewEndpoint("e", courier.TransportHTTP)},
		Policies:  map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	var keys []Key
	for _, k := range []struct {
		name string
		role courier.Role
	}{{"erp", courier.RoleSender}, {"ops", courier.RoleOperator}, {"root", courier.RoleAdmin}} {
		h, _ := ParseKeyHash(HashSecret("secret-of-" + k.name))
		keys = append(keys, Key{Name: k.name, Role: k.role, Hash: h, Routes: []string{"acme"},
			Rate: courier.Rate{N: 1000, Per: time.Second}, MaxSuspended: 10})
	}
	reload := func(context.Context) error { return nil }
	servers := []*Server{
		NewServer(Options{Store: store, Topology: top, MaxPayload: 1024, MaxBatchBytes: 64 << 10}),
		NewServer(Options{Store: store, Topology: top, MaxPayload: 1024, MaxBatchBytes: 64 << 10, Keys: keys, ReloadFunc: reload}),
	}
	f.Fuzz(func(t *testing.T, method, target, header, value, body string) {
		// A loopback host: without keys the API answers no other.
		raw := method + " " + target + " HTTP/1.1\r\nHost: 127.0.0.1:8425\r\n"
		if header != "" {
			raw += header + ": " + value + "\r\n"
		}
		raw += "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
		for _, s := range servers {
			req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
			if err != nil {
				return // the HTTP server answers 400 itself
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code >= 500 && rec.Code != http.StatusServiceUnavailable && rec.Code != http.StatusNotImplemented {
				t.Fatalf("%q: status %d: %s", raw, rec.Code, rec.Body)
			}
		}
	})
}
