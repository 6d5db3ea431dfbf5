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
		{"no route", func(m *courier.Message) { m.Route = "" }, "route is required"},
		{"unknown route", func(m *courier.Message) { m.Route = "globex" }, `"globex"`},
		{"priority low", func(m *courier.Message) { m.Priority = -1 }, "priority"},
		{"priority high", func(m *courier.Message) { m.Priority = 10 }, "priority"},
		{"long ordering key", func(m *courier.Message) { m.OrderingKey = strings.Repeat("k", 257) }, "ordering_key"},
		{"expires before deliver", func(m *courier.Message) { m.DeliverAfter, m.ExpiresAt = at, at }, "expires_at"},
		{"header name", func(m *courier.Message) { m.Headers = map[string]string{"A B": "x"} }, "header name"},
		{"header value", func(m *courier.Message) { m.Headers = map[string]string{"A": "x\r\nInjected: y"} }, "control character"},
	}
	for _, tt := range tests {
		m := valid()
		tt.change(m)
		err := testTopology().Validate(m)
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
	if courier.ErrorCode(nil) != "" {
		t.Error("nil has a code")
	}
}
