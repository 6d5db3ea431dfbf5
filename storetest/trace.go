package storetest

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// testTraceParent checks that a message's trace context comes back as
// written from the reads of a message (Message, Messages, ClaimDue), that
// the deliveries of a published message share it, and that a message
// without one has none.
func testTraceParent(t *testing.T, s courier.Store) {
	ctx := context.Background()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := newMessage("traced", base)
	traced.TraceParent = tp
	plain := newMessage("plain", base)
	ds := published(t, pubTopology(), "pub", "order.created", `{"n":1}`, map[string]string{"X-Tenant": "acme"}, base)
	for _, d := range ds {
		d.TraceParent = tp
	}
	mustIngest(t, s, append([]*courier.Message{traced, plain}, ds...)...)

	want := map[string]string{"traced": tp, "plain": ""}
	for _, d := range ds {
		want[d.Key()] = tp
	}
	check := func(where string, m *courier.Message) {
		t.Helper()
		if w, ok := want[m.Key()]; !ok {
			t.Errorf("%s: unexpected message %s", where, m.Key())
		} else if m.TraceParent != w {
			t.Errorf("%s: %s has trace parent %q, want %q", where, m.Key(), m.TraceParent, w)
		}
	}
	for key := range want {
		check("Message", mustGet(t, s, key))
	}
	page, err := s.Messages(ctx, courier.MessageFilter{})
	if err != nil {
		t.Fatalf("Messages: %v", err)
	}
	for _, m := range page.Messages {
		check("Messages", m)
	}
	deliveries, err := s.Deliveries(ctx, "pub")
	if err != nil || len(deliveries) != len(ds) {
		t.Fatalf("Deliveries(pub) = %d, %v; want %d", len(deliveries), err, len(ds))
	}
	for _, d := range deliveries {
		check("Deliveries", d)
	}
	claimed := claim(t, s, base.Add(2*time.Minute), courier.RouteQuota{Route: "acme", Limit: 10})
	if len(claimed) != 2 {
		t.Fatalf("claimed %s, want traced and plain", ids(claimed))
	}
	for _, m := range claimed {
		check("ClaimDue", m)
	}
}
