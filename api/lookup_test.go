package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/lookup"
)

// GET /v1/lookup resolves as an attempt would: the registry asked once,
// then the cache; a recipient nobody knows says so.
func TestLookupAnswer(t *testing.T) {
	asked := 0
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked++
		if r.URL.Query().Get("participant") != "0088:1" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"url": "https://ap.example/as4"}`))
	}))
	defer reg.Close()
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology.Routes["nemhandel"] = &courier.Route{Name: "nemhandel", Lookup: &courier.Lookup{URL: reg.URL + "/?participant={recipient}&doctype={type}"},
			EndpointTemplate: courier.NewEndpoint("", courier.TransportHTTP)}
		o.Resolver = lookup.New(lookup.Options{})
	})
	get := func(query string) (int, api.LookupAnswer) {
		t.Helper()
		status, body, _ := ts.call(t, "GET", "/v1/lookup?"+query, "")
		var a api.LookupAnswer
		json.Unmarshal(body, &a)
		return status, a
	}
	status, a := get("route=nemhandel&recipient=0088:1&type=invoice")
	if status != 200 || a.Cached || a.URL != "https://ap.example/as4" || a.Endpoint == nil || a.Endpoint.Name != "lookup:https://ap.example/as4" ||
		a.Endpoint.State != courier.HealthActive || !strings.Contains(a.Registry, "participant=") {
		t.Fatalf("first lookup: %d %+v", status, a)
	}
	if status, a = get("route=nemhandel&recipient=0088:1&type=invoice"); status != 200 || !a.Cached || a.CachedUntil.IsZero() || asked != 1 {
		t.Fatalf("second lookup: %d %+v, registry asked %d times", status, a, asked)
	}
	if status, a = get("route=nemhandel&recipient=0088:9&type=invoice"); status != 200 || !a.NotRegistered || a.URL != "" {
		t.Fatalf("unknown recipient: %d %+v", status, a)
	}
	for _, q := range []string{"route=acme&recipient=0088:1&type=invoice", "route=nemhandel&recipient=a%20b&type=invoice", "route=nope&recipient=x&type=t"} {
		if status, _ := get(q); status != 422 && status != 404 {
			t.Fatalf("%s: %d", q, status)
		}
	}
}
