package courier_test

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
)

func TestAdmit(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	top := &courier.Topology{
		Routes:   map[string]*courier.Route{"acme": {Name: "acme"}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy(), "invoice": {Name: "invoice", Priority: 8}},
	}
	fixed := &courier.Receiver{Name: "erp", Type: "invoice", Route: "acme", IDHeader: "message-id", OrderingKeyHeader: "x-customer"}
	fromHeaders := &courier.Receiver{Name: "events", TypeHeader: "x-type", RouteHeader: "x-route"}
	body := []byte(`{"total": 42}`)
	tests := []struct {
		name      string
		r         *courier.Receiver
		it        courier.InboundItem
		maxSize   int64
		wantState courier.State
		reason    courier.Reason
		problem   string // in the error and LastError
		id        string // "" : derived
		typ       string
		route     string
		key       string
		// contentType is the message's, "" for application/octet-stream:
		// an item's that cannot be sent is not kept.
		contentType string
	}{
		{name: "fixed type and route, id and key from headers", r: fixed,
			it:        courier.InboundItem{Body: body, ContentType: "application/json", Headers: map[string]string{"Message-Id": "inv-1", "x-customer": "c-42"}},
			wantState: courier.StateQueued, id: "inv-1", typ: "invoice", route: "acme", key: "c-42", contentType: "application/json"},
		{name: "no id header: derived from the body", r: fixed, it: courier.InboundItem{Body: body},
			wantState: courier.StateQueued, typ: "invoice", route: "acme"},
		{name: "type and route from headers", r: fromHeaders,
			it:        courier.InboundItem{Body: body, Headers: map[string]string{"X-Type": "order.created", "X-Route": "acme"}},
			wantState: courier.StateQueued, typ: "order.created", route: "acme"},
		{name: "missing route header", r: fromHeaders, it: courier.InboundItem{Body: body, Headers: map[string]string{"x-type": "order"}},
			wantState: courier.StateSuspended, reason: courier.ReasonInvalid, problem: "no route: the item has no header x-route", typ: "order"},
		{name: "unknown route", r: fromHeaders, it: courier.InboundItem{Body: body, Headers: map[string]string{"x-type": "order", "x-route": "globex"}},
			wantState: courier.StateSuspended, reason: courier.ReasonNoRoute, problem: `route "globex" is not configured`, typ: "order", route: "globex"},
		{name: "type not a name", r: fromHeaders, it: courier.InboundItem{Body: body, Headers: map[string]string{"x-type": "in voice", "x-route": "acme"}},
			wantState: courier.StateSuspended, reason: courier.ReasonInvalid, problem: `type "in voice" is not valid`, typ: "in voice", route: "acme"},
		{name: "unreadable header", r: fromHeaders,
			it:        courier.InboundItem{Body: body, Headers: map[string]string{"x-type": "order"}, Unreadable: []string{"X-Route"}},
			wantState: courier.StateSuspended, reason: courier.ReasonInvalid, problem: "header x-route is not text", typ: "order"},
		{name: "oversize body kept whole", r: fixed, it: courier.InboundItem{Body: body}, maxSize: 4,
			wantState: courier.StateSuspended, reason: courier.ReasonInvalid, problem: "over max_payload: the limit is 4 bytes", typ: "invoice", route: "acme"},
		{name: "content type not a media type", r: fixed, it: courier.InboundItem{Body: body, ContentType: "not a type"},
			wantState: courier.StateSuspended, reason: courier.ReasonInvalid, problem: `content_type "not a type" is not a valid media type`, typ: "invoice", route: "acme"},
		{name: "bad id", r: fixed, it: courier.InboundItem{Body: body, Headers: map[string]string{"message-id": "a b"}},
			wantState: courier.StateSuspended, reason: courier.ReasonInvalid, problem: `id "a b" is not valid`, typ: "invoice", route: "acme"},
		{name: "invalid with an ordering key leaves the key's order", r: fixed,
			it:        courier.InboundItem{Body: body, Headers: map[string]string{"x-customer": "c-1"}, Unreadable: []string{"message-id"}},
			wantState: courier.StateSuspended, reason: courier.ReasonInvalid, problem: "header message-id is not text", typ: "invoice", route: "acme", key: "c-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, problem := tt.r.Admit(&tt.it, top, tt.maxSize, now)
			m := ms[0]
			if got := m.State; got != tt.wantState {
				t.Fatalf("state %s, want %s (problem %v)", got, tt.wantState, problem)
			}
			if tt.problem == "" && problem != nil || tt.problem != "" && (problem == nil || !strings.Contains(problem.Error(), tt.problem)) {
				t.Fatalf("problem %v, want one with %q", problem, tt.problem)
			}
			if m.Reason != tt.reason || m.Type != tt.typ || m.Route != tt.route || m.OrderingKey != tt.key {
				t.Fatalf("got reason %q type %q route %q key %q", m.Reason, m.Type, m.Route, m.OrderingKey)
			}
			if want := cmp.Or(tt.contentType, "application/octet-stream"); m.ContentType != want {
				t.Fatalf("content type %q, want %q", m.ContentType, want)
			}
			if string(m.Payload) != string(tt.it.Body) || m.Size != len(tt.it.Body) || m.Hash == "" {
				t.Fatalf("payload %q size %d hash %q: the body must be kept whole", m.Payload, m.Size, m.Hash)
			}
			if tt.id != "" && m.ID != tt.id || tt.id == "" && !strings.HasPrefix(m.ID, tt.r.Name+"-") || !courier.ValidID(m.ID) {
				t.Fatalf("id %q", m.ID)
			}
			switch m.State {
			case courier.StateQueued:
				if !m.NextAttemptAt.Equal(now) || m.Priority != top.Policy(m.Type).Priority {
					t.Fatalf("queued message: due %v priority %d", m.NextAttemptAt, m.Priority)
				}
			case courier.StateSuspended:
				if !strings.HasPrefix(m.LastError, "receiver "+tt.r.Name+": ") || !strings.Contains(m.LastError, tt.problem) {
					t.Fatalf("last error %q", m.LastError)
				}
				if m.FinishedAt.IsZero() || !m.NextAttemptAt.IsZero() || m.OrderSkipped != (m.OrderingKey != "") {
					t.Fatalf("suspended message: finished %v due %v skipped %v", m.FinishedAt, m.NextAttemptAt, m.OrderSkipped)
				}
			}
		})
	}
}

// A redelivered item gets the id it had; another body or another file name
// gets another.
func TestAdmitDerivedID(t *testing.T) {
	top := &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme"}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}}
	r := &courier.Receiver{Name: "drop", Type: "invoice", Route: "acme"}
	id := func(name, body string) string {
		ms, err := r.Admit(&courier.InboundItem{Name: name, Body: []byte(body)}, top, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ms[0].ID
	}
	if a, b := id("a.xml", "<x/>"), id("a.xml", "<x/>"); a != b {
		t.Fatalf("the same item got ids %s and %s", a, b)
	}
	if id("a.xml", "<x/>") == id("b.xml", "<x/>") || id("a.xml", "<x/>") == id("a.xml", "<y/>") {
		t.Fatal("different items got the same id")
	}
}

func TestConflictID(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	got := courier.ConflictID("inv-1", hash)
	if got != "inv-1.conflict-"+hash[:17] || !courier.ValidID(got) {
		t.Fatalf("ConflictID = %q", got)
	}
	long := courier.ConflictID(strings.Repeat("x", courier.MaxIDLen), hash)
	if len(long) != courier.MaxIDLen || !courier.ValidID(long) {
		t.Fatalf("ConflictID of a long id = %d bytes", len(long))
	}
}

// A recipient header fills the message's recipient, which a lookup route
// requires.
func TestAdmitRecipient(t *testing.T) {
	top := &courier.Topology{Routes: map[string]*courier.Route{"nemhandel": {Name: "nemhandel", Lookup: &courier.Lookup{URL: "https://r.example/{recipient}"}}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}}
	r := &courier.Receiver{Name: "vans", Type: "invoice", Route: "nemhandel", RecipientHeader: "x-recipient"}
	ms, err := r.Admit(&courier.InboundItem{Body: []byte("<Invoice/>"), Headers: map[string]string{"X-Recipient": "0088:5798000000001"}}, top, 0, time.Now())
	m := ms[0]
	if err != nil || m.Recipient != "0088:5798000000001" || m.State != courier.StateQueued {
		t.Fatalf("with the header: %+v, %v", m, err)
	}
	ms, err = r.Admit(&courier.InboundItem{Body: []byte("<Invoice/>")}, top, 0, time.Now())
	m = ms[0]
	if err == nil || m.State != courier.StateSuspended || !strings.Contains(m.LastError, "recipient is required") {
		t.Fatalf("without it: %s %q, %v", m.State, m.LastError, err)
	}
}

// An item's derived id does not depend on how its content came: whole in
// Body, or through a Spool. A payload kept in the row has the id it always
// had, and so has a blob: its id is taken as its content streams.
func TestAdmitSpooledDerivedID(t *testing.T) {
	top := &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme"}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}}
	r := &courier.Receiver{Name: "drop", Type: "invoice", Route: "acme"}
	blobs := sqlitetest.Open(t).Blobs()
	spooled := func(name string, body []byte) *courier.Message {
		t.Helper()
		it := &courier.InboundItem{Name: name, Size: int64(len(body))}
		sp := courier.NewItemSpool(context.Background(), blobs, 0, it)
		defer sp.Close()
		if _, err := io.Copy(sp, bytes.NewReader(body)); err != nil {
			t.Fatal(err)
		}
		ms, problem, err := r.AdmitSpooled(it, sp, top, 0, time.Now())
		if err != nil || problem != nil {
			t.Fatalf("AdmitSpooled: %v, %v", problem, err)
		}
		return ms[0]
	}
	whole := func(name string, body []byte) string {
		t.Helper()
		ms, err := r.Admit(&courier.InboundItem{Name: name, Body: body}, top, 0, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return ms[0].ID
	}

	// The id a small file had before blobs, kept so that a redelivery
	// still finds its message.
	const before = "drop-b3011d1da14c7861fc56a847bacfb816"
	if got := whole("a.xml", []byte("<x/>")); got != before {
		t.Fatalf("id of a small item = %s, want %s", got, before)
	}
	if m := spooled("a.xml", []byte("<x/>")); m.ID != before || m.HasBlob() {
		t.Fatalf("spooled small item: id %s (blob %q), want %s in the row", m.ID, m.Blob, before)
	}

	large := make([]byte, courier.InlineMax+1000)
	for i := range large {
		large[i] = byte(i * 13)
	}
	a, b := spooled("a.bin", large), spooled("a.bin", large)
	if !a.HasBlob() || a.ID != b.ID || a.Hash != b.Hash {
		t.Fatalf("the same large item: blob %q, ids %s and %s", a.Blob, a.ID, b.ID)
	}
	if a.ID == spooled("b.bin", large).ID {
		t.Fatal("large items of two names got one id")
	}
	// The id it had when items were read whole, so that an item stored
	// before blobs and handed out again is found.
	if want := whole("a.bin", large); a.ID != want {
		t.Fatalf("a large item's id %s, want %s, as read whole", a.ID, want)
	}
	large[0]++
	if a.ID == spooled("a.bin", large).ID {
		t.Fatal("large items of two contents got one id")
	}
}
