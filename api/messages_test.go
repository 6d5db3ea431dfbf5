package api_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

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

// TestSequenceShown: a message with an ordering key is shown with its
// number in its key's order and the id of the one before it, in the answer
// to its ingest and in a read; a message without a key has neither field.
func TestSequenceShown(t *testing.T) {
	ts := newTestServer(t)
	for i, id := range []string{"s-1", "s-2", "s-free"} {
		key := `"ordering_key":"c-7",`
		if id == "s-free" {
			key = ""
		}
		st, body, _ := ts.call(t, "PUT", "/v1/messages/"+id, `{"type":"order","route":"acme",`+key+`"payload":{}}`)
		if st != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", id, st, body)
		}
		_, got, _ := ts.call(t, "GET", "/v1/messages/"+id, "")
		wantSeq, wantPrev := []int64{1, 2, 0}[i], []string{"", "s-1", ""}[i]
		for _, b := range [][]byte{body, got} {
			var raw map[string]any
			if err := json.Unmarshal(b, &raw); err != nil {
				t.Fatal(err)
			}
			m := decode[api.Message](t, b)
			if m.Sequence != wantSeq || m.PreviousID != wantPrev {
				t.Errorf("%s shown with sequence %d after %q, want %d after %q: %s", id, m.Sequence, m.PreviousID, wantSeq, wantPrev, b)
			}
			_, hasSeq := raw["sequence"]
			_, hasPrev := raw["previous_id"]
			if hasSeq != (wantSeq != 0) || hasPrev != (wantPrev != "") {
				t.Errorf("%s: fields sequence %v and previous_id %v shown; want them only when set: %s", id, hasSeq, hasPrev, b)
			}
		}
	}
}
