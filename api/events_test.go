package api_test

import (
	"context"
	httptransport "github.com/courier-gw/courier/transport/http"
	"net/url"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// GET /v1/events lists the recorded events newest first, by event, subject
// and time, page by page, to operators.
func TestEvents(t *testing.T) {
	ts := newKeyedServer(t)
	start := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	ctx := context.Background()
	record := func(ev courier.Event) {
		t.Helper()
		if _, err := ts.store.RecordEvents(ctx, []courier.Event{ev}, time.Hour, func(ev courier.Event, _ []courier.Event) (courier.Event, []*courier.Message) {
			ev.Notified = ev.Kind != courier.EventRouteLagging
			return ev, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		at := start.Add(time.Duration(i) * time.Minute)
		before := courier.EndpointHealth{State: courier.HealthActive}
		after := courier.EndpointHealth{State: courier.HealthSuspended, SuspendedUntil: at.Add(time.Minute), Suspensions: 1, UpdatedAt: at}
		if i%2 == 1 {
			before, after = after, courier.EndpointHealth{State: courier.HealthActive, UpdatedAt: at}
		}
		ev, ok := courier.HealthEvent("acme-primary", before, after, "http_429")
		if !ok {
			t.Fatalf("no event for %v → %v", before.State, after.State)
		}
		record(ev)
	}
	record(courier.LagEvent("acme", start, start.Add(20*time.Minute)))

	list := func(query string) api.EventPage {
		t.Helper()
		status, body, _ := ts.callAs(t, "ops", "GET", "/v1/events"+query, "")
		if status != 200 {
			t.Fatalf("GET /v1/events%s: %d %s", query, status, body)
		}
		return decode[api.EventPage](t, body)
	}
	all := list("")
	if len(all.Events) != 7 || all.Next != "" || all.Events[0].Event != courier.EventRouteLagging || all.Events[0].Notified {
		t.Fatalf("all events: %+v", all)
	}
	if e := all.Events[len(all.Events)-1]; e.Event != courier.EventEndpointSuspended || e.Subject != "acme-primary" ||
		e.Kind != "endpoint" || !e.At.Equal(start) || e.Details.Reason != "http_429" || !e.Notified || e.Text == "" {
		t.Fatalf("the oldest event: %+v", e)
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"?event=endpoint.recovered", 3},
		{"?subject=acme", 1},
		{"?subject=acme-primary&event=endpoint.suspended", 3},
		{"?since=" + url.QueryEscape(start.Add(4*time.Minute).Format(time.RFC3339)), 3},
	} {
		if got := list(tc.query); len(got.Events) != tc.want {
			t.Errorf("GET /v1/events%s: %d events, want %d", tc.query, len(got.Events), tc.want)
		}
	}
	var ids []string
	next := "?limit=3"
	for next != "" {
		page := list(next)
		for _, e := range page.Events {
			ids = append(ids, e.ID)
		}
		next = ""
		if page.Next != "" {
			next = "?limit=3&cursor=" + url.QueryEscape(page.Next)
		}
	}
	if len(ids) != 7 || ids[0] != all.Events[0].ID || ids[6] != all.Events[6].ID {
		t.Fatalf("paged: %v", ids)
	}

	for _, q := range []string{"?event=endpoint.exploded", "?limit=0", "?since=yesterday", "?cursor=nope", "?who=ops"} {
		status, body, _ := ts.callAs(t, "ops", "GET", "/v1/events"+q, "")
		wantError(t, status, body, 422, courier.CodeInvalidArgument, "")
	}
	status, body, _ := ts.callAs(t, "erp", "GET", "/v1/events", "")
	wantError(t, status, body, 403, courier.CodePermissionDenied, "")

	client := api.NewClient(ts.URL, testSecrets["ops"])
	page, err := client.Events(ctx, courier.EventFilter{Subject: "acme-primary", Kind: courier.EventEndpointRecovered, Limit: 2})
	if err != nil || len(page.Events) != 2 || page.Next == "" {
		t.Fatalf("client: %+v %v", page, err)
	}
}

// An operator's switch is reported with the health before and after, and
// who switched, so that its event is recorded.
func TestSwitchReportsTheChange(t *testing.T) {
	type switched struct {
		before, after courier.HealthState
		who           string
	}
	var got []switched
	ts := newKeyedServer(t, func(o *api.Options) {
		o.Topology.Endpoints = map[string]*courier.Endpoint{"globex": {Name: "globex", Transport: courier.TransportHTTP,
			Settings: &httptransport.Settings{URL: "http://127.0.0.1:9/in"}}}
		o.HealthSwitchedFunc = func(name string, before, after courier.EndpointHealth, who string) {
			if name == "globex" {
				got = append(got, switched{before.State, after.State, who})
			}
		}
	})
	for _, verb := range []string{"off", "on"} {
		if status, body, _ := ts.callAs(t, "ops", "POST", "/v1/endpoints/globex/"+verb, ""); status != 200 {
			t.Fatalf("%s: %d %s", verb, status, body)
		}
	}
	want := []switched{{courier.HealthActive, courier.HealthOff, "ops"}, {courier.HealthOff, courier.HealthActive, "ops"}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("reported %+v, want %+v", got, want)
	}
}
