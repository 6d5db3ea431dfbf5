package api

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
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
		m, err := s.decodeMessage(body, "", now)
		if err != nil {
			if status := statusOf(err); status < 400 || status >= 500 {
				t.Fatalf("refusal with status %d: %v", status, err)
			}
			if courier.ErrorMessage(err) == "" {
				t.Fatalf("refusal without a message: %v", err)
			}
			return
		}
		if !courier.ValidID(m.ID) || !courier.ValidType(m.Type) || m.Hash == "" || m.State != courier.StateQueued {
			t.Fatalf("accepted an invalid message: %+v", m)
		}
		if int64(len(m.Payload)) > s.maxPayload {
			t.Fatalf("accepted a payload of %d bytes", len(m.Payload))
		}
	})
}
