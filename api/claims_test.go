package api_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	filetransport "github.com/courier-gw/courier/transport/file"
	httptransport "github.com/courier-gw/courier/transport/http"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/storetest"
)

// ingestBlob stores a message whose payload of n bytes is a blob, as the
// ingest API stores one, and returns it with its payload.
func ingestBlob(t *testing.T, store courier.Store, id string, n int) (*courier.Message, []byte) {
	t.Helper()
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i*31) ^ byte(i>>11)
	}
	m := &courier.Message{ID: id, Type: "scan", Route: "acme", ContentType: "application/pdf"}
	storetest.IngestSpooled(t, store, m, payload)
	return m, payload
}

// claimURL is the path and query of a claim-check URL of m for endpoint
// acme, as the engine makes it, expiring at expires.
func claimURL(t *testing.T, store courier.Store, key, digest string, expires time.Time) string {
	t.Helper()
	secret, err := store.Secret(context.Background(), courier.ClaimSecretName)
	if err != nil {
		t.Fatal(err)
	}
	return courier.ClaimURL("", secret, courier.ClaimTicket{Key: key, Endpoint: "acme", Digest: digest, Expires: expires})
}

func TestClaimFetch(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, func(o *api.Options) { o.Keys, o.Clock = testKeys(t), clock })
	m, payload := ingestBlob(t, ts.store, "scan-1", 2<<20+12345)
	path := claimURL(t, ts.store, "scan-1", m.Digest, clock.Now().Add(time.Hour))

	// No key: the URL is the authority.
	status, body, h := ts.call(t, "GET", path, "")
	if status != http.StatusOK || !bytes.Equal(body, payload) {
		t.Fatalf("fetch: %d with %d bytes, want 200 with the payload's %d", status, len(body), len(payload))
	}
	sum := sha256.Sum256(payload)
	if got, want := h.Get("Courier-Content-SHA256"), hex.EncodeToString(sum[:]); got != want {
		t.Errorf("Courier-Content-SHA256 %q, want %q", got, want)
	}
	if got, want := h.Get("Repr-Digest"), "sha-256=:"+base64.StdEncoding.EncodeToString(sum[:])+":"; got != want {
		t.Errorf("Repr-Digest %q, want %q", got, want)
	}
	if h.Get("Content-Type") != "application/pdf" || h.Get("Content-Length") != strconv.Itoa(len(payload)) || h.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", h)
	}

	// The fetch is on the message's record.
	storetest.WaitActions(t, ts.store, "scan-1", 1)
	status, body, _ = ts.callAs(t, "ops", "GET", "/v1/messages/scan-1", "")
	v := decode[api.Message](t, body)
	if status != http.StatusOK || len(v.Actions) != 1 || v.Actions[0].Kind != courier.ActionClaimFetched ||
		v.Actions[0].Who != "endpoint:acme" || !strings.HasPrefix(v.Actions[0].Detail, strconv.Itoa(len(payload))+" bytes to ") {
		t.Errorf("message view %d: actions %+v, want the fetch", status, v.Actions)
	}

	// HEAD tells what a fetch would get, and is no fetch.
	req, _ := http.NewRequest("HEAD", ts.URL+path, nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(payload)) {
		t.Errorf("HEAD: %d, length %d", resp.StatusCode, resp.ContentLength)
	}
	if actions, _ := ts.store.Actions(context.Background(), "scan-1"); len(actions) != 1 {
		t.Errorf("%d actions after a HEAD, want the one fetch", len(actions))
	}
}

// A URL that is changed, incomplete, made with another key or expired
// grants nothing: 403 before anything is looked up. A valid one for a
// message that is gone, or has other content now, is 404.
func TestClaimRefused(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, func(o *api.Options) { o.Keys, o.Clock = testKeys(t), clock })
	m, _ := ingestBlob(t, ts.store, "scan-1", courier.InlineMax+1)
	good := claimURL(t, ts.store, "scan-1", m.Digest, clock.Now().Add(time.Hour))
	sig := good[strings.LastIndex(good, "sig=")+4:]
	otherKey := courier.ClaimURL("", bytes.Repeat([]byte{1}, 32), courier.ClaimTicket{Key: "scan-1", Endpoint: "acme", Digest: m.Digest, Expires: clock.Now().Add(time.Hour)})
	tampered := []byte(sig)
	tampered[3] ^= 1
	tests := []struct {
		name, path string
		status     int
		code       courier.Code
		want       string
	}{
		{"changed signature", strings.Replace(good, sig, string(tampered), 1), 403, courier.CodePermissionDenied, "does not match"},
		{"other endpoint", strings.Replace(good, "endpoint=acme", "endpoint=globex", 1), 403, courier.CodePermissionDenied, "does not match"},
		{"other message", strings.Replace(good, "/scan-1?", "/scan-2?", 1), 403, courier.CodePermissionDenied, "does not match"},
		{"later expiry", strings.Replace(good, "expires=", "expires=1", 1), 403, courier.CodePermissionDenied, "does not match"},
		{"other key", otherKey, 403, courier.CodePermissionDenied, "does not match"},
		{"no signature", good[:strings.LastIndex(good, "&sig=")], 403, courier.CodePermissionDenied, "not a claim-check URL"},
		{"unknown parameter", good + "&download=1", 422, courier.CodeInvalidArgument, "download"},
		{"gone", claimURL(t, ts.store, "scan-0", m.Digest, clock.Now().Add(time.Hour)), 404, courier.CodeNotFound, "scan-0 is gone"},
		{"other content", claimURL(t, ts.store, "scan-1", strings.Repeat("0", 64), clock.Now().Add(time.Hour)), 404, courier.CodeNotFound, "no longer has the payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body, _ := ts.call(t, "GET", tt.path, "")
			wantError(t, status, body, tt.status, tt.code, tt.want)
		})
	}

	// The good URL works until it expires, and not from then on.
	if status, _, _ := ts.call(t, "GET", good, ""); status != http.StatusOK {
		t.Fatalf("the good URL: %d", status)
	}
	storetest.WaitActions(t, ts.store, "scan-1", 1)
	clock.Advance(time.Hour)
	status, body, _ := ts.call(t, "GET", good, "")
	wantError(t, status, body, 403, courier.CodePermissionDenied, "expired at 2026-11-25T13:00:00Z")
	if actions, _ := ts.store.Actions(context.Background(), "scan-1"); len(actions) != 1 {
		t.Errorf("%d fetches recorded, want the one that was served", len(actions))
	}
}

// A delivery of a published message has a URL of its own, and an inline
// payload may be claimed as well as a blob.
func TestClaimDeliveryPath(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	ts := newTestServer(t, func(o *api.Options) { o.Clock = clock })
	m := &courier.Message{ID: "ev-1", Type: "order.created", Route: "acme", Subscription: "erp", Payload: []byte(`{"n":1}`), ContentType: "application/json"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := ts.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	path := claimURL(t, ts.store, "ev-1/erp", m.PayloadSHA256(), clock.Now().Add(time.Minute))
	if !strings.HasPrefix(path, "/v1/claims/ev-1/erp?") {
		t.Fatalf("path %s", path)
	}
	resp, err := http.Get(ts.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != `{"n":1}` || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("fetch of a delivery: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	if actions := storetest.WaitActions(t, ts.store, "ev-1/erp", 1); len(actions) != 1 || actions[0].Kind != courier.ActionClaimFetched {
		t.Errorf("actions of the delivery %+v", actions)
	}
}

// GET /v1/routes shows an endpoint's claim check as configured.
func TestClaimCheckInEndpointView(t *testing.T) {
	t.Parallel()
	top := testTopology()
	top.Endpoints = map[string]*courier.Endpoint{
		"acme-primary": {Name: "acme-primary", Transport: courier.TransportHTTP, Timeout: time.Second, MaxConcurrency: 1,
			Settings:   &httptransport.Settings{URL: "https://acme.example/in"},
			ClaimCheck: &courier.ClaimCheck{Above: 1 << 20, TTL: time.Hour}},
		"globex": {Name: "globex", Transport: courier.TransportFile, Timeout: time.Second, MaxConcurrency: 1, Settings: &filetransport.Settings{Dir: "out"}},
	}
	ts := newTestServer(t, func(o *api.Options) { o.Topology = top })
	status, body, _ := ts.call(t, "GET", "/v1/routes", "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/routes: %d %s", status, body)
	}
	c := decode[api.Config](t, body)
	want := map[string]*api.ClaimCheckConfig{"acme-primary": {Above: 1 << 20, TTL: "1h0m0s"}, "globex": nil}
	for _, e := range c.Endpoints {
		if got := e.ClaimCheck; (got == nil) != (want[e.Name] == nil) || got != nil && *got != *want[e.Name] {
			t.Errorf("%s: claim_check %+v, want %+v", e.Name, got, want[e.Name])
		}
	}
}
