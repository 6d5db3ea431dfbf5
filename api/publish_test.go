package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
)

// withSubscriptions subscribes acme to every order.* type and globex to
// order.created from tenant acme only.
func withSubscriptions(o *api.Options) {
	o.Topology.Subscriptions = map[string]*courier.Subscription{
		"acme-orders":  {Name: "acme-orders", Types: []string{"order.*"}, Route: "acme"},
		"globex-acme":  {Name: "globex-acme", Types: []string{"order.created"}, Route: "globex", Headers: map[string]string{"X-Tenant": "acme"}},
		"acme-refunds": {Name: "acme-refunds", Types: []string{"refund"}, Route: "acme"},
	}
}

const orderBody = `{"type":"order.created","headers":{"X-Tenant":"acme"},"payload":{"n":1}}`

func TestPublish(t *testing.T) {
	ts := newTestServer(t, withSubscriptions)
	status, body, hdr := ts.call(t, "PUT", "/v1/messages/o-1", orderBody)
	got := decode[api.Message](t, body)
	if status != http.StatusCreated || got.Route != "" || got.State != courier.StateQueued || len(got.Deliveries) != 2 || hdr.Get("Location") != "/v1/messages/o-1" {
		t.Fatalf("publish: %d %s", status, body)
	}
	for i, want := range []struct{ sub, route string }{{"acme-orders", "acme"}, {"globex-acme", "globex"}} {
		if d := got.Deliveries[i]; d.Subscription != want.sub || d.Route != want.route || d.State != courier.StateQueued {
			t.Errorf("delivery %d: %+v, want %s on %s", i, d, want.sub, want.route)
		}
	}
	// Again: the same answer as a read, nothing new.
	status, body, _ = ts.call(t, "PUT", "/v1/messages/o-1", orderBody)
	if again := decode[api.Message](t, body); status != http.StatusOK || len(again.Deliveries) != 2 {
		t.Fatalf("repeat: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/messages/o-1", `{"type":"order.created","payload":{"n":2}}`)
	wantError(t, status, body, 409, courier.CodeConflict, "o-1")
	status, body, _ = ts.call(t, "PUT", "/v1/messages/o-2", `{"type":"order.shipped.late","payload":1}`)
	if got := decode[api.Message](t, body); status != http.StatusCreated || len(got.Deliveries) != 1 || got.Deliveries[0].Subscription != "acme-orders" {
		t.Fatalf("publish to one subscription: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "PUT", "/v1/messages/o-3", `{"type":"invoice.paid","payload":1}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, `"invoice.paid"`)

	// One delivery suspended, as a receiver's 400 leaves it.
	ctx := context.Background()
	claimed, err := ts.store.ClaimDue(ctx, courier.Claim{Now: time.Now().Add(time.Second), LeaseUntil: time.Now().Add(time.Minute),
		Routes: []courier.RouteQuota{{Route: "globex", Limit: 10}}})
	if err != nil || len(claimed) != 1 || claimed[0].Key() != "o-1/globex-acme" {
		t.Fatalf("claim: %d, %v", len(claimed), err)
	}
	d := *claimed[0]
	d.State, d.Reason, d.LastError, d.FinishedAt = courier.StateSuspended, courier.ReasonRejected, "HTTP 400", time.Now()
	if _, err := ts.store.Apply(ctx, []courier.Change{{Message: &d, From: courier.StateInflight, Token: d.TotalAttempts,
		Attempt: &courier.Attempt{MessageID: d.ID, Subscription: d.Subscription, N: d.TotalAttempts, Endpoint: "globex", Route: "globex",
			StartedAt: time.Now(), Outcome: courier.OutcomeFailed, Class: courier.ClassRejected, Status: 400}}}); err != nil {
		t.Fatal(err)
	}

	status, body, _ = ts.call(t, "GET", "/v1/messages/o-1", "")
	got = decode[api.Message](t, body)
	// The summary does not hide the delivery that waits for an operator
	// behind the one still queued.
	if status != 200 || got.State != courier.StateSuspended || got.Deliveries[1].State != courier.StateSuspended || got.Deliveries[1].LastError != "HTTP 400" {
		t.Fatalf("read: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/o-1/deliveries/globex-acme", "")
	if one := decode[api.Message](t, body); status != 200 || one.Subscription != "globex-acme" || one.Route != "globex" || one.State != courier.StateSuspended || string(one.Payload) != `{"n":1}` {
		t.Fatalf("read one delivery: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/o-1/deliveries/nobody", "")
	wantError(t, status, body, 404, courier.CodeNotFound, "nobody")
	status, body, _ = ts.call(t, "GET", "/v1/messages/o-1/attempts", "")
	if l := decode[api.AttemptList](t, body); status != 200 || len(l.Attempts) != 1 || l.Attempts[0].Subscription != "globex-acme" || l.Attempts[0].Status != 400 {
		t.Fatalf("attempts of the message: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/o-1/deliveries/globex-acme/attempts", "")
	if l := decode[api.AttemptList](t, body); status != 200 || len(l.Attempts) != 1 || l.Attempts[0].Subscription != "globex-acme" {
		t.Fatalf("attempts of one delivery: %d %s", status, body)
	}
	// A published message is resent delivery by delivery.
	status, body, _ = ts.call(t, "POST", "/v1/messages/o-1/resend", "")
	wantError(t, status, body, 409, courier.CodeConflict, "/v1/messages/o-1/deliveries/")
	// It names the deliveries, as ID/SUBSCRIPTION, the form the command
	// line takes them in.
	wantError(t, status, body, 409, courier.CodeConflict, "o-1/acme-orders, o-1/globex-acme")
	status, body, _ = ts.call(t, "GET", "/v1/messages?subscription=globex-acme&state=suspended", "")
	if l := decode[api.MessageList](t, body); status != 200 || len(l.Messages) != 1 || l.Messages[0].Subscription != "globex-acme" || l.Messages[0].ID != "o-1" {
		t.Fatalf("suspended list by subscription: %d %s", status, body)
	}

	// The message as a whole is not what is resubmitted: its deliveries are.
	status, body, _ = ts.call(t, "POST", "/v1/messages/o-1/resubmit", "")
	wantError(t, status, body, 409, courier.CodeConflict, "/v1/messages/o-1/deliveries/")
	status, body, _ = ts.call(t, "POST", "/v1/messages/o-1/deliveries/globex-acme/resubmit", "")
	if r := decode[api.Message](t, body); status != 200 || r.State != courier.StateQueued || r.ResubmitCount != 1 || r.Subscription != "globex-acme" {
		t.Fatalf("resubmit a delivery: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "POST", "/v1/messages/o-1/deliveries/acme-orders/discard", "")
	if r := decode[api.Message](t, body); status != 200 || r.State != courier.StateDiscarded {
		t.Fatalf("discard a delivery: %d %s", status, body)
	}
	if acts, err := ts.store.Actions(ctx, "o-1/globex-acme"); err != nil || len(acts) != 1 || acts[0].Kind != courier.ActionResubmit {
		t.Errorf("actions: %+v, %v", acts, err)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/o-1/deliveries/globex-acme", "")
	if one := decode[api.Message](t, body); status != 200 || len(one.Actions) != 1 {
		t.Errorf("a delivery shows its actions: %d %s", status, body)
	}
}

func TestPublishBatch(t *testing.T) {
	ts := newTestServer(t, withSubscriptions)
	status, body, _ := ts.call(t, "POST", "/v1/messages/batch", `{"messages":[
		{"id":"a","type":"order.created","headers":{"X-Tenant":"acme"},"payload":1},
		{"id":"b","type":"nobody.wants","payload":1},
		{"id":"c","type":"invoice","route":"acme","payload":1},
		{"id":"a","type":"order.created","headers":{"X-Tenant":"acme"},"payload":1},
		{"id":"d","type":"refund","payload":1}]}`)
	res := decode[api.BatchResponse](t, body)
	want := []int{201, 422, 201, 200, 201}
	if status != 200 || len(res.Results) != len(want) {
		t.Fatalf("batch: %d %s", status, body)
	}
	for i, w := range want {
		if res.Results[i].Status != w {
			t.Errorf("item %d: %d, want %d (%s)", i, res.Results[i].Status, w, body)
		}
	}
	ds, err := ts.store.Deliveries(context.Background(), "a")
	if err != nil || len(ds) != 2 {
		t.Fatalf("a: %d deliveries, %v", len(ds), err)
	}
}

func TestTypes(t *testing.T) {
	ts := newTestServer(t, withSubscriptions)
	ts.call(t, "PUT", "/v1/messages/o-1", orderBody)
	ts.call(t, "PUT", "/v1/messages/o-2", `{"type":"order.created","payload":2}`)
	ts.call(t, "PUT", "/v1/messages/i-1", `{"type":"invoice","route":"acme","payload":1}`)
	status, body, _ := ts.call(t, "GET", "/v1/types", "")
	l := decode[api.TypeList](t, body)
	if status != 200 || len(l.Types) != 2 {
		t.Fatalf("types: %d %s", status, body)
	}
	inv, order := l.Types[0], l.Types[1]
	if inv.Type != "invoice" || inv.Count != 1 || inv.Policy != "invoice" || len(inv.Subscriptions) != 0 {
		t.Errorf("invoice: %+v", inv)
	}
	if order.Type != "order.created" || order.Count != 2 || order.Policy != "default" || len(order.Subscriptions) != 2 ||
		order.Subscriptions[0].Name != "acme-orders" || order.Subscriptions[1].Headers["X-Tenant"] != "acme" {
		t.Errorf("order.created: %+v", order)
	}
}

// A subscription added later gets the earlier messages by a replay, which
// answers at once and shows its progress; a resend delivers a delivered
// message again.
func TestReplayAndResend(t *testing.T) {
	var top *courier.Topology
	var store courier.Store
	ts := newTestServer(t, withSubscriptions, func(o *api.Options) {
		bulk := engine.NewBulk(o.Store, nil, nil, nil, nil)
		if err := bulk.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { bulk.Stop(context.Background()) })
		o.Bulk, top, store = bulk, o.Topology, o.Store
	})
	since, until := time.Now().Add(-time.Minute).UTC(), time.Now().Add(time.Hour).UTC()
	ts.call(t, "PUT", "/v1/messages/o-1", orderBody)
	ts.call(t, "PUT", "/v1/messages/o-2", `{"type":"order.shipped","payload":2}`)
	ts.call(t, "PUT", "/v1/messages/r-1", `{"type":"refund","payload":3}`)

	status, body, _ := ts.call(t, "POST", "/v1/subscriptions/late/replay", `{"since":"`+since.Format(time.RFC3339Nano)+`"}`)
	wantError(t, status, body, 404, courier.CodeNotFound, "late")
	top.Subscriptions["late"] = &courier.Subscription{Name: "late", Types: []string{"order.*"}, Route: "globex"}
	status, body, _ = ts.call(t, "POST", "/v1/subscriptions/late/replay", `{}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "since is required")
	status, body, _ = ts.call(t, "POST", "/v1/subscriptions/late/replay", `{"since":"`+since.Format(time.RFC3339Nano)+`","types":["order*"]}`)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, "order*")

	status, body, hdr := ts.call(t, "POST", "/v1/subscriptions/late/replay", `{"since":"`+since.Format(time.RFC3339Nano)+`","until":"`+until.Format(time.RFC3339Nano)+`","operation_id":"replay-1"}`)
	op := decode[api.Operation](t, body)
	if status != http.StatusAccepted || op.Kind != courier.ActionReplay || op.Replay == nil || op.Replay.Subscription != "late" || hdr.Get("Location") != "/v1/operations/replay-1" {
		t.Fatalf("replay: %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !op.Done {
		if time.Now().After(deadline) {
			t.Fatalf("the replay did not finish: %+v", op)
		}
		time.Sleep(20 * time.Millisecond)
		_, body, _ = ts.call(t, "GET", "/v1/operations/replay-1", "")
		op = decode[api.Operation](t, body)
	}
	if op.Count != 2 || op.Progress != 1 {
		t.Fatalf("replay done: %+v, want 2 deliveries (the two orders)", op)
	}
	// The replay is in the audit log once, whoever repeats its request.
	if status, body, _ = ts.call(t, "POST", "/v1/subscriptions/late/replay", `{"since":"`+since.Format(time.RFC3339Nano)+`","until":"`+until.Format(time.RFC3339Nano)+`","operation_id":"replay-1"}`); status != http.StatusAccepted {
		t.Fatalf("the replay repeated: %d %s", status, body)
	}
	_, body, _ = ts.call(t, "GET", "/v1/audit?action=replay&subject=late", "")
	if page := decode[api.AuditPage](t, body); len(page.Entries) != 1 || page.Entries[0].Action != courier.ActionReplay ||
		!strings.HasPrefix(page.Entries[0].Detail, "operation replay-1: messages ingested from "+since.Format(time.RFC3339)) {
		t.Fatalf("audit of the replay: %s, want one entry naming the operation", body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/messages/o-2", "")
	if m := decode[api.Message](t, body); status != 200 || len(m.Deliveries) != 2 || m.Deliveries[1].Subscription != "late" {
		t.Fatalf("o-2 after the replay: %d %s", status, body)
	}

	// Delivered, then resent.
	ctx := context.Background()
	claimed, err := store.ClaimDue(ctx, courier.Claim{Now: time.Now().Add(time.Second), LeaseUntil: time.Now().Add(time.Minute),
		Routes: []courier.RouteQuota{{Route: "acme", Limit: 10}}})
	if err != nil || len(claimed) == 0 {
		t.Fatalf("claim: %v", err)
	}
	d := *claimed[0]
	d.State, d.FinishedAt = courier.StateDelivered, time.Now()
	if _, err := store.Apply(ctx, []courier.Change{{Message: &d, From: courier.StateInflight, Token: d.TotalAttempts}}); err != nil {
		t.Fatal(err)
	}
	path := "/v1/messages/" + d.ID + "/deliveries/" + d.Subscription + "/resend"
	status, body, _ = ts.call(t, "POST", path, "")
	if m := decode[api.Message](t, body); status != 200 || m.State != courier.StateQueued || m.ResubmitCount != 1 {
		t.Fatalf("resend: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "POST", path, "")
	wantError(t, status, body, 409, courier.CodeConflict, "queued")
}
