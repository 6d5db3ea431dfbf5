package receiver_test

import (
	"context"
	"encoding/base64"
	"net/http/httptest"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
)

// sent is one message as a sender gives it, to either door: the fields of
// an ingest request, or the headers and body of an item at a receive
// location.
type sent struct {
	id, typ, route, key, contentType string
	body                             []byte
}

// ingest sends it through the API.
func (s sent) ingest(c *api.Client) error {
	payload := base64.StdEncoding.EncodeToString(s.body)
	_, _, err := c.Ingest(context.Background(), api.IngestRequest{ID: s.id, Type: s.typ, Route: s.route, PayloadBase64: &payload,
		ContentType: s.contentType, OrderingKey: s.key})
	return err
}

// item is it as a receive location gets it from a broker.
func (s sent) item() *courier.InboundItem {
	return &courier.InboundItem{Body: s.body, ContentType: s.contentType,
		Headers: map[string]string{"message-id": s.id, "x-type": s.typ, "x-route": s.route, "x-key": s.key}}
}

// The API and a receive location take messages in through one function:
// the same message is taken by both or refused by both for the same
// reason. The API answers the refusal; the receive location keeps the item
// as a suspended message with the same words or, with on_error: stop,
// leaves it at its source and stops, saying why.
func TestSameVerdictAtBothDoors(t *testing.T) {
	const maxPayload = 1 << 20 // the harness's max_payload
	good := sent{id: "inv-1", typ: "invoice", route: "acme", key: "c-1", contentType: "application/xml", body: []byte("<invoice/>")}
	with := func(change func(*sent)) sent {
		s := good
		change(&s)
		return s
	}
	tests := []struct {
		name   string
		sent   sent
		code   courier.Code   // of the API's answer; "" when taken in
		reason courier.Reason // of the suspended message
	}{
		{"usable", good, "", ""},
		{"no content type", with(func(s *sent) { s.contentType = "" }), "", ""},
		{"bad id", with(func(s *sent) { s.id = "a b" }), courier.CodeInvalidArgument, courier.ReasonInvalid},
		{"no type", with(func(s *sent) { s.typ = "" }), courier.CodeInvalidArgument, courier.ReasonInvalid},
		{"bad type", with(func(s *sent) { s.typ = "in voice" }), courier.CodeInvalidArgument, courier.ReasonInvalid},
		{"no route", with(func(s *sent) { s.route = "" }), courier.CodeInvalidArgument, courier.ReasonNoRoute}, // published: no subscription wants it
		{"unknown route", with(func(s *sent) { s.route = "globex" }), courier.CodeInvalidArgument, courier.ReasonNoRoute},
		{"payload too large", with(func(s *sent) { s.body = make([]byte, maxPayload+1) }), courier.CodePayloadTooLarge, courier.ReasonInvalid},
		{"bad content type", with(func(s *sent) { s.contentType = "not a type" }), courier.CodeInvalidArgument, courier.ReasonInvalid},
		{"long ordering key", with(func(s *sent) { s.key = strings.Repeat("k", courier.MaxIDLen+1) }), courier.CodeInvalidArgument, courier.ReasonInvalid},
	}
	for _, tt := range tests {
		for _, onError := range []courier.OnError{courier.OnErrorSuspend, courier.OnErrorStop} {
			t.Run(tt.name+"/"+string(onError), func(t *testing.T) {
				t.Parallel()
				q := newQueue()
				r := &courier.Receiver{Name: "erp", Transport: courier.ReceiveAMQP, TypeHeader: "x-type", RouteHeader: "x-route",
					IDHeader: "message-id", OrderingKeyHeader: "x-key", OnError: onError}
				h := newHarness(t, r, q, nil)
				err := tt.sent.ingest(newAPI(t, h.top, maxPayload))
				if code := courier.ErrorCode(err); code != tt.code {
					t.Fatalf("the API answered %v, want code %q", err, tt.code)
				}
				refusal := courier.ErrorMessage(err)

				q.put(tt.sent.item())
				if tt.code == "" || onError == courier.OnErrorSuspend {
					h.waitFor("the item acknowledged", func() bool { _, _, acked := q.state(); return acked == 1 })
					page, err := h.store.Messages(context.Background(), courier.MessageFilter{})
					if err != nil || len(page.Messages) != 1 {
						t.Fatalf("stored %d messages, %v; want the item", len(page.Messages), err)
					}
					m := page.Messages[0]
					if tt.code == "" {
						if m.State != courier.StateQueued || m.ID != tt.sent.id || m.LastError != "" {
							t.Fatalf("the API took it in; the receive location stored it as %s %s %q", m.ID, m.State, m.LastError)
						}
						return
					}
					if m.State != courier.StateSuspended || m.Reason != tt.reason || m.LastError != "receiver erp: "+refusal {
						t.Fatalf("the API answered %q; the receive location kept it %s (%s) with %q", refusal, m.State, m.Reason, m.LastError)
					}
					return
				}
				h.waitFor("the receiver stopped", func() bool { return h.svc.Statuses()[0].State == courier.ReceiverStopped })
				if st := h.svc.Statuses()[0]; !strings.HasSuffix(st.StopReason, " cannot be taken: "+refusal) || st.LastError != refusal {
					t.Fatalf("the API answered %q; the receiver stopped with %q, last error %q", refusal, st.StopReason, st.LastError)
				}
				if ready, out, acked := q.state(); ready != 1 || out != 0 || acked != 0 {
					t.Fatalf("source: %d ready, %d out, %d acked; want the item back", ready, out, acked)
				}
			})
		}
	}
}

// newAPI serves the API on a store of its own, with the topology and
// max_payload of the receive location it is compared with.
func newAPI(t *testing.T, top *courier.Topology, maxPayload int64) *api.Client {
	t.Helper()
	store := sqlitetest.Open(t)
	srv := httptest.NewServer(api.NewServer(api.Options{Store: store, Topology: top, MaxPayload: maxPayload}))
	t.Cleanup(srv.Close)
	return api.NewClient(srv.URL, "")
}
