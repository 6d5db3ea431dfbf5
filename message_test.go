package courier_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestValidNames(t *testing.T) {
	tests := []struct {
		s           string
		typ, id, nm bool
	}{
		{"invoice", true, true, true},
		{"order.created", true, true, true},
		{"a_b-C.9", true, true, true},
		{"inv:2026:1", false, true, false},
		{"", false, false, false},
		{"has space", false, false, false},
		{"slash/no", false, false, false},
		{"ünicode", false, false, false},
		{strings.Repeat("t", 128), true, true, true},
		{strings.Repeat("t", 129), false, true, false},
		{strings.Repeat("i", 256), false, true, false},
		{strings.Repeat("i", 257), false, false, false},
	}
	for _, tt := range tests {
		if got := courier.ValidType(tt.s); got != tt.typ {
			t.Errorf("ValidType(%q) = %v, want %v", tt.s, got, tt.typ)
		}
		if got := courier.ValidID(tt.s); got != tt.id {
			t.Errorf("ValidID(%q) = %v, want %v", tt.s, got, tt.id)
		}
		if got := courier.ValidName(tt.s); got != tt.nm {
			t.Errorf("ValidName(%q) = %v, want %v", tt.s, got, tt.nm)
		}
	}
}

func TestContentHash(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	base := func() *courier.Message {
		return &courier.Message{ID: "a", Type: "invoice", Route: "acme", Payload: []byte("{}"), ContentType: "application/json",
			Headers: map[string]string{"A": "1", "B": "2"}, OrderingKey: "k", Priority: 3, DeliverAfter: at, ExpiresAt: at.Add(time.Hour)}
	}
	want := courier.ContentHash(base())
	same := base()
	same.Headers = map[string]string{"B": "2", "A": "1"}
	same.DeliverAfter = at.In(time.FixedZone("CET", 3600)) // the same instant
	same.ID, same.State, same.Attempts = "other-id", courier.StateSuspended, 7
	if got := courier.ContentHash(same); got != want {
		t.Errorf("hash changed with header order, time zone, id or store fields")
	}
	changes := map[string]func(m *courier.Message){
		"type":          func(m *courier.Message) { m.Type = "order" },
		"route":         func(m *courier.Message) { m.Route = "globex" },
		"payload":       func(m *courier.Message) { m.Payload = []byte("[]") },
		"content type":  func(m *courier.Message) { m.ContentType = "text/plain" },
		"header value":  func(m *courier.Message) { m.Headers["A"] = "2" },
		"header added":  func(m *courier.Message) { m.Headers["C"] = "" },
		"ordering key":  func(m *courier.Message) { m.OrderingKey = "" },
		"priority":      func(m *courier.Message) { m.Priority = 4 },
		"deliver after": func(m *courier.Message) { m.DeliverAfter = time.Time{} },
		"expires at":    func(m *courier.Message) { m.ExpiresAt = at },
		// Field boundaries count: "ab"+"c" is not "a"+"bc".
		"boundary": func(m *courier.Message) { m.Type, m.Route = "invoiceacm", "e" },
	}
	for name, change := range changes {
		m := base()
		change(m)
		if courier.ContentHash(m) == want {
			t.Errorf("%s: hash did not change", name)
		}
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want courier.Rate
		err  bool
	}{
		{"100/s", courier.Rate{N: 100, Per: time.Second}, false},
		{"5000/m", courier.Rate{N: 5000, Per: time.Minute}, false},
		{" 7 / h ", courier.Rate{N: 7, Per: time.Hour}, false},
		{"10/500ms", courier.Rate{N: 10, Per: 500 * time.Millisecond}, false},
		{"100", courier.Rate{}, true},
		{"0/s", courier.Rate{}, true},
		{"-1/s", courier.Rate{}, true},
		{"x/s", courier.Rate{}, true},
		{"1/d", courier.Rate{}, true},
		{"1/-1s", courier.Rate{}, true},
		{"", courier.Rate{}, true},
	}
	for _, tt := range tests {
		got, err := courier.ParseRate(tt.in)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v, error %v", tt.in, got, err, tt.want, tt.err)
		}
		if err == nil {
			if back, err := courier.ParseRate(got.String()); err != nil || back != got {
				t.Errorf("ParseRate(%q).String() = %q does not read back", tt.in, got.String())
			}
		}
	}
	if !(courier.Rate{}).Unlimited() {
		t.Error("the zero rate is not unlimited")
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100/s", "5000/m", "1/h", "10/500ms", "", "/", "1/", "9999999999999999999/s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := courier.ParseRate(s)
		if err != nil {
			return
		}
		if r.N <= 0 || r.Per <= 0 {
			t.Fatalf("ParseRate(%q) accepted %+v", s, r)
		}
		// What a rate prints (in the endpoint view, in 429 messages) reads
		// back as the same rate.
		if back, err := courier.ParseRate(r.String()); err != nil || back != r {
			t.Fatalf("ParseRate(%q) = %+v prints %q, which reads back as %+v, %v", s, r, r.String(), back, err)
		}
	})
}

func testTopology() *courier.Topology {
	return &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"e"}}}}
}

func TestValidate(t *testing.T) {
	valid := func() *courier.Message {
		return &courier.Message{ID: "inv-1", Type: "invoice", Route: "acme", Payload: []byte("x"), Headers: map[string]string{"X-A": "b"}}
	}
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		change func(m *courier.Message)
		in     string // "" for valid
	}{
		{"valid", func(m *courier.Message) {}, ""},
		{"no id is fine", func(m *courier.Message) { m.ID = "" }, ""},
		{"bad id", func(m *courier.Message) { m.ID = "a b" }, "id"},
		{"no type", func(m *courier.Message) { m.Type = "" }, "type is required"},
		{"bad type", func(m *courier.Message) { m.Type = "a:b" }, "type"},
		{"unknown route", func(m *courier.Message) { m.Route = "globex" }, `"globex"`},
		{"priority low", func(m *courier.Message) { m.Priority = -1 }, "priority"},
		{"priority high", func(m *courier.Message) { m.Priority = 10 }, "priority"},
		{"long ordering key", func(m *courier.Message) { m.OrderingKey = strings.Repeat("k", 257) }, "ordering_key"},
		{"ordering key with a NUL", func(m *courier.Message) { m.OrderingKey = "k\x00" }, "ordering_key"},
		{"ordering key not UTF-8", func(m *courier.Message) { m.OrderingKey = "k\xff" }, "ordering_key"},
		{"expires before deliver", func(m *courier.Message) { m.DeliverAfter, m.ExpiresAt = at, at }, "expires_at"},
		{"header name", func(m *courier.Message) { m.Headers = map[string]string{"A B": "x"} }, "header name"},
		{"header value", func(m *courier.Message) { m.Headers = map[string]string{"A": "x\r\nInjected: y"} }, "control character"},
	}
	for _, tt := range tests {
		m := valid()
		tt.change(m)
		err := testTopology().Validate(m, "")
		switch {
		case tt.in == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.in != "" && (courier.ErrorCode(err) != courier.CodeInvalidArgument || !strings.Contains(courier.ErrorMessage(err), tt.in)):
			t.Errorf("%s: got %v, want invalid_argument mentioning %q", tt.name, err, tt.in)
		}
	}
}

func TestAccept(t *testing.T) {
	now := time.Date(2026, 11, 21, 10, 0, 0, 123456789, time.UTC)
	policy := &courier.Policy{Priority: 8}
	m := &courier.Message{ID: "a", Type: "invoice", Route: "acme", Priority: 0}
	courier.Accept(m, policy, false, now)
	if m.Priority != 8 || m.State != courier.StateQueued || !m.NextAttemptAt.Equal(now.Truncate(time.Microsecond)) || m.Hash == "" {
		t.Errorf("without a priority: %+v", m)
	}
	m = &courier.Message{ID: "a", Type: "invoice", Route: "acme", Priority: 0}
	courier.Accept(m, policy, true, now)
	if m.Priority != 0 {
		t.Errorf("an explicit priority 0 became %d", m.Priority)
	}
	later := now.Add(time.Hour)
	m = &courier.Message{ID: "a", Type: "invoice", Route: "acme", DeliverAfter: later}
	courier.Accept(m, policy, false, now)
	if !m.NextAttemptAt.Equal(later.Truncate(time.Microsecond)) {
		t.Errorf("deliver_after in the future: due %v, want %v", m.NextAttemptAt, later)
	}
	m = &courier.Message{ID: "a", Type: "invoice", Route: "acme", DeliverAfter: now.Add(-time.Hour)}
	courier.Accept(m, policy, false, now)
	if !m.NextAttemptAt.Equal(now.Truncate(time.Microsecond)) {
		t.Errorf("deliver_after in the past: due %v, want now", m.NextAttemptAt)
	}
}

func TestTopologyAdmit(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	invoice := courier.DefaultPolicy()
	invoice.Name, invoice.Priority = "invoice", 8
	top := &courier.Topology{
		Routes: map[string]*courier.Route{
			"acme": {Name: "acme", Endpoints: []string{"e"}},
			"flow": {Name: "flow", Workflow: &courier.Workflow{Steps: []courier.WorkflowStep{{Endpoint: "a"}, {Endpoint: "b"}}}},
		},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy(), "invoice": invoice},
	}
	given := func() *courier.Message {
		return &courier.Message{ID: "inv-1", Type: "invoice", Route: "acme", Payload: []byte("<invoice/>"), ContentType: "application/xml"}
	}
	tests := []struct {
		name          string
		change        func(m *courier.Message)
		priorityGiven bool
		code          courier.Code // "" when it is taken in
		in            string       // in the refusal's message
		check         func(t *testing.T, m *courier.Message)
	}{
		{name: "taken in with the policy's priority", change: func(m *courier.Message) { m.Priority = 3 }, check: func(t *testing.T, m *courier.Message) {
			if m.ID != "inv-1" || m.Priority != 8 || m.State != courier.StateQueued || !m.NextAttemptAt.Equal(now) || m.Hash == "" || m.Size != 10 {
				t.Errorf("got id %q priority %d state %s due %v hash %q size %d", m.ID, m.Priority, m.State, m.NextAttemptAt, m.Hash, m.Size)
			}
		}},
		{name: "the sender's priority", change: func(m *courier.Message) { m.Priority = 3 }, priorityGiven: true, check: func(t *testing.T, m *courier.Message) {
			if m.Priority != 3 {
				t.Errorf("priority %d, want the sender's 3", m.Priority)
			}
		}},
		{name: "named when it has no id", change: func(m *courier.Message) { m.ID = "" }, check: func(t *testing.T, m *courier.Message) {
			if m.ID != "new-1" {
				t.Errorf("id %q, want the one NewIDFunc gave", m.ID)
			}
		}},
		{name: "no content type", change: func(m *courier.Message) { m.ContentType = "" }, check: func(t *testing.T, m *courier.Message) {
			if m.ContentType != "application/octet-stream" {
				t.Errorf("content type %q", m.ContentType)
			}
		}},
		{name: "deliver_after", change: func(m *courier.Message) { m.DeliverAfter = later }, check: func(t *testing.T, m *courier.Message) {
			if !m.NextAttemptAt.Equal(later) {
				t.Errorf("due %v, want %v", m.NextAttemptAt, later)
			}
		}},
		{name: "a workflow starts at its first step", change: func(m *courier.Message) { m.Route = "flow" }, check: func(t *testing.T, m *courier.Message) {
			if m.Workflow != "flow" || m.Step != 1 || m.Route != courier.StepRoute("flow", 1) {
				t.Errorf("workflow %q step %d route %q", m.Workflow, m.Step, m.Route)
			}
		}},
		{name: "payload at the limit", change: func(m *courier.Message) { m.Payload = make([]byte, 16) }},
		{name: "payload over the limit", change: func(m *courier.Message) { m.Payload = make([]byte, 17) },
			code: courier.CodePayloadTooLarge, in: "the payload of 17 bytes is over max_payload: the limit is 16 bytes"},
		{name: "content type not a media type", change: func(m *courier.Message) { m.ContentType = "not a type" },
			code: courier.CodeInvalidArgument, in: `content_type "not a type"`},
		// Media types that mime.ParseMediaType takes, but no header can carry.
		{name: "content type with a control character", change: func(m *courier.Message) { m.ContentType = "text/plain; a=\"b\x01\"" },
			code: courier.CodeInvalidArgument, in: "content_type"},
		{name: "content type not UTF-8", change: func(m *courier.Message) { m.ContentType = "text/plain; a=\"\xff\"" },
			code: courier.CodeInvalidArgument, in: "content_type"},
		{name: "expired", change: func(m *courier.Message) { m.ExpiresAt = now },
			code: courier.CodeInvalidArgument, in: "expires_at 2026-11-23T10:00:00Z is in the past"},
		{name: "bad id", change: func(m *courier.Message) { m.ID = "a b" }, code: courier.CodeInvalidArgument, in: `id "a b" is not valid`},
		{name: "bad type", change: func(m *courier.Message) { m.Type = "in voice" }, code: courier.CodeInvalidArgument, in: `type "in voice" is not valid`},
		{name: "no route and no subscription", change: func(m *courier.Message) { m.Route = "" }, code: courier.CodeInvalidArgument, in: `no subscription wants messages of type "invoice"`},
		{name: "unknown route", change: func(m *courier.Message) { m.Route = "globex" },
			code: courier.CodeInvalidArgument, in: `route "globex" is not configured`},
		{name: "bad priority", change: func(m *courier.Message) { m.Priority = 10 }, priorityGiven: true,
			code: courier.CodeInvalidArgument, in: "priority 10 is out of range"},
		{name: "long ordering key", change: func(m *courier.Message) { m.OrderingKey = strings.Repeat("k", courier.MaxIDLen+1) },
			code: courier.CodeInvalidArgument, in: "ordering_key"},
		{name: "bad header", change: func(m *courier.Message) { m.Headers = map[string]string{"Bad Name": "x"} },
			code: courier.CodeInvalidArgument, in: "header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := given()
			tt.change(m)
			before := *m
			in := courier.Intake{MaxPayload: 16, PriorityGiven: tt.priorityGiven, NewIDFunc: func() (string, error) { return "new-1", nil }}
			_, err := top.Admit(m, in, now)
			if got := courier.ErrorCode(err); got != tt.code {
				t.Fatalf("code %q, want %q (%v)", got, tt.code, err)
			}
			if err == nil {
				if tt.check != nil {
					tt.check(t, m)
				}
				return
			}
			if msg := courier.ErrorMessage(err); !strings.Contains(msg, tt.in) {
				t.Errorf("message %q, want one with %q", msg, tt.in)
			}
			if m.State != "" || m.ID != before.ID || m.Route != before.Route || m.Hash != "" {
				t.Errorf("a refused message was changed: %+v", m)
			}
		})
	}
}

// A name that cannot be made is the server's failure, not the sender's.
func TestTopologyAdmitNewIDFails(t *testing.T) {
	top := &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme"}}}
	m := &courier.Message{Type: "t", Route: "acme", Payload: []byte("x")}
	_, err := top.Admit(m, courier.Intake{NewIDFunc: func() (string, error) { return "", errors.New("no entropy") }}, time.Now())
	if courier.ErrorCode(err) != courier.CodeInternal || !strings.Contains(err.Error(), "no entropy") {
		t.Fatalf("got %v, want an internal error", err)
	}
}

func TestErrorCodes(t *testing.T) {
	e := courier.Errorf(courier.CodeNotFound, "message %q not found", "x")
	wrapped := fmt.Errorf("get: %w", e)
	if courier.ErrorCode(wrapped) != courier.CodeNotFound || courier.ErrorMessage(wrapped) != `message "x" not found` {
		t.Errorf("wrapped *Error: %q %q", courier.ErrorCode(wrapped), courier.ErrorMessage(wrapped))
	}
	plain := errors.New("disk on fire at /var/lib/secret")
	if courier.ErrorCode(plain) != courier.CodeInternal || courier.ErrorMessage(plain) != "internal error" {
		t.Errorf("a plain error leaks: %q %q", courier.ErrorCode(plain), courier.ErrorMessage(plain))
	}
	u := courier.Unavailable("the store", plain)
	if courier.ErrorCode(u) != courier.CodeUnavailable || strings.Contains(courier.ErrorMessage(u), "disk") || !errors.Is(u, plain) {
		t.Errorf("Unavailable: code %q message %q", courier.ErrorCode(u), courier.ErrorMessage(u))
	}
	if courier.ErrorCode(nil) != "" || courier.ErrorMessage(nil) != "" {
		t.Error("nil has a code or a message")
	}
}

func TestOneOf(t *testing.T) {
	tests := []struct {
		words []courier.State
		want  string
	}{
		{nil, ""},
		{[]courier.State{"queued"}, "queued"},
		{[]courier.State{"queued", "inflight"}, "queued or inflight"},
		{courier.States, "queued, inflight, delivered, suspended or discarded"},
	}
	for _, tc := range tests {
		if got := courier.OneOf(tc.words); got != tc.want {
			t.Errorf("OneOf(%v) = %q, want %q", tc.words, got, tc.want)
		}
	}
}
