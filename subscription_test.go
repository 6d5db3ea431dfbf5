package courier_test

import (
	"slices"
	"testing"

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
