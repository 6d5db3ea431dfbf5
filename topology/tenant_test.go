package topology_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/topology"
)

// Without a tenants: section in the file the store holds the tenants'
// settings: written one version each with an audit entry, checked by the
// file's rules, in force on every node, their quotas with them.
func TestTenantsInTheStore(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st)
		o, created := put(t, c, courier.KindTenant, "acme", `{"weight": 3, "quotas": {"ingest_rate": "100/s", "max_queued": 10, "max_endpoints": 2}, "retention": "720h"}`)
		if !created || o.Version != 1 {
			t.Fatalf("created %v at version %d; want a new tenant at version 1", created, o.Version)
		}
		tn := c.Topology().Tenants["acme"]
		if tn == nil || tn.Weight != 3 || tn.Quotas.MaxQueued != 10 || tn.Quotas.Burst != 100 || tn.Retention != 720*time.Hour {
			t.Fatalf("the topology's tenant acme: %+v", tn)
		}
		if q := c.Topology().TenantQuotas()["acme"]; q.MaxQueued != 10 {
			t.Fatalf("the quotas the store is given: %+v", q)
		}
		// The file's rules, the file's field names.
		_, _, err := c.Put(ctx, "admin", courier.KindTenant, "beta", []byte(`{"weight": 0}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "tenants.beta.weight", "at least 1")
		_, _, err = c.Put(ctx, "admin", courier.KindTenant, "beta", []byte(`{"alerts": {"notify": ["nope"]}}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "tenants.beta.alerts.notify[0]", `"nope" is not defined`)
		_, _, err = c.Put(ctx, "admin", courier.KindTenant, "beta", []byte(`{"alerts": {"notify": ["acme/hooks"]}}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "tenants.beta.alerts.notify[0]", "tenant acme's")

		// max_endpoints is checked on change, with the store's settings.
		put(t, c, courier.KindEndpoint, "acme/a", `{"transport": "http", "url": "https://a.acme.example/"}`)
		put(t, c, courier.KindEndpoint, "acme/b", `{"transport": "http", "url": "https://b.acme.example/"}`)
		_, _, err = c.Put(ctx, "admin", courier.KindEndpoint, "acme/c", []byte(`{"transport": "http", "url": "https://c.acme.example/"}`), -1)
		wantCode(t, err, courier.CodeQuotaExceeded, "max_endpoints")

		// Alert targets: the tenant's own endpoint, plain, or a system one.
		put(t, c, courier.KindEndpoint, "system/ops", `{"transport": "http", "url": "https://ops.example/"}`)
		put(t, c, courier.KindTenant, "acme", `{"weight": 3, "alerts": {"notify": ["a", "system/ops"], "max_per_hour": 2}}`)
		if a := c.Topology().Tenants["acme"].Alerts; !slices.Equal(a.Notify, []string{"acme/a", "system/ops"}) || a.MaxPerHour != 2 {
			t.Fatalf("acme's alerts: %+v", a)
		}
		// An endpoint a tenant's alerts name is in use.
		err = c.Delete(ctx, "admin", courier.KindEndpoint, "acme/a", -1)
		wantCode(t, err, courier.CodeConflict, "tenants.acme.alerts.notify[0]")

		page, err := st.Audit(ctx, courier.AuditFilter{Object: courier.KindTenant})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Actions) != 2 || page.Actions[0].Kind != courier.ActionReplace || page.Actions[0].Who != "admin" || page.Actions[0].Tenant() != courier.SystemTenant {
			t.Fatalf("the audit of tenants: %+v", page.Actions)
		}

		// Another node takes it in.
		other := open(t, st)
		if got := other.Topology().Tenants["acme"]; got == nil || got.Weight != 3 {
			t.Fatalf("another node's tenant acme: %+v", got)
		}
	})
}

// Deleting a tenant removes its settings and every object it owns, of
// every kind, as one version with an audit entry each; default and system
// cannot be deleted, and another tenant's objects stay.
// An object of a tenant that does not exist is refused: no tenant's key
// could see it, no tenant's quotas would hold it. Written with its tenant
// in one change, it is taken.
func TestObjectOfAnUnknownTenantRefused(t *testing.T) {
	ctx := context.Background()
	c := open(t, sqlitetest.Open(t))
	_, _, err := c.Put(ctx, "admin", courier.KindEndpoint, "ghost/crm", []byte(`{"transport": "http", "url": "https://crm.ghost.example/in"}`), -1)
	wantCode(t, err, courier.CodeInvalidArgument, "endpoint ghost/crm", `tenant "ghost" does not exist`)
	if c.Topology().Endpoints["ghost/crm"] != nil || c.Version() != 0 {
		t.Fatalf("the refused endpoint was taken (version %d)", c.Version())
	}
	put(t, c, courier.KindEndpoint, "system/ap", `{"transport": "http", "url": "https://ap.example/in"}`)
	specs := map[courier.TopologyKind]map[string][]byte{
		courier.KindTenant:   {"ghost": []byte(`{}`)},
		courier.KindEndpoint: {"ghost/crm": []byte(`{"transport": "http", "url": "https://crm.ghost.example/in"}`)},
	}
	if _, err := c.Apply(ctx, "admin", specs, courier.Applying{}); err != nil {
		t.Fatalf("a tenant and its endpoint in one change: %v", err)
	}
	if c.Topology().Endpoints["ghost/crm"] == nil {
		t.Fatal("the endpoint written with its tenant is not in the topology")
	}
}

func TestDeleteTenant(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st)
		put(t, c, courier.KindKey, "root", `{"tenant": "system", "role": "admin", "hash": "sha256:`+strings.Repeat("f", 64)+`"}`)
		put(t, c, courier.KindTenant, "acme", `{"weight": 2}`)
		put(t, c, courier.KindTenant, "beta", `{}`)
		for _, tenant := range []string{"acme", "beta"} {
			put(t, c, courier.KindEndpoint, tenant+"/crm", `{"transport": "http", "url": "https://crm.example/"}`)
			put(t, c, courier.KindRoute, tenant+"/orders", `{"endpoints": ["crm"]}`)
			put(t, c, courier.KindPolicy, tenant+"/default", `{"max_attempts": 3}`)
			put(t, c, courier.KindSubscription, tenant+"/s", `{"types": ["order.*"], "route": "orders"}`)
			put(t, c, courier.KindKey, tenant+"/app", fmt.Sprintf(`{"role": "sender", "hash": "sha256:%s"}`, strings.Repeat(tenant[:1], 64)))
		}
		before := c.Version()
		changes, err := c.DeleteTenant(ctx, "ops", "acme")
		if err != nil {
			t.Fatal(err)
		}
		if c.Version() != before+1 {
			t.Fatalf("the delete moved the version from %d to %d; want one version", before, c.Version())
		}
		var got []string
		for _, a := range changes {
			if a.Kind != courier.ActionDelete || a.Who != "ops" || a.Version != before+1 {
				t.Errorf("change %+v: want a delete by ops at version %d", a, before+1)
			}
			got = append(got, string(a.Object)+" "+a.Subject)
		}
		want := []string{"endpoint acme/crm", "key acme/app", "policy acme/default", "route acme/orders", "subscription acme/s", "tenant acme"}
		if !slices.Equal(got, want) {
			t.Fatalf("changes %q, want %q", got, want)
		}
		top := c.Topology()
		if top.Tenants["acme"] != nil || top.Endpoints["acme/crm"] != nil || top.Routes["acme/orders"] != nil || top.Subscriptions["acme/s"] != nil {
			t.Fatalf("acme is left in the topology: %v %v %v", top.Tenants, top.Endpoints, top.Routes)
		}
		for _, k := range c.Keys() {
			if k.Name == "acme/app" {
				t.Fatal("acme's key is left")
			}
		}
		if top.Tenants["beta"] == nil || top.Routes["beta/orders"] == nil || top.Endpoints["beta/crm"] == nil {
			t.Fatal("beta's objects went with acme")
		}
		page, err := st.Audit(ctx, courier.AuditFilter{Who: "ops"})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Actions) != len(want) {
			t.Fatalf("%d audit entries by ops, want %d", len(page.Actions), len(want))
		}
		if other := open(t, st); other.Topology().Routes["acme/orders"] != nil || other.Topology().Tenants["acme"] != nil {
			t.Fatal("another node still has acme")
		}

		_, err = c.DeleteTenant(ctx, "ops", "acme")
		wantCode(t, err, courier.CodeNotFound, "no such tenant")
		for _, name := range []string{courier.DefaultTenant, courier.SystemTenant} {
			_, err = c.DeleteTenant(ctx, "ops", name)
			wantCode(t, err, courier.CodeConflict, "cannot be deleted")
		}
		// Their settings may be written.
		put(t, c, courier.KindTenant, courier.SystemTenant, `{"weight": 4}`)
		if c.Topology().Tenant(courier.SystemTenant).Weight != 4 {
			t.Fatal("the system tenant's weight was not written")
		}
	})
}

// With a tenants: section in the file the file holds the tenants: writing
// or deleting one through the keeper is refused, naming the file.
func TestTenantsInTheFileRefuseWrites(t *testing.T) {
	st := sqlitetest.Open(t)
	c, err := topology.Open(context.Background(), topology.Options{Store: st, TenantsFile: "/etc/courier.yaml",
		Tenants: map[string]*courier.Tenant{"acme": {Name: "acme", Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = c.Put(context.Background(), "admin", courier.KindTenant, "beta", []byte(`{"weight": 2}`), -1)
	wantCode(t, err, courier.CodeConflict, "/etc/courier.yaml")
	_, err = c.DeleteTenant(context.Background(), "admin", "acme")
	wantCode(t, err, courier.CodeConflict, "/etc/courier.yaml")
	if c.Topology().Tenants["beta"] != nil {
		t.Fatal("a tenant was written beside the file's")
	}
}

// While the file holds the tenants the store's are not in force; a reload
// of a file without a tenants: section hands them to the store.
func TestReloadHandsTheTenantsToTheStore(t *testing.T) {
	st := sqlitetest.Open(t)
	put(t, open(t, st), courier.KindTenant, "beta", `{"weight": 4}`)
	c, err := topology.Open(context.Background(), topology.Options{Store: st, TenantsFile: "courier.yaml",
		Tenants: map[string]*courier.Tenant{"acme": {Name: "acme", Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if top := c.Topology(); top.Tenants["acme"] == nil || top.Tenants["beta"] != nil {
		t.Fatalf("with the file's tenants in force: %v", top.Tenants)
	}
	c.SetTenants(nil)
	if top := c.Topology(); top.Tenants["acme"] != nil || top.Tenants["beta"] == nil || top.Tenants["beta"].Weight != 4 {
		t.Fatalf("after a reload without tenants: %v; want the store's beta", top.Tenants)
	}
	if c.TenantsFile() != "" {
		t.Errorf("the tenants are still said to be in %s", c.TenantsFile())
	}
	put(t, c, courier.KindTenant, "gamma", `{}`)
}
