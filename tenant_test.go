package courier

import (
	"testing"
	"time"
)

func TestQualifiedNames(t *testing.T) {
	for _, tc := range []struct{ tenant, name, qualified string }{
		{DefaultTenant, "orders", "orders"},
		{"", "orders", "orders"},
		{"acme", "orders", "acme/orders"},
		{SystemTenant, "peppol-ap", "system/peppol-ap"},
	} {
		q := Qualify(tc.tenant, tc.name)
		if q != tc.qualified {
			t.Errorf("Qualify(%q, %q) = %q, want %q", tc.tenant, tc.name, q, tc.qualified)
		}
		want := tc.tenant
		if want == "" {
			want = DefaultTenant
		}
		if tenant, name := SplitName(q); tenant != want || name != tc.name {
			t.Errorf("SplitName(%q) = %q, %q; want %q, %q", q, tenant, name, want, tc.name)
		}
	}
	// A workflow's steps and the notice routes are their tenant's.
	for route, tenant := range map[string]string{
		StepRoute("acme/flow", 2):    "acme",
		UndoRoute("acme/flow", 1):    "acme",
		NoticeRoute("acme/ops"):      "acme",
		NoticeRoute("ops"):           DefaultTenant,
		StepRoute("flow", 1):         DefaultTenant,
		NoticeRoute("system/shared"): SystemTenant,
	} {
		if got := TenantOf(route); got != tenant {
			t.Errorf("TenantOf(%q) = %q, want %q", route, got, tenant)
		}
	}
	if ep, ok := noticeEndpoint(NoticeRoute("acme/ops")); !ok || ep != "acme/ops" || !IsNoticeRoute(NoticeRoute("acme/ops")) {
		t.Errorf("the notice route of acme/ops names endpoint %q (%v)", ep, ok)
	}
	if IsNoticeRoute("acme/orders") || IsNoticeRoute("orders") {
		t.Error("a configured route taken for a notice route")
	}
}

func TestQualifiedIDs(t *testing.T) {
	// Ids may hold ':' and keys '/': a qualified id is never another's.
	for _, tc := range []struct{ tenant, id, stored string }{
		{DefaultTenant, "inv:1", "inv:1"},
		{"acme", "inv:1", "acme~inv:1"},
	} {
		stored := QualifyID(tc.tenant, tc.id)
		if stored != tc.stored {
			t.Errorf("QualifyID(%q, %q) = %q, want %q", tc.tenant, tc.id, stored, tc.stored)
		}
		key := DeliveryKey(stored, Qualify(tc.tenant, "crm"))
		if id, sub := ParseKey(key); id != stored || sub != Qualify(tc.tenant, "crm") {
			t.Errorf("ParseKey(%q) = %q, %q", key, id, sub)
		}
		if tenant, id := SplitID(key); tenant != tc.tenant || id != DeliveryKey(tc.id, Qualify(tc.tenant, "crm")) {
			t.Errorf("SplitID(%q) = %q, %q", key, tenant, id)
		}
	}
	if ValidID("acme~inv") || ValidName("acme/orders") || ValidType("acme/invoice") {
		t.Error("a qualified id, name or type passes as a tenant's own")
	}
}

func TestPolicyOfTenantType(t *testing.T) {
	own, dflt, acmeDflt := &Policy{Name: "acme/invoice"}, &Policy{Name: "default"}, &Policy{Name: "acme/default"}
	top := &Topology{Policies: map[string]*Policy{"acme/invoice": own, "default": dflt, "acme/default": acmeDflt}}
	if top.Policy("beta/order") == dflt {
		t.Error("a tenant's type fell back on the default tenant's policy")
	}
	for typ, want := range map[string]string{
		"acme/invoice": "acme/invoice",
		"acme/order":   "acme/default",
		"order":        "default",
		"beta/order":   "default", // the built-in one, not the default tenant's
	} {
		if got := top.Policy(typ).Name; got != want {
			t.Errorf("Policy(%q) = %q, want %q", typ, got, want)
		}
	}
}

// A tenant's sender names its own route and type; Admit qualifies them and
// the id, and never reaches another tenant's route or subscriptions.
func TestAdmitForTenant(t *testing.T) {
	top := &Topology{
		Endpoints: map[string]*Endpoint{"acme/crm": NewEndpoint("acme/crm", TransportHTTP), "beta/crm": NewEndpoint("beta/crm", TransportHTTP)},
		Routes: map[string]*Route{
			"acme/orders": {Name: "acme/orders", Endpoints: []string{"acme/crm"}, Strategy: StrategySingle},
			"beta/orders": {Name: "beta/orders", Endpoints: []string{"beta/crm"}, Strategy: StrategySingle},
		},
		Subscriptions: map[string]*Subscription{
			"acme/crm": {Name: "acme/crm", Types: []string{"acme/order.*"}, Route: "acme/orders"},
			"beta/crm": {Name: "beta/crm", Types: []string{"beta/order.*"}, Route: "beta/orders"},
		},
	}
	top.Prepare()
	now := time.Now()
	in := Intake{Tenant: "acme", NewIDFunc: func() (string, error) { return "fresh", nil }}
	msgs, err := top.Admit(&Message{ID: "inv-1", Type: "invoice", Route: "orders", Payload: []byte("{}")}, in, now)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Admit: %v, %v", msgs, err)
	}
	if m := msgs[0]; m.ID != "acme~inv-1" || m.Route != "acme/orders" || m.Type != "acme/invoice" {
		t.Errorf("admitted id %q, route %q, type %q; want them qualified for acme", m.ID, m.Route, m.Type)
	}
	msgs, err = top.Admit(&Message{Type: "order.created", Payload: []byte("{}")}, in, now)
	if err != nil || len(msgs) != 1 || msgs[0].Subscription != "acme/crm" || msgs[0].ID != "acme~fresh" {
		t.Fatalf("published for acme: %v, %v; want one delivery, to acme's subscription", msgs, err)
	}
	for _, m := range []*Message{
		{ID: "x", Type: "invoice", Route: "beta/orders"},
		{ID: "beta~x", Type: "invoice", Route: "orders"},
		{ID: "x", Type: "beta/order.created"},
	} {
		m.Payload = []byte("{}")
		if _, err := top.Admit(m, in, now); ErrorCode(err) != CodeInvalidArgument {
			t.Errorf("acme's message %+v admitted (%v); want it refused", m, err)
		}
	}
}

func TestActionTenant(t *testing.T) {
	for a, want := range map[Action]string{
		{Kind: ActionDiscard, Subject: "inv-1/crm"}:           DefaultTenant,
		{Kind: ActionDiscard, Subject: "acme~inv-1/acme/crm"}: "acme",
		{Kind: ActionEndpointOff, Subject: "acme/crm"}:        "acme",
		{Kind: ActionEndpointOff, Subject: "crm"}:             DefaultTenant,
		{Kind: ActionReplay, Subject: "beta/crm-sub"}:         "beta",
		{Kind: ActionCreate, Subject: "beta/orders"}:          "beta",
	} {
		if got := a.Tenant(); got != want {
			t.Errorf("%s on %q: tenant %q, want %q", a.Kind, a.Subject, got, want)
		}
	}
}

// A claim's path keeps a tenant's subscription one segment.
func TestClaimPathOfTenantDelivery(t *testing.T) {
	for key, want := range map[string]string{
		"inv-1":               "/v1/claims/inv-1",
		"inv-1/crm":           "/v1/claims/inv-1/crm",
		"acme~inv-1/acme/crm": "/v1/claims/acme~inv-1/acme%2Fcrm",
	} {
		if got := ClaimPath(key); got != want {
			t.Errorf("ClaimPath(%q) = %q, want %q", key, got, want)
		}
	}
}
