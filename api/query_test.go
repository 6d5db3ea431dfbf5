package api_test

import (
	"context"
	"net/http"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// unknownRegistry knows no recipient.
type unknownRegistry struct{}

func (unknownRegistry) Resolve(context.Context, *courier.Route, string, string) (courier.Resolution, error) {
	return courier.Resolution{}, courier.ErrNotRegistered
}
func (unknownRegistry) Invalidate(*courier.Route, string, string) {}

// Every GET of the API reads its query whole or refuses it with the error
// body: a query that cannot be read (a malformed escape, which
// Request.URL.Query drops without a word) is 400, a parameter the endpoint
// does not take, one given twice or a value it cannot use is 422. None is
// answered as if the query had not been there.
func TestQueryStrings(t *testing.T) {
	ts := newTestServer(t, withLookupRoute, func(o *api.Options) {
		o.Topology.Endpoints = map[string]*courier.Endpoint{"acme-primary": courier.NewEndpoint("acme-primary", courier.TransportHTTP)}
		o.Resolver = unknownRegistry{}
	})
	if status, body, _ := ts.call(t, "PUT", "/v1/messages/m-1", invoiceBody); status != http.StatusCreated {
		t.Fatalf("setup: %d %s", status, body)
	}
	endpoints := []struct {
		path   string
		good   string // a query it takes
		status int    // its answer to good
	}{
		{"/v1/messages", "state=queued&reason=&type=invoice&route=acme&endpoint=acme-primary&limit=10&created_after=2000-01-01T00:00:00Z", 200},
		{"/v1/messages/m-1", "payload=base64", 200},
		{"/v1/messages/m-1/attempts", "", 200},
		{"/v1/operations/op-1", "", 404},
		{"/v1/endpoints", "", 200},
		{"/v1/endpoints/acme-primary", "", 200},
		{"/v1/lookup", "route=nemhandel&recipient=0088:1&type=invoice", 200},
		{"/v1/receivers", "", 200},
		{"/v1/stats", "", 200},
		{"/v1/routes", "", 200},
	}
	// What every endpoint refuses, whatever parameters it takes.
	refusedByAll := []struct {
		query  string
		status int
		in     string
	}{
		{"cursor=%%%", 400, `invalid URL escape "%%%"`},
		{"reason=%zz", 400, `invalid URL escape "%zz"`},
		{"%zz=queued", 400, `invalid URL escape "%zz"`},
		{"limit=1;state=queued", 400, "semicolon"},
		{"colour=red", 422, `unknown query parameter "colour"`},
		{"=x", 422, `unknown query parameter ""`},
	}
	// What an endpoint refuses of the parameters it takes.
	refused := []struct {
		path, query string
		status      int
		in          string
	}{
		{"/v1/messages", "state=bogus", 422, `state "bogus"`},
		{"/v1/messages", "reason=nope", 422, `reason "nope"`},
		{"/v1/messages", "limit=abc", 422, "limit"},
		{"/v1/messages", "limit=0", 422, "limit"},
		{"/v1/messages", "limit=1e3", 422, "limit"},
		{"/v1/messages", "created_before=yesterday", 422, "created_before"},
		{"/v1/messages", "cursor=zzz", 422, "cursor"},
		{"/v1/messages", "state=queued&state=suspended", 422, `"state" is given 2 times`},
		{"/v1/messages/m-1", "payload=hex", 422, "base64"},
		{"/v1/messages/m-1", "payload=base64&payload=base64", 422, `"payload" is given 2 times`},
		{"/v1/lookup", "route=nemhandel&recipient=a%20b&type=invoice", 422, "recipient"},
		{"/v1/lookup", "route=nemhandel&recipient=0088:1&type=in%20voice", 422, "type"},
		{"/v1/lookup", "route=nemhandel&recipient=0088:1&type=invoice&type=order", 422, `"type" is given 2 times`},
	}
	for _, e := range endpoints {
		t.Run(e.path, func(t *testing.T) {
			if status, body, _ := ts.call(t, "GET", e.path+"?"+e.good, ""); status != e.status {
				t.Fatalf("?%s: %d %s, want %d", e.good, status, body, e.status)
			}
			for _, q := range refusedByAll {
				status, body, _ := ts.call(t, "GET", e.path+"?"+q.query, "")
				wantError(t, status, body, q.status, courier.CodeInvalidArgument, q.in)
			}
		})
	}
	for _, r := range refused {
		t.Run(r.path+"?"+r.query, func(t *testing.T) {
			status, body, _ := ts.call(t, "GET", r.path+"?"+r.query, "")
			wantError(t, status, body, r.status, courier.CodeInvalidArgument, r.in)
		})
	}
}

// A write takes no query parameters: one is refused, not left unread, and
// nothing is stored.
func TestQueryOnWrite(t *testing.T) {
	ts := newTestServer(t)
	status, body, _ := ts.call(t, "POST", "/v1/messages?route=globex", invoiceBody)
	wantError(t, status, body, 422, courier.CodeInvalidArgument, `unknown query parameter "route"`)
	status, body, _ = ts.call(t, "PUT", "/v1/messages/m-1?%%%", invoiceBody)
	wantError(t, status, body, 400, courier.CodeInvalidArgument, "invalid URL escape")
	if status, body, _ := ts.call(t, "GET", "/v1/messages/m-1", ""); status != http.StatusNotFound {
		t.Fatalf("a refused write stored its message: %d %s", status, body)
	}
}

// The probes answer whatever the query of a load balancer says.
func TestProbesTakeAnyQuery(t *testing.T) {
	ts := newTestServer(t)
	for _, path := range []string{"/healthz?check=%%%", "/readyz?x=1&x=2"} {
		if status, body, _ := ts.call(t, "GET", path, ""); status != http.StatusOK {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
}
