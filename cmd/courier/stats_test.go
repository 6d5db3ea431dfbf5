package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/lookup"
	"github.com/courier-gw/courier/metrics"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// TestStatsAndEndpointsList: courier stats and courier endpoints list show
// the same essentials as tables and as JSON.
func TestStatsAndEndpointsList(t *testing.T) {
	store := sqlitetest.Open(t)
	top := &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"acme": courier.NewEndpoint("acme", courier.TransportHTTP)},
		Routes:    map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}}},
	}
	httptransport.Of(top.Endpoints["acme"]).URL = "https://acme.example/in?token=secret"
	m := metrics.New(metrics.Options{Source: store, TopologyFunc: func() *courier.Topology { return top }})
	url := apiServer(t, api.Options{Store: store, Topology: top, Observer: m, StatsFunc: m.StatsFunc})

	for _, id := range []string{"a", "b"} {
		if _, _, err := runCLI(t, `{"n":1}`, "--server", url, "send", "--type", "invoice", "--route", "acme", "--id", id); err != nil {
			t.Fatal(err)
		}
	}
	// A delivery, as the engine would report it.
	m.Applied(courier.Change{From: courier.StateInflight, Message: &courier.Message{ID: "x", Type: "invoice", Route: "acme",
		State: courier.StateDelivered, CreatedAt: time.Now().Add(-time.Second), FinishedAt: time.Now()}})

	if _, _, err := runCLI(t, "", "--server", url, "stats"); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Fatalf("stats before the first count: %v, want unavailable", err)
	}
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	out, _, err := runCLI(t, "", "--server", url, "stats")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"queued     2", "suspended  0", "delivered", "ingested", "deliveries per minute"} {
		if !strings.Contains(out, want) {
			t.Errorf("courier stats does not show %q:\n%s", want, out)
		}
	}
	if !strings.Contains(lineWith(out, "delivered  "), "1") || !strings.Contains(lineWith(out, "ingested"), "2") {
		t.Errorf("courier stats: delivered 1 and ingested 2 expected:\n%s", out)
	}

	out, _, err = runCLI(t, "", "--server", url, "-o", "json", "stats")
	if err != nil {
		t.Fatal(err)
	}
	var st api.Stats
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("stats -o json: %v\n%s", err, out)
	}
	if st.States[courier.StateQueued] != 2 || st.Node == nil || st.Node.Delivered != 1 || st.Node.Ingested != 2 || st.Rates == nil {
		t.Errorf("stats -o json: %s", out)
	}

	out, _, err = runCLI(t, "", "--server", url, "endpoints", "list")
	if err != nil {
		t.Fatal(err)
	}
	row := lineWith(out, "acme")
	for _, want := range []string{"http", "active", "https://acme.example/in?token=REDACTED"} {
		if !strings.Contains(row, want) {
			t.Errorf("endpoints list row %q lacks %q", row, want)
		}
	}
	if fields := strings.Fields(row); len(fields) < 8 || fields[5] != "2" {
		t.Errorf("endpoints list row %q: want 2 queued", row)
	}
	out, _, err = runCLI(t, "", "--server", url, "-o", "json", "endpoints", "list")
	if err != nil {
		t.Fatal(err)
	}
	var eps api.EndpointList
	if err := json.Unmarshal([]byte(out), &eps); err != nil || len(eps.Endpoints) != 1 || eps.Endpoints[0].Queued != 2 {
		t.Errorf("endpoints list -o json: %v\n%s", err, out)
	}
}

// lineWith returns the first line of out that contains s.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

func TestPlural(t *testing.T) {
	tests := []struct {
		n          int
		noun, want string
	}{
		{0, "message", "0 messages"},
		{1, "message", "1 message"},
		{2, "message", "2 messages"},
		{1, "policy", "1 policy"},
		{3, "policy", "3 policies"},
		{2, "delivery", "2 deliveries"},
		{2, "key", "2 keys"},
		{1, "byte", "1 byte"},
	}
	for _, tc := range tests {
		if got := plural(tc.n, tc.noun); got != tc.want {
			t.Errorf("plural(%d, %q) = %q, want %q", tc.n, tc.noun, got, tc.want)
		}
	}
}

// TestLookupInTenant: courier lookup --tenant resolves on that tenant's
// lookup route, by its own name for it.
func TestLookupInTenant(t *testing.T) {
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"url": "https://` + r.URL.Query().Get("tenant") + `-ap.example/as4"}`))
	}))
	defer reg.Close()
	top := &courier.Topology{Routes: map[string]*courier.Route{}, Tenants: map[string]*courier.Tenant{"acme": {Name: "acme", Weight: 1}}}
	for _, name := range []string{"directory", "acme/directory"} {
		top.Routes[name] = &courier.Route{Name: name, Lookup: &courier.Lookup{URL: reg.URL + "/?tenant=" + courier.TenantOf(name) + "&p={recipient}"},
			EndpointTemplate: courier.NewEndpoint("", courier.TransportHTTP)}
	}
	url := apiServer(t, api.Options{Store: sqlitetest.Open(t), Topology: top, Resolver: lookup.New(lookup.Options{})})
	for tenant, want := range map[string]string{"": "https://default-ap.example/as4", "acme": "https://acme-ap.example/as4"} {
		out, _, err := runCLI(t, "", "--server", url, "--tenant", tenant, "-o", "json", "lookup", "0088:1", "--type", "invoice", "--route", "directory")
		if err != nil {
			t.Fatalf("lookup in %q: %v", tenant, err)
		}
		var a api.LookupAnswer
		if err := json.Unmarshal([]byte(out), &a); err != nil || a.URL != want || a.Route != "directory" {
			t.Errorf("lookup in %q: %s; want %s on route directory", tenant, out, want)
		}
	}
}
