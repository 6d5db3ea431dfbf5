package storetest

import (
	"context"
	"testing"

	courier "github.com/courier-gw/courier"
)

// testRecipient checks that a message's recipient comes back as written
// from every read of a message (Ingest of an existing id, Message, Messages
// and ClaimDue), and that a message without one has none.
func testRecipient(t *testing.T, s courier.Store) {
	ctx := context.Background()
	to := &courier.Message{ID: "to", Type: "invoice", Route: "nemhandel", Recipient: "0088:5798000000001",
		Payload: []byte(`{"n":1}`), ContentType: "application/json"}
	courier.Accept(to, courier.DefaultPolicy(), false, base)
	plain := &courier.Message{ID: "plain", Type: "invoice", Route: "nemhandel", Payload: []byte(`{"n":2}`), ContentType: "application/json"}
	courier.Accept(plain, courier.DefaultPolicy(), false, base)
	mustIngest(t, s, to, plain)

	want := map[string]string{"to": to.Recipient, "plain": ""}
	check := func(where string, m *courier.Message) {
		t.Helper()
		if w, ok := want[m.ID]; !ok {
			t.Errorf("%s: unexpected message %s", where, m.ID)
		} else if m.Recipient != w {
			t.Errorf("%s: %s has recipient %q, want %q", where, m.ID, m.Recipient, w)
		}
	}

	for id := range want {
		check("Message", mustGet(t, s, id))
	}
	res := mustIngest(t, s, to, plain)
	for i, r := range res {
		if r.Status != courier.IngestExists || r.Message == nil {
			t.Fatalf("ingest again, item %d: %+v, want exists with the stored message", i, r)
		}
		check("Ingest again", r.Message)
	}
	// The recipient is content: the same id for another recipient, or
	// without one, conflicts.
	other := *to
	other.Recipient = "0088:5798000000002"
	other.Hash = courier.ContentHash(&other)
	none := *to
	none.Recipient = ""
	none.Hash = courier.ContentHash(&none)
	for _, r := range mustIngest(t, s, &other, &none) {
		if r.Status != courier.IngestConflict {
			t.Errorf("ingest with another recipient: status %v, want conflict", r.Status)
		}
	}
	check("Message after a conflict", mustGet(t, s, "to"))

	page, err := s.Messages(ctx, courier.MessageFilter{})
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	if len(page.Messages) != len(want) {
		t.Errorf("Messages %s, want to and plain", ids(page.Messages))
	}
	for _, m := range page.Messages {
		check("Messages", m)
	}

	claimed := claim(t, s, base, courier.RouteQuota{Route: "nemhandel", Limit: 10})
	if len(claimed) != len(want) {
		t.Fatalf("claimed %s, want to and plain", ids(claimed))
	}
	for _, m := range claimed {
		check("ClaimDue", m)
	}
}
