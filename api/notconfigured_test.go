package api_test

import (
	"net/http"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// A feature this server was not given answers 501 not_configured, without
// Retry-After: trying again will not help, unlike a 503.
func TestNotConfiguredIs501(t *testing.T) {
	ts := newTestServer(t, withSubscriptions, func(o *api.Options) {
		o.Topology.Routes["nemhandel"] = &courier.Route{Name: "nemhandel", Lookup: &courier.Lookup{URL: "https://registry.example/?p={recipient}&d={type}"},
			EndpointTemplate: courier.NewEndpoint("", courier.TransportHTTP)}
	})
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339Nano)
	for _, tt := range []struct {
		method, path, body, in string
	}{
		{"POST", "/v1/messages/resubmit", `{}`, "bulk"},
		{"POST", "/v1/messages/discard", `{}`, "bulk"},
		{"POST", "/v1/subscriptions/acme-orders/replay", `{"since":"` + since + `"}`, "replays"},
		{"GET", "/v1/lookup?route=nemhandel&recipient=0088:1&type=invoice", ``, "registry"},
		{"POST", "/v1/reload", ``, "configuration file"},
		{"GET", "/v1/topology", ``, "topology objects"},
		{"GET", "/v1/policies", ``, "topology objects"},
		{"PUT", "/v1/routes/acme", `{}`, "topology objects"},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			status, body, hdr := ts.call(t, tt.method, tt.path, tt.body)
			wantError(t, status, body, http.StatusNotImplemented, courier.CodeNotConfigured, tt.in)
			if v := hdr.Get("Retry-After"); v != "" {
				t.Errorf("Retry-After: %s on a 501", v)
			}
		})
	}
}
