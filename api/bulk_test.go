package api_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
)

func TestBulkOperations(t *testing.T) {
	ts := newTestServer(t, func(o *api.Options) {
		o.Bulk = engine.NewBulk(o.Store, nil, nil, nil, nil)
	})
	suspendMessage(t, ts.store, "i1", "invoice", courier.ReasonExhausted)
	suspendMessage(t, ts.store, "i2", "invoice", courier.ReasonRejected)
	suspendMessage(t, ts.store, "o1", "order", courier.ReasonRejected)

	status, body, _ := ts.call(t, "POST", "/v1/messages/resubmit", `{"filter":{"type":"invoice"},"route":"globex","operation_id":"op-1"}`)
	op := decode[api.Operation](t, body)
	if status != 200 || op.Count != 2 || !op.Done || op.ID != "op-1" || op.Kind != courier.ActionResubmit || op.Who != "local" {
		t.Fatalf("bulk resubmit: %d %s", status, body)
	}
	for _, id := range []string{"i1", "i2"} {
		_, body, _ := ts.call(t, "GET", "/v1/messages/"+id, "")
		if m := decode[api.Message](t, body); m.State != courier.StateQueued || m.Route != "globex" {
			t.Errorf("%s after bulk resubmit: %s on %s", id, m.State, m.Route)
		}
	}
	// Repeating the request with its operation id does not do it twice.
	suspendMessage(t, ts.store, "i3", "invoice", courier.ReasonExhausted)
	status, body, _ = ts.call(t, "POST", "/v1/messages/resubmit", `{"filter":{"type":"invoice"},"route":"globex","operation_id":"op-1"}`)
	if again := decode[api.Operation](t, body); status != 200 || again.Count != 2 {
		t.Fatalf("repeated bulk resubmit: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/operations/op-1", "")
	if got := decode[api.Operation](t, body); status != 200 || got.Count != 2 || !got.Done {
		t.Fatalf("operation: %d %s", status, body)
	}

	status, body, _ = ts.call(t, "POST", "/v1/messages/discard", `{"filter":{"reason":"rejected"}}`)
	if got := decode[api.Operation](t, body); status != 200 || got.Count != 1 || got.Kind != courier.ActionDiscard {
		t.Fatalf("bulk discard: %d %s", status, body)
	}
	_, body, _ = ts.call(t, "GET", "/v1/messages/o1", "")
	if m := decode[api.Message](t, body); m.State != courier.StateDiscarded {
		t.Errorf("o1 after bulk discard: %s", m.State)
	}

	for _, tt := range []struct {
		path, body, in string
		status         int
	}{
		{"/v1/messages/resubmit", `{"filter":{"state":"queued"}}`, "suspended", 422},
		{"/v1/messages/discard", `{"filter":{"state":"delivered"}}`, "queued or suspended", 422},
		{"/v1/messages/resubmit", `{"route":"nowhere"}`, "nowhere", 422},
		{"/v1/messages/discard", `{"route":"globex"}`, "only to a resubmit", 422},
		{"/v1/messages/resubmit", `{"filter":{"reason":"tired"}}`, "reason", 422},
		{"/v1/messages/resubmit", `{"filter":{"colour":"red"}}`, "colour", 400},
		{"/v1/messages/resubmit", `{"operation_id":"a b"}`, "operation_id", 422},
		{"/v1/operations/nope", ``, "nope", 404},
	} {
		method := "POST"
		if strings.HasPrefix(tt.path, "/v1/operations") {
			method = "GET"
		}
		status, body, _ := ts.call(t, method, tt.path, tt.body)
		code := map[int]courier.Code{400: courier.CodeInvalidArgument, 422: courier.CodeInvalidArgument, 404: courier.CodeNotFound}[tt.status]
		wantError(t, status, body, tt.status, code, tt.in)
	}

	plain := newTestServer(t)
	status, body, _ = plain.call(t, "POST", "/v1/messages/resubmit", `{}`)
	wantError(t, status, body, 501, courier.CodeNotConfigured, "bulk")
}

// The erasure of a deleted tenant shows at /v1/operations/{id} with its
// kind, tenant and progress, to the system's keys alone: not to the
// tenant's keys (also under an id of the tenant's), nor to another
// tenant's or the default tenant's.
func TestEraseTenantOperationIsTheSystems(t *testing.T) {
	ts := newTenantCatalogServer(t)
	ctx := context.Background()
	for i := range 3 {
		m := &courier.Message{ID: courier.QualifyID("acme", fmt.Sprintf("m-%d", i)), Type: "acme/t", Route: "acme/orders",
			Payload: []byte("{}"), ContentType: "application/json"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		if _, err := ts.store.Ingest(ctx, []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"erase.acme", courier.QualifyID("acme", "erase")} {
		op, err := ts.store.StartBulk(ctx, courier.BulkOp{ID: id, Kind: courier.ActionEraseTenant, Who: "system/admin",
			Filter: courier.MessageFilter{Tenant: "acme"}, CreatedAt: time.Now()})
		if err == nil {
			op, err = ts.store.RunBulk(ctx, op.ID, 1, time.Now())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	status, body, _ := ts.callAs(t, "system/admin", "GET", "/v1/operations/erase.acme", "")
	op := decode[api.Operation](t, body)
	if status != 200 || op.Kind != courier.ActionEraseTenant || op.Tenant != "acme" || op.Count != 1 || op.Done ||
		op.Progress <= 0 || op.Progress >= 1 || op.Who != "system/admin" {
		t.Fatalf("the erasure, to the system's key: %d %s", status, body)
	}
	if !strings.Contains(string(body), `"tenant":"acme"`) {
		t.Fatalf("the erasure does not name its tenant: %s", body)
	}
	status, body, _ = ts.callAs(t, "system/admin", "GET", "/v1/tenants/acme/operations/erase", "")
	if op := decode[api.Operation](t, body); status != 200 || op.Tenant != "acme" {
		t.Fatalf("the erasure under an id of the tenant's, to the system's key: %d %s", status, body)
	}
	for _, tt := range []struct{ key, path string }{
		{"acme/admin", "/v1/operations/erase"},
		{"acme/admin", "/v1/tenants/acme/operations/erase"},
		{"acme/admin", "/v1/operations/erase.acme"},
		{"beta/admin", "/v1/operations/erase"},
		{"beta/admin", "/v1/operations/erase.acme"},
	} {
		status, body, _ := ts.callAs(t, tt.key, "GET", tt.path, "")
		wantError(t, status, body, 404, courier.CodeNotFound, "not found")
	}
}
