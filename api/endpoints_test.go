package api_test

import (
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

func TestEndpoints(t *testing.T) {
	woken := 0
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology.Endpoints = map[string]*courier.Endpoint{
			"acme-primary": {Name: "acme-primary", Transport: courier.TransportHTTP, Timeout: 30 * time.Second, MaxConcurrency: 4,
				Settings: &httptransport.Settings{URL: "https://erp:s3cret@erp.acme.example/inbox?token=t0ken&tenant=acme", Secrets: []string{"whsec_c2VjcmV0"}}},
			"globex": {Name: "globex", Transport: courier.TransportHTTP, Timeout: time.Second, MaxConcurrency: 16, AutoConcurrency: true,
				Settings: &httptransport.Settings{URL: "http://127.0.0.1:9/in"}},
		}
		o.DueFunc = func([]string) { woken++ }
		o.ActivityFunc = func(name string) courier.EndpointActivity {
			if name == "acme-primary" {
				return courier.EndpointActivity{InFlight: 3, LastHour: map[string]int{"delivered": 5, "http_5xx": 1}}
			}
			return courier.EndpointActivity{ConcurrencyLimit: 11}
		}
	})
	for i := 0; i < 2; i++ {
		if status, body, _ := ts.call(t, "PUT", fmt.Sprintf("/v1/messages/q-%d", i), invoiceBody); status != 201 {
			t.Fatalf("%d %s", status, body)
		}
	}
	status, body, _ := ts.call(t, "GET", "/v1/endpoints", "")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if strings.Contains(string(body), "s3cret") || strings.Contains(string(body), "whsec") || strings.Contains(string(body), "t0ken") {
		t.Fatalf("the endpoint list shows a secret: %s", body)
	}
	list := decode[api.EndpointList](t, body)
	if len(list.Endpoints) != 2 || list.Endpoints[0].Name != "acme-primary" || list.Endpoints[0].State != courier.HealthActive ||
		list.Endpoints[0].MaxConcurrency != 4 || !strings.Contains(list.Endpoints[0].Target, "erp.acme.example") {
		t.Fatalf("endpoints: %s", body)
	}
	if e := list.Endpoints[0]; e.Queued != 2 || e.InFlight != 3 || e.LastHour["delivered"] != 5 || e.LastHour["http_5xx"] != 1 {
		t.Errorf("acme-primary's queue and activity: queued %d, in flight %d, last hour %v", e.Queued, e.InFlight, e.LastHour)
	}
	if e := list.Endpoints[1]; e.Queued != 0 || e.LastHour == nil {
		t.Errorf("globex's queue and activity: %+v", e)
	}
	if e := list.Endpoints[0]; e.ConcurrencyAuto || e.ConcurrencyLimit != 4 {
		t.Errorf("acme-primary's concurrency: auto %v, limit %d; want the fixed 4", e.ConcurrencyAuto, e.ConcurrencyLimit)
	}
	if e := list.Endpoints[1]; !e.ConcurrencyAuto || e.ConcurrencyLimit != 11 || e.MaxConcurrency != 16 {
		t.Errorf("globex's concurrency: auto %v, limit %d, max %d; want auto at 11 of 16", e.ConcurrencyAuto, e.ConcurrencyLimit, e.MaxConcurrency)
	}

	status, body, _ = ts.call(t, "POST", "/v1/endpoints/globex/off", "")
	if e := decode[api.Endpoint](t, body); status != 200 || e.State != courier.HealthOff {
		t.Fatalf("off: %d %s", status, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/endpoints/globex", "")
	e := decode[api.Endpoint](t, body)
	if status != 200 || e.State != courier.HealthOff || len(e.Actions) != 1 || e.Actions[0].Kind != courier.ActionEndpointOff || e.Actions[0].Who != "local" {
		t.Fatalf("show after off: %d %s", status, body)
	}
	before := woken
	status, body, _ = ts.call(t, "POST", "/v1/endpoints/globex/on", "")
	if e := decode[api.Endpoint](t, body); status != 200 || e.State != courier.HealthActive || woken != before+1 || e.LastHour == nil {
		t.Fatalf("on: %d %s (engine woken %d times)", status, body, woken)
	}
	for _, path := range []string{"/v1/endpoints/nope", "/v1/endpoints/nope/off"} {
		method := "GET"
		if strings.HasSuffix(path, "/off") {
			method = "POST"
		}
		status, body, _ := ts.call(t, method, path, "")
		wantError(t, status, body, 404, courier.CodeNotFound, "nope")
	}
}
