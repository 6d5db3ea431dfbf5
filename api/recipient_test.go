package api_test

import (
	"net/http"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// withLookupRoute adds a route that looks up each message's endpoint by
// its recipient.
func withLookupRoute(o *api.Options) {
	o.Topology.Routes["nemhandel"] = &courier.Route{Name: "nemhandel",
		Lookup: &courier.Lookup{URL: "https://registry.example/{recipient}"}}
}

// recipientBody is an ingest body on route with the recipient given (none
// when empty).
func recipientBody(route, recipient string) string {
	r := ""
	if recipient != "" {
		r = `,"recipient":"` + recipient + `"`
	}
	return `{"type":"invoice","route":"` + route + `","payload":{"total":42}` + r + `}`
}

func TestRecipientStoredAndShown(t *testing.T) {
	ts := newTestServer(t, withLookupRoute)
	const to = "0088:5798000000001"

	status, body, _ := ts.call(t, "PUT", "/v1/messages/put-1", recipientBody("nemhandel", to))
	if status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", status, body)
	}
	if got := decode[api.Message](t, body).Recipient; got != to {
		t.Errorf("PUT answered recipient %q, want %q", got, to)
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages", strings.Replace(recipientBody("nemhandel", to), `{`, `{"id":"post-1",`, 1))
	if status != http.StatusCreated {
		t.Fatalf("POST: %d %s", status, body)
	}
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/plain", recipientBody("acme", "")); status != http.StatusCreated {
		t.Fatalf("PUT without recipient: %d %s", status, body)
	}
	items := []string{
		strings.Replace(recipientBody("nemhandel", to), `{`, `{"id":"batch-1",`, 1),
		strings.Replace(recipientBody("acme", "someone"), `{`, `{"id":"batch-2",`, 1),
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/batch", `{"messages":[`+strings.Join(items, ",")+`]}`)
	if status != http.StatusOK {
		t.Fatalf("batch: %d %s", status, body)
	}
	for i, r := range decode[api.BatchResponse](t, body).Results {
		if r.Status != http.StatusCreated {
			t.Errorf("batch item %d: %+v, want 201", i, r)
		}
	}

	want := map[string]string{"put-1": to, "post-1": to, "batch-1": to, "batch-2": "someone", "plain": ""}
	for id, w := range want {
		status, body, _ := ts.call(t, "GET", "/v1/messages/"+id, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", id, status, body)
		}
		if got := decode[api.Message](t, body).Recipient; got != w {
			t.Errorf("GET %s: recipient %q, want %q", id, got, w)
		}
		if w == "" && strings.Contains(string(body), `"recipient"`) {
			t.Errorf("GET %s shows an empty recipient: %s", id, body)
		}
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages", "")
	if status != http.StatusOK {
		t.Fatalf("list: %d %s", status, body)
	}
	list := decode[api.MessageList](t, body)
	if len(list.Messages) != len(want) {
		t.Fatalf("list has %d messages, want %d", len(list.Messages), len(want))
	}
	for _, m := range list.Messages {
		if m.Recipient != want[m.ID] {
			t.Errorf("list: %s has recipient %q, want %q", m.ID, m.Recipient, want[m.ID])
		}
	}
}

func TestRecipientErrors(t *testing.T) {
	ts := newTestServer(t, withLookupRoute)
	for _, c := range []struct {
		name, body, wantIn string
	}{
		{"space", recipientBody("acme", "0088 5798000000001"), "recipient"},
		{"too long", recipientBody("nemhandel", strings.Repeat("r", courier.MaxRecipientLen+1)), "recipient"},
		{"missing on a lookup route", recipientBody("nemhandel", ""), "recipient is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			status, body, _ := ts.call(t, "POST", "/v1/messages", c.body)
			wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument, c.wantIn)
			status, body, _ = ts.call(t, "POST", "/v1/messages/batch", `{"messages":[`+c.body+`]}`)
			if status != http.StatusOK {
				t.Fatalf("batch: %d %s", status, body)
			}
			res := decode[api.BatchResponse](t, body).Results
			if len(res) != 1 || res[0].Status != http.StatusUnprocessableEntity || res[0].Error == nil ||
				res[0].Error.Code != courier.CodeInvalidArgument || !strings.Contains(res[0].Error.Message, c.wantIn) {
				t.Errorf("batch: %s, want 422 invalid_argument mentioning %q", body, c.wantIn)
			}
		})
	}
	// The longest recipient allowed is taken.
	longest := strings.Repeat("r", courier.MaxRecipientLen)
	if status, body, _ := ts.call(t, "POST", "/v1/messages", recipientBody("nemhandel", longest)); status != http.StatusCreated {
		t.Errorf("recipient of %d characters: %d %s, want 201", len(longest), status, body)
	}
}

func TestRecipientIdempotency(t *testing.T) {
	ts := newTestServer(t, withLookupRoute)
	first := recipientBody("nemhandel", "0088:5798000000001")
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/inv-1", first); status != http.StatusCreated {
		t.Fatalf("first PUT: %d %s", status, body)
	}
	status, body, _ := ts.call(t, "PUT", "/v1/messages/inv-1", first)
	if status != http.StatusOK {
		t.Fatalf("same recipient again: %d %s, want 200", status, body)
	}
	if got := decode[api.Message](t, body).Recipient; got != "0088:5798000000001" {
		t.Errorf("repeat answered recipient %q", got)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/messages/inv-1", recipientBody("nemhandel", "0088:5798000000002"))
	wantError(t, status, body, http.StatusConflict, courier.CodeConflict, "inv-1")

	// On a route without a lookup, adding a recipient is other content too.
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/plain", recipientBody("acme", "")); status != http.StatusCreated {
		t.Fatalf("PUT without recipient: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/messages/plain", recipientBody("acme", "someone"))
	wantError(t, status, body, http.StatusConflict, courier.CodeConflict, "plain")
}
