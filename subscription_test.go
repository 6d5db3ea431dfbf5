package courier_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestValidTypePattern(t *testing.T) {
	for s, want := range map[string]bool{
		"order.created": true,
		"order.*":       true,
		"a.b.*":         true,
		"order":         true,
		"*":             false,
		".*":            false,
		"order*":        false,
		"order.*.x":     false,
		"order.**":      false,
		"":              false,
		"with space.*":  false,
	} {
		if got := courier.ValidTypePattern(s); got != want {
			t.Errorf("ValidTypePattern(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestSubscriptionMatches(t *testing.T) {
	orders := &courier.Subscription{Name: "orders", Types: []string{"order.*"}, Route: "erp"}
	tenant := &courier.Subscription{Name: "acme", Types: []string{"order.created", "invoice.sent"}, Route: "crm",
		Headers: map[string]string{"X-Tenant": "acme"}}
	for _, tt := range []struct {
		name    string
		sub     *courier.Subscription
		typ     string
		headers map[string]string
		want    bool
	}{
		{"prefix", orders, "order.created", nil, true},
		{"prefix, deeper", orders, "order.line.added", nil, true},
		{"prefix is no type of its own", orders, "order", nil, false},
		{"prefix of the name only", orders, "orders.created", nil, false},
		{"other type", orders, "invoice.sent", nil, false},
		{"exact, header matches", tenant, "order.created", map[string]string{"X-Tenant": "acme"}, true},
		{"exact, header name in another case", tenant, "invoice.sent", map[string]string{"x-tenant": "acme"}, true},
		{"exact, header value differs", tenant, "order.created", map[string]string{"X-Tenant": "Acme"}, false},
		{"exact, header missing", tenant, "order.created", nil, false},
		{"exact only", tenant, "order.updated", map[string]string{"X-Tenant": "acme"}, false},
	} {
		if got := tt.sub.Matches(tt.typ, tt.headers); got != tt.want {
			t.Errorf("%s: %s matches %q %v = %v, want %v", tt.name, tt.sub.Name, tt.typ, tt.headers, got, tt.want)
		}
	}
}

func TestSubscribersByName(t *testing.T) {
	top := &courier.Topology{Subscriptions: map[string]*courier.Subscription{
		"zeta":  {Name: "zeta", Types: []string{"order.*"}, Route: "r1"},
		"alpha": {Name: "alpha", Types: []string{"order.created"}, Route: "r2"},
		"mid":   {Name: "mid", Types: []string{"invoice.*"}, Route: "r3"},
	}}
	var names []string
	for _, s := range top.Subscribers("order.created", nil) {
		names = append(names, s.Name)
	}
	if want := []string{"alpha", "zeta"}; !slices.Equal(names, want) {
		t.Errorf("subscribers of order.created: %v, want %v", names, want)
	}
	if got := top.Subscribers("shipment.sent", nil); len(got) != 0 {
		t.Errorf("subscribers of a type nobody wants: %v", got)
	}
}

// A message without a route is published: one delivery per subscription
// that wants it, by name, each on its subscription's route, all with the
// one content hash of what the sender gave.
func TestAdmitPublishes(t *testing.T) {
	top := &courier.Topology{
		Routes: map[string]*courier.Route{"erp": {Name: "erp"}, "crm": {Name: "crm"},
			"peppol": {Name: "peppol", Lookup: &courier.Lookup{URL: "https://r.example/{recipient}"}}},
		Subscriptions: map[string]*courier.Subscription{
			"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "erp"},
			"crm-acme":   {Name: "crm-acme", Types: []string{"order.created"}, Route: "crm", Headers: map[string]string{"x-tenant": "acme"}},
			"invoices":   {Name: "invoices", Types: []string{"invoice"}, Route: "peppol"},
		},
	}
	top.Prepare()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	in := courier.Intake{NewIDFunc: func() (string, error) { return "new-1", nil }}
	publish := func(typ string, headers map[string]string) ([]*courier.Message, error) {
		return top.Admit(&courier.Message{Type: typ, Payload: []byte(`{}`), Headers: headers}, in, now)
	}

	ds, err := publish("order.created", map[string]string{"X-Tenant": "acme"})
	if err != nil || len(ds) != 2 {
		t.Fatalf("order.created from acme: %d deliveries, %v; want 2", len(ds), err)
	}
	for i, want := range []struct{ sub, route string }{{"crm-acme", "crm"}, {"erp-orders", "erp"}} {
		d := ds[i]
		if d.Subscription != want.sub || d.Route != want.route || d.ID != "new-1" || d.State != courier.StateQueued || d.Key() != "new-1/"+want.sub {
			t.Errorf("delivery %d: %s on %s (%s, %s)", i, d.Key(), d.Route, d.ID, d.State)
		}
		if d.Hash != ds[0].Hash || d.Hash == "" {
			t.Errorf("delivery %d: hash %q, want the message's", i, d.Hash)
		}
	}
	if ds, err := publish("order.created", map[string]string{"X-Tenant": "other"}); err != nil || len(ds) != 1 || ds[0].Subscription != "erp-orders" {
		t.Errorf("another tenant: %d deliveries, %v; want erp-orders only", len(ds), err)
	}
	_, err = publish("shipment.sent", nil)
	if courier.ErrorCode(err) != courier.CodeInvalidArgument || !strings.Contains(courier.ErrorMessage(err), `"shipment.sent"`) {
		t.Errorf("a type nobody wants: %v, want 422 naming the type", err)
	}
	// A subscription to a lookup route needs the recipient, as the route does.
	if _, err := publish("invoice", nil); courier.ErrorCode(err) != courier.CodeInvalidArgument || !strings.Contains(err.Error(), "recipient is required") {
		t.Errorf("invoice without recipient: %v", err)
	}
	// A message with a route is not published, whatever subscribes to its type.
	ms, err := top.Admit(&courier.Message{Type: "order.created", Route: "crm", Payload: []byte(`{}`)}, in, now)
	if err != nil || len(ms) != 1 || ms[0].Subscription != "" || ms[0].Route != "crm" {
		t.Errorf("to a route: %d messages, %v", len(ms), err)
	}
}

func TestKeysAndSummary(t *testing.T) {
	if k := courier.DeliveryKey("o-1", "erp"); k != "o-1/erp" {
		t.Errorf("key %q", k)
	}
	if id, sub := courier.ParseKey("o-1/erp"); id != "o-1" || sub != "erp" {
		t.Errorf("parsed %q %q", id, sub)
	}
	if id, sub := courier.ParseKey("inv:1"); id != "inv:1" || sub != "" {
		t.Errorf("parsed %q %q", id, sub)
	}
	d := func(states ...courier.State) []*courier.Message {
		var out []*courier.Message
		for _, s := range states {
			out = append(out, &courier.Message{State: s})
		}
		return out
	}
	for _, tt := range []struct {
		in   []*courier.Message
		want courier.State
	}{
		{d(courier.StateDelivered, courier.StateDiscarded), courier.StateDelivered},
		{d(courier.StateDelivered, courier.StateSuspended), courier.StateSuspended},
		// A suspended delivery waits for an operator: the summary says so
		// while the others are still on their way.
		{d(courier.StateInflight, courier.StateSuspended), courier.StateSuspended},
		{d(courier.StateQueued, courier.StateSuspended, courier.StateDelivered), courier.StateSuspended},
		{d(courier.StateQueued, courier.StateDelivered), courier.StateQueued},
		{d(courier.StateInflight), courier.StateQueued},
		{d(courier.StateDiscarded), courier.StateDelivered},
	} {
		if got := courier.Summary(tt.in); got != tt.want {
			t.Errorf("Summary(%v) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
