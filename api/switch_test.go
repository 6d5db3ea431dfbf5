package api_test

import (
	"context"
	"encoding/json"
	httptransport "github.com/courier-gw/courier/transport/http"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
	"slices"
	"strings"
	"sync"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// Endpoints are switched off and on by a filter (name prefix, transport,
// host, state), in one request: those already as asked are left out, each
// switched one gets an audit entry that names the filter, and the engine
// is told of each before the answer.
func TestSwitchByFilter(t *testing.T) {
	var mu sync.Mutex
	told := map[string]courier.HealthState{}
	var due []string
	ts := newKeyedServer(t, func(o *api.Options) {
		ep := func(name string, tr courier.Transport, target string) *courier.Endpoint {
			e := &courier.Endpoint{Name: name, Transport: tr}
			switch tr {
			case courier.TransportHTTP:
				httptransport.Of(e).URL = target
			case courier.TransportSMTP:
				smtptransport.Of(e).Addr = target
			}
			return e
		}
		o.Topology.Endpoints = map[string]*courier.Endpoint{
			"crm-eu":  ep("crm-eu", courier.TransportHTTP, "https://crm.example:8443/in"),
			"crm-us":  ep("crm-us", courier.TransportHTTP, "https://us.crm.example/in"),
			"crm-bcc": ep("crm-bcc", courier.TransportSMTP, "mail.crm.example:25"),
			"erp":     ep("erp", courier.TransportHTTP, "https://erp.example/in"),
		}
		o.Topology.Routes["crm"] = &courier.Route{Name: "crm", Endpoints: []string{"crm-eu", "crm-us"}, Strategy: courier.StrategyFailover}
		o.Topology.Prepare()
		o.HealthSwitchedFunc = func(name string, _, after courier.EndpointHealth, _ string) {
			mu.Lock()
			told[name] = after.State
			mu.Unlock()
		}
		o.DueFunc = func(routes []string) {
			mu.Lock()
			due = append(due, routes...)
			mu.Unlock()
		}
	})
	switchBy := func(verb, filter string, want int) api.SwitchResult {
		t.Helper()
		status, body, _ := ts.callAs(t, "ops", "POST", "/v1/endpoints/"+verb, `{"filter":`+filter+`}`)
		if status != want {
			t.Fatalf("%s %s: %d %s, want %d", verb, filter, status, body, want)
		}
		var res api.SwitchResult
		if want == 200 {
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatal(err)
			}
		}
		return res
	}
	states := func() map[string]courier.HealthState {
		t.Helper()
		hs, err := ts.store.Health(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]courier.HealthState{}
		for _, h := range hs {
			out[h.Endpoint] = h.State
		}
		return out
	}

	for _, tt := range []struct {
		verb, filter string
		want         []string
	}{
		{"off", `{"name_prefix":"crm-","transport":"http"}`, []string{"crm-eu", "crm-us"}},
		{"off", `{"name_prefix":"crm-"}`, []string{"crm-bcc"}}, // the others are off already
		{"on", `{"state":"off","host":"crm.example:8443"}`, []string{"crm-eu"}},
		{"on", `{"host":"MAIL.crm.example"}`, []string{"crm-bcc"}},
		{"on", `{"state":"off"}`, []string{"crm-us"}},
		{"on", `{"name_prefix":"erp"}`, []string{}}, // active with nothing counted already
	} {
		res := switchBy(tt.verb, tt.filter, 200)
		if !slices.Equal(res.Endpoints, tt.want) || res.Count != len(tt.want) {
			t.Fatalf("%s %s switched %v (count %d), want %v", tt.verb, tt.filter, res.Endpoints, res.Count, tt.want)
		}
		wantState := courier.HealthOff
		if tt.verb == "on" {
			wantState = courier.HealthActive
		}
		got := states()
		mu.Lock()
		for _, name := range tt.want {
			if got[name] != wantState || told[name] != wantState {
				t.Errorf("%s %s: %s is %s in the store, the engine was told %s; want %s", tt.verb, tt.filter, name, got[name], told[name], wantState)
			}
		}
		mu.Unlock()
	}
	if got := states(); got["erp"] == courier.HealthOff {
		t.Errorf("erp was switched off by filters that do not select it")
	}
	mu.Lock()
	if !slices.Contains(due, "crm") {
		t.Errorf("routes told due after switches on: %v, want crm among them", due)
	}
	mu.Unlock()

	// The audit names who switched and by which filter.
	status, body, _ := ts.callAs(t, "ops", "GET", "/v1/endpoints/crm-eu", "")
	if status != 200 {
		t.Fatalf("get crm-eu: %d %s", status, body)
	}
	var ep api.Endpoint
	if err := json.Unmarshal(body, &ep); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range ep.Actions {
		actions = append(actions, a.Who+" "+string(a.Kind)+" "+a.Detail)
	}
	if want := []string{"ops endpoint_off by filter name_prefix=crm- transport=http", "ops endpoint_on by filter host=crm.example:8443 state=off"}; !slices.Equal(actions, want) {
		t.Errorf("crm-eu's actions %q, want %q", actions, want)
	}

	for _, bad := range []struct{ filter, says string }{
		{`{}`, "at least one of"},
		{`{"transport":"pigeon"}`, "not a transport"},
		{`{"state":"asleep"}`, "not an endpoint state"},
	} {
		status, body, _ := ts.callAs(t, "ops", "POST", "/v1/endpoints/off", `{"filter":`+bad.filter+`}`)
		if status != 422 || !strings.Contains(string(body), bad.says) {
			t.Errorf("filter %s: %d %s; want 422 saying %q", bad.filter, status, body, bad.says)
		}
	}
	if status, _, _ := ts.callAs(t, "erp", "POST", "/v1/endpoints/off", `{"filter":{"name_prefix":"crm-"}}`); status != 403 {
		t.Errorf("an ingest key switched endpoints: %d, want 403", status)
	}
}

// Concurrent switches of many endpoints, one request each, are all made
// (they are written together) and each answers with its endpoint's state.
func TestConcurrentSwitchesAreAllMade(t *testing.T) {
	const n = 64
	ts := newKeyedServer(t, func(o *api.Options) {
		o.Topology.Endpoints = map[string]*courier.Endpoint{}
		for i := range n {
			name := "ep-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
			o.Topology.Endpoints[name] = &courier.Endpoint{Name: name, Transport: courier.TransportHTTP, Settings: &httptransport.Settings{URL: "https://x.example/in"}}
		}
	})
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := "ep-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
			status, body, _ := ts.callAs(t, "ops", "POST", "/v1/endpoints/"+name+"/off", "")
			var ep api.Endpoint
			if status != 200 || json.Unmarshal(body, &ep) != nil || ep.Name != name || ep.State != courier.HealthOff {
				errs <- name + ": " + string(body)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	hs, err := ts.store.Health(context.Background())
	if err != nil || len(hs) != n {
		t.Fatalf("%d endpoints with health, %v; want %d off", len(hs), err, n)
	}
	for _, h := range hs {
		if h.State != courier.HealthOff {
			t.Errorf("%s is %s, want off", h.Endpoint, h.State)
		}
	}
}
