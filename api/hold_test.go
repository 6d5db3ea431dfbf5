package api_test

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/storetest"
)

// TestHeldShown: a queued message whose endpoint is switched off or
// suspended says it is held, by which endpoint and why, in its read and in
// the listing; the rest, not.
func TestHeldShown(t *testing.T) {
	ts := newTestServer(t)
	ctx := context.Background()
	for _, m := range []struct{ id, body string }{
		{"off-1", invoiceBody},
		{"susp-1", `{"type":"invoice","route":"globex","payload":1}`},
	} {
		if status, body, _ := ts.call(t, "PUT", "/v1/messages/"+m.id, m.body); status != 201 {
			t.Fatalf("ingest %s: %d %s", m.id, status, body)
		}
	}
	offAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	if _, err := ts.store.UpdateHealth(ctx, "acme-primary", func(h courier.EndpointHealth) courier.EndpointHealth { return h.SwitchedOff(offAt) },
		&courier.Action{At: offAt, Who: "ops", Kind: courier.ActionEndpointOff, Subject: "acme-primary"}); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(10 * time.Minute).UTC().Truncate(time.Millisecond)
	if _, err := ts.store.UpdateHealth(ctx, "globex", func(h courier.EndpointHealth) courier.EndpointHealth {
		h.State, h.SuspendedUntil, h.UpdatedAt = courier.HealthSuspended, until, time.Now()
		return h
	}, nil); err != nil {
		t.Fatal(err)
	}

	status, body, _ := ts.call(t, "GET", "/v1/messages/off-1", "")
	got := decode[api.Message](t, body)
	if h := got.Held; status != 200 || got.State != courier.StateQueued || h == nil || h.Endpoint != "acme-primary" ||
		h.State != courier.HealthOff || h.By != "ops" || h.Since == nil || !h.Since.Equal(offAt) || h.Until != nil {
		t.Fatalf("a message whose endpoint is off: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/susp-1", "")
	got = decode[api.Message](t, body)
	if h := got.Held; status != 200 || h == nil || h.Endpoint != "globex" || h.State != courier.HealthSuspended ||
		h.Until == nil || !h.Until.Equal(until) || h.By != "" {
		t.Fatalf("a message whose endpoint is suspended: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages?state=queued", "")
	list := decode[api.MessageList](t, body)
	if status != 200 || len(list.Messages) != 2 {
		t.Fatalf("list: %d %s", status, body)
	}
	for _, m := range list.Messages {
		if m.Held == nil {
			t.Errorf("listed %s without what holds it: %s", m.ID, body)
		}
	}

	// Switched on, nothing holds it.
	if _, err := ts.store.UpdateHealth(ctx, "acme-primary", func(h courier.EndpointHealth) courier.EndpointHealth { return h.SwitchedOn(time.Now()) }, nil); err != nil {
		t.Fatal(err)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/off-1", "")
	if got := decode[api.Message](t, body); status != 200 || got.Held != nil {
		t.Fatalf("a message whose endpoint is on again: %d %s", status, body)
	}
}

// TestAttemptsAcrossRounds: a message that failed, was resubmitted and
// then delivered counts both attempts in all (as its history lists them)
// beside the one of its round, and shows no last error once delivered.
func TestAttemptsAcrossRounds(t *testing.T) {
	ts := newTestServer(t)
	top := testTopology()
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/r-1", invoiceBody); status != 201 {
		t.Fatalf("ingest: %d %s", status, body)
	}
	storetest.AttemptOn(t, ts.store, top, "acme", "acme-primary", courier.Result{Class: courier.ClassRejected, Status: 400, Error: "HTTP 400: unknown customer"})
	status, body, _ := ts.call(t, "GET", "/v1/messages/r-1", "")
	got := decode[api.Message](t, body)
	if status != 200 || got.State != courier.StateSuspended || got.LastError != "HTTP 400: unknown customer" || got.Attempts != 1 ||
		got.AttemptsTotal == nil || *got.AttemptsTotal != 1 {
		t.Fatalf("suspended: %d %s", status, body)
	}
	if status, body, _ := ts.call(t, "POST", "/v1/messages/r-1/resubmit", ""); status != 200 {
		t.Fatalf("resubmit: %d %s", status, body)
	}
	storetest.AttemptOn(t, ts.store, top, "acme", "acme-primary", courier.Result{Status: 204})
	status, body, _ = ts.call(t, "GET", "/v1/messages/r-1", "")
	got = decode[api.Message](t, body)
	if status != 200 || got.State != courier.StateDelivered || got.LastError != "" || got.LastClass != "" ||
		got.Attempts != 1 || got.AttemptsTotal == nil || *got.AttemptsTotal != 2 || got.ResubmitCount != 1 {
		t.Fatalf("delivered after a resubmit: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/r-1/attempts", "")
	if l := decode[api.AttemptList](t, body); status != 200 || len(l.Attempts) != *got.AttemptsTotal {
		t.Fatalf("attempts listed: %d %s, want %d", status, body, *got.AttemptsTotal)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages?state=delivered", "")
	if l := decode[api.MessageList](t, body); status != 200 || len(l.Messages) != 1 || l.Messages[0].LastError != "" {
		t.Fatalf("listed delivered: %d %s", status, body)
	}
}

// TestListByIDPrefixAndRoutes: the listing finds messages by the start of
// their id, and by any of several routes.
func TestListByIDPrefixAndRoutes(t *testing.T) {
	ts := newTestServer(t)
	for _, m := range []struct{ id, route string }{{"inv-2026-1", "acme"}, {"inv-2026-2", "globex"}, {"ord-1", "acme"}} {
		if status, body, _ := ts.call(t, "PUT", "/v1/messages/"+m.id, `{"type":"invoice","route":"`+m.route+`","payload":1}`); status != 201 {
			t.Fatalf("ingest %s: %d %s", m.id, status, body)
		}
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"id_prefix=inv-2026", []string{"inv-2026-2", "inv-2026-1"}},
		{"id_prefix=inv-2026&route=acme", []string{"inv-2026-1"}},
		{"id_prefix=INV", nil},
		{"routes=acme,globex", []string{"ord-1", "inv-2026-2", "inv-2026-1"}},
		{"routes=globex", []string{"inv-2026-2"}},
		{"routes=acme,globex&route=acme", []string{"ord-1", "inv-2026-1"}},
	} {
		status, body, _ := ts.call(t, "GET", "/v1/messages?"+tt.query, "")
		l := decode[api.MessageList](t, body)
		var got []string
		for _, m := range l.Messages {
			got = append(got, m.ID)
		}
		if status != 200 || len(got) != len(tt.want) {
			t.Errorf("?%s: %d %v, want %v", tt.query, status, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("?%s: %v, want %v", tt.query, got, tt.want)
				break
			}
		}
	}
}
