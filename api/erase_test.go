package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
)

// An operator erases a message's payload on request: the answer and every
// later read show the tombstone (when, by whom, why) instead of the
// payload, the message is discarded with it, and the history and audit log
// record both. Its payload is 410 with when and by whom; a resend is
// refused; erasing again answers the same tombstone. A sender may not
// erase.
func TestErasePayload(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, func(o *api.Options) { o.Keys, o.Clock = testKeys(t), clock })
	if status, body, _ := ts.callAs(t, "erp", "PUT", "/v1/messages/inv-7", `{"type":"invoice","route":"acme","payload":{"name":"Jane Doe"}}`); status != http.StatusCreated {
		t.Fatalf("ingest: %d %s", status, body)
	}
	status, body, _ := ts.callAs(t, "erp", "POST", "/v1/messages/inv-7/erase", `{}`)
	wantError(t, status, body, http.StatusForbidden, courier.CodePermissionDenied, "erp")

	status, body, _ = ts.callAs(t, "ops", "POST", "/v1/messages/inv-7/erase", `{"reason":"GDPR request 2026-118"}`)
	if status != http.StatusOK {
		t.Fatalf("erase: %d %s", status, body)
	}
	want := api.Erased{At: clock.Now(), By: "ops", Reason: "GDPR request 2026-118"}
	for _, read := range []string{"erase", "get"} {
		if read == "get" {
			status, body, _ = ts.callAs(t, "erp", "GET", "/v1/messages/inv-7", "")
		}
		m := decode[api.Message](t, body)
		if status != http.StatusOK || m.Erased == nil || *m.Erased != want {
			t.Fatalf("%s: %d, erased %+v; want %+v", read, status, m.Erased, want)
		}
		if m.Payload != nil || m.PayloadBase64 != "" || strings.Contains(string(body), "Jane") {
			t.Fatalf("%s shows the erased payload: %s", read, body)
		}
		if m.State != courier.StateDiscarded || m.Size != len(`{"name":"Jane Doe"}`) {
			t.Fatalf("%s: %s, size %d; want discarded with its size kept", read, m.State, m.Size)
		}
	}
	m := decode[api.Message](t, body)
	var kinds []string
	for _, a := range m.Actions {
		kinds = append(kinds, string(a.Kind)+" "+a.Who+" "+a.Detail)
	}
	if got := strings.Join(kinds, "; "); got != "discard ops payload erased; erase ops GDPR request 2026-118" {
		t.Errorf("actions: %s", got)
	}
	status, body, _ = ts.callAs(t, "ops", "GET", "/v1/messages/inv-7?payload=base64", "")
	if status != http.StatusOK || strings.Contains(string(body), "payload_base64") {
		t.Errorf("?payload=base64 of an erased message: %d %s", status, body)
	}

	status, body, _ = ts.callAs(t, "erp", "GET", "/v1/messages/inv-7/payload", "")
	wantError(t, status, body, http.StatusGone, courier.CodeGone, `erased at 2026-11-25T12:00:00Z by "ops" (GDPR request 2026-118)`)

	status, body, _ = ts.callAs(t, "ops", "POST", "/v1/messages/inv-7/resend", "")
	wantError(t, status, body, http.StatusConflict, courier.CodeConflict, "its payload was erased")

	clock.Advance(time.Hour)
	status, body, _ = ts.callAs(t, "root", "POST", "/v1/messages/inv-7/erase", "")
	if m := decode[api.Message](t, body); status != http.StatusOK || m.Erased == nil || *m.Erased != want {
		t.Fatalf("erase again: %d %s; want the same tombstone", status, body)
	}
	status, body, _ = ts.callAs(t, "root", "GET", "/v1/audit?action=erase", "")
	if status != http.StatusOK || strings.Count(string(body), `"action":"erase"`) != 1 {
		t.Errorf("audit of erasures: %d %s; want the one", status, body)
	}
	status, body, _ = ts.callAs(t, "ops", "POST", "/v1/messages/nope/erase", "")
	wantError(t, status, body, http.StatusNotFound, courier.CodeNotFound, "nope")
	status, body, _ = ts.callAs(t, "ops", "POST", "/v1/messages/inv-7/erase", `{"reason":"`+strings.Repeat("x", 1025)+`"}`)
	wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument, "reason")
}

// A claim-check URL of a payload erased since it was made answers 410,
// never the bytes; the blob is gone from the blob area.
func TestClaimOfErasedPayload(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, func(o *api.Options) { o.Keys, o.Clock = testKeys(t), clock })
	m, _ := ingestBlob(t, ts.store, "scan-9", 2<<20)
	path := claimURL(t, ts.store, "scan-9", m.Digest, clock.Now().Add(time.Hour))
	if status, _, _ := ts.call(t, "GET", path, ""); status != http.StatusOK {
		t.Fatalf("fetch before the erasure: %d", status)
	}
	if status, body, _ := ts.callAs(t, "ops", "POST", "/v1/messages/scan-9/erase", `{"reason":"request"}`); status != http.StatusOK {
		t.Fatalf("erase: %d %s", status, body)
	}
	for _, method := range []string{"GET", "HEAD"} {
		status, body, _ := ts.call(t, method, path, "")
		if status != http.StatusGone {
			t.Fatalf("%s of the claim after the erasure: %d %d bytes; want 410", method, status, len(body))
		}
		if method == "GET" {
			wantError(t, status, body, http.StatusGone, courier.CodeGone, `by "ops" (request)`)
		}
	}
	if n, _, err := ts.store.Blobs().Usage(t.Context()); err != nil || n != 0 {
		t.Errorf("%d blobs left after the erasure (%v)", n, err)
	}
}
