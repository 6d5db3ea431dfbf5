package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/topology"
)

// tenantSecrets are the keys of the tenants' dashboard: the system's admin
// key, and an admin key of each tenant.
var tenantSecrets = map[string]string{
	"system-admin": "secret-of-system-admin",
	"acme-admin":   "secret-of-acme-admin",
	"beta-admin":   "secret-of-beta-admin",
}

// tenantsDashboard is a dashboard over two tenants, acme and beta, with
// objects of the same names, each marked with its tenant's name (its
// endpoint's URL, its messages' ids and payloads), so that a page that
// shows anything of the other tenant is caught by the name. acme has
// quotas; beta holds one message and was refused a second by its cap, so
// it shows throttled. The default tenant has an endpoint of its own.
func tenantsDashboard(t *testing.T) *dashboard {
	t.Helper()
	tenants := map[string]*courier.Tenant{
		"acme": {Name: "acme", Weight: 3, Quotas: courier.Quotas{MaxQueued: 10, MaxBytes: 1 << 20, MaxEndpoints: 5,
			IngestRate: courier.Rate{N: 100, Per: time.Second}, Burst: 20}},
		"beta": {Name: "beta", Weight: 1, Quotas: courier.Quotas{MaxQueued: 1}},
	}
	var keys []api.Key
	for name, tenant := range map[string]string{"system-admin": courier.SystemTenant, "acme-admin": "acme", "beta-admin": "beta"} {
		h, err := api.ParseKeyHash(api.HashSecret(tenantSecrets[name]))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, api.Key{Name: name, Tenant: tenant, Role: courier.RoleAdmin, Hash: h})
	}
	store := sqlitetest.Open(t)
	d, cat := keeperDashboard(t, store, topology.Options{Tenants: tenants},
		api.Options{Keys: keys, Bulk: engine.NewBulk(store, nil, nil, nil, nil)})
	store.SetTenantQuotas(cat.Topology().TenantQuotas())
	for _, tenant := range []string{courier.DefaultTenant, "acme", "beta"} {
		q := func(n string) string { return courier.Qualify(tenant, n) }
		mustPut(t, cat, courier.KindEndpoint, q("crm"), `{"transport":"http","url":"http://`+tenant+`-only.invalid/hook"}`)
		mustPut(t, cat, courier.KindRoute, q("orders"), `{"endpoints":["crm"]}`)
	}
	mustPut(t, cat, courier.KindEndpoint, "acme/vault", `{"transport":"http","url":"http://acme-only.invalid/vault"}`)

	ctx := context.Background()
	system := api.NewClient(d.URL, tenantSecrets["system-admin"])
	for _, m := range []struct {
		tenant, id string
	}{{"acme", "acme-inv-1"}, {"acme", "acme-inv-2"}, {"beta", "beta-inv-1"}, {courier.DefaultTenant, "default-inv-1"}} {
		if _, _, err := system.InTenant(m.tenant).Ingest(ctx, api.IngestRequest{ID: m.id, Type: "invoice", Route: "orders",
			Payload: []byte(`{"from":"` + m.tenant + `-payload"}`)}); err != nil {
			t.Fatalf("ingest %s: %v", m.id, err)
		}
	}
	if _, _, err := system.InTenant("beta").Ingest(ctx, api.IngestRequest{ID: "beta-inv-2", Type: "invoice", Route: "orders",
		Payload: []byte(`{}`)}); courier.ErrorCode(err) != courier.CodeQuotaExceeded {
		t.Fatalf("beta's second message past its cap: %v, want quota_exceeded", err)
	}
	// Something in each tenant's audit log and events.
	if _, err := api.NewClient(d.URL, tenantSecrets["acme-admin"]).SwitchEndpoint(ctx, "vault", false); err != nil {
		t.Fatal(err)
	}
	if _, err := api.NewClient(d.URL, tenantSecrets["beta-admin"]).SwitchEndpoint(ctx, "crm", false); err != nil {
		t.Fatal(err)
	}
	for _, ep := range []string{"acme/vault", "beta/crm"} {
		off, _ := courier.HealthEvent(ep, courier.EndpointHealth{}, courier.EndpointHealth{State: courier.HealthOff, UpdatedAt: time.Now()}, "switched off")
		if _, err := store.RecordEvents(ctx, []courier.Event{off}, time.Hour, func(ev courier.Event, _ []courier.Event) (courier.Event, []*courier.Message) { return ev, nil }); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// loginAs logs in with a key of the tenants' dashboard.
func (b *browser) loginAs(key string) {
	b.t.Helper()
	a := b.post("/ui/login", url.Values{"key": {tenantSecrets[key]}, "next": {"/ui/"}})
	if a.status != http.StatusSeeOther || a.location != "/ui/" {
		b.t.Fatalf("login as %s: %d %q %s", key, a.status, a.location, a.body)
	}
}

// tenantPages are the pages a tenant's key reads, each with the text its
// page shows of the tenant's own: every one answers 200 and shows nothing
// of another tenant's.
var tenantPages = []struct{ path, want string }{
	{"/ui/", "Tenant beta"},
	{"/ui/endpoints", "beta-only.invalid"},
	{"/ui/topology", "beta-only.invalid"},
	{"/ui/topology/endpoints/crm", "crm"},
	{"/ui/topology/new/routes", "route"},
	{"/ui/messages", "beta-inv-1"},
	{"/ui/messages?state=queued", "beta-inv-1"},
	{"/ui/messages?id=beta", "beta-inv-1"},
	{"/ui/messages/beta-inv-1", "beta-payload"},
	{"/ui/suspended", "Suspended"},
	{"/ui/types", "invoice"},
	{"/ui/events", "crm"},
	{"/ui/audit", "beta-admin"},
	{"/ui/tenants", "beta"},
}

// A tenant's key acts in its own tenant on every page: each answers 200,
// shows the tenant's own, and nothing of acme's (nor of the default
// tenant's, whose messages and endpoint are the server's own) even when
// its cookie names acme, and it has no switcher.
func TestTenantKeyPages(t *testing.T) {
	t.Parallel()
	d := tenantsDashboard(t)
	b := d.browser(t)
	b.loginAs("beta-admin")
	u, _ := url.Parse(d.URL + "/ui/")
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "courier_tenant", Value: "acme", Path: "/ui/"}})
	for _, p := range tenantPages {
		a := b.get(p.path)
		if a.status != http.StatusOK {
			t.Errorf("GET %s with beta's key: %d %s", p.path, a.status, a.body)
			continue
		}
		if !strings.Contains(a.body, p.want) {
			t.Errorf("GET %s with beta's key shows no %q", p.path, p.want)
		}
		for _, other := range []string{"acme", "default-inv", "default-only", "default-payload"} {
			if strings.Contains(a.body, other) {
				t.Errorf("GET %s with beta's key shows %q", p.path, other)
			}
		}
		if strings.Contains(a.body, `action="/ui/tenant"`) {
			t.Errorf("GET %s with beta's key has a tenant switcher", p.path)
		}
	}
	// beta's key may not switch, not even to its own tenant.
	if a := b.post("/ui/tenant", url.Values{"tenant": {"beta"}, "csrf": {b.csrf("/ui/")}}); a.status != http.StatusNotFound {
		t.Errorf("beta switches tenants: %d %s", a.status, a.body)
	}
}

// A system session switches only to a tenant its key may see: another is
// refused and leaves no cookie, and a cookie set by hand that names one
// is ignored (the session acts in the default tenant).
func TestSwitchTenant(t *testing.T) {
	t.Parallel()
	d := tenantsDashboard(t)
	b := d.browser(t)
	b.loginAs("system-admin")
	csrf := b.csrf("/ui/")
	for _, name := range []string{"globex", "", "acme/x"} {
		a := b.post("/ui/tenant", url.Values{"tenant": {name}, "csrf": {csrf}})
		if a.status != http.StatusNotFound || a.header.Get("Set-Cookie") != "" {
			t.Errorf("switch to %q: %d, cookie %q", name, a.status, a.header.Get("Set-Cookie"))
		}
	}
	if a := b.post("/ui/tenant", url.Values{"tenant": {"acme"}}); a.status != http.StatusForbidden {
		t.Errorf("switch without the form token: %d", a.status)
	}
	a := b.post("/ui/tenant", url.Values{"tenant": {"acme"}, "csrf": {csrf}})
	if a.status != http.StatusSeeOther || a.location != "/ui/" {
		t.Fatalf("switch to acme: %d %q %s", a.status, a.location, a.body)
	}
	c := a.header.Get("Set-Cookie")
	for _, want := range []string{"courier_tenant=acme", "Path=/ui/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(c, want) {
			t.Errorf("the tenant's cookie %q, without %s", c, want)
		}
	}
	if a := b.get("/ui/messages"); !strings.Contains(a.body, "acme-inv-1") || strings.Contains(a.body, "beta-inv") || strings.Contains(a.body, "default-inv") {
		t.Errorf("messages after switching to acme: %d %s", a.status, a.body)
	}
	u, _ := url.Parse(d.URL + "/ui/")
	b.client.Jar.SetCookies(u, []*http.Cookie{{Name: "courier_tenant", Value: "globex", Path: "/ui/"}})
	if a := b.get("/ui/messages"); !strings.Contains(a.body, "default-inv-1") || strings.Contains(a.body, "acme-inv") {
		t.Errorf("messages with a cookie naming no tenant: %d %s", a.status, a.body)
	}
}

// TestTenantsInBrowser uses the dashboard of two tenants in a real browser:
// the system's key sees the switcher and every tenant's use against its
// quotas, and switched to acme sees acme's messages and endpoints, not
// beta's; beta's key sees no switcher, and on every page only its own.
func TestTenantsInBrowser(t *testing.T) {
	d := tenantsDashboard(t)
	b := newPageBrowser(t, d.URL)

	b.open("/ui/login", "#key")
	b.follow("log in as the system", "#tenant", chromedp.SendKeys(chromedp.ID("key"), tenantSecrets["system-admin"]),
		chromedp.Submit(chromedp.ID("key")))
	b.wantText("system's overview", "h1", "Overview")
	// The default tenant's overview counts the server's messages, every
	// tenant's, and says so.
	b.wantText("system's overview", "#count-queued", "4")
	b.wantText("system's overview", "#server-wide", "every tenant's")
	if v := b.value("#tenant"); v != courier.DefaultTenant {
		t.Errorf("the tenant in force after the login: %q, want the default", v)
	}

	b.follow("open the tenants", "#tenants", chromedp.Click(chromedp.CSS(`nav a[href="/ui/tenants"]`)))
	b.wantHeadings("tenants", "#tenants", "Tenant | Weight | Queued | Bytes | Endpoints | Ingest rate | Throttled")
	b.wantCells("tenants", b.row("#tenants", "acme"), "acme", "3", "2 of 10", "*", "2 of 5", "100/s, burst 20", "no")
	b.wantCells("tenants", b.row("#tenants", "beta"), "beta", "1", "1 of 1", "*", "1", "-", "*")
	if row := strings.Join(b.row("#tenants", "beta"), " | "); !strings.Contains(row, "throttled quota:") || !strings.Contains(row, "max_queued") {
		t.Errorf("beta, refused by its cap, reads %q: want throttled by its quota", row)
	}
	b.wantCells("tenants", b.row("#tenants", "default"), "default (you act in it)", "1", "1", "*", "1", "-", "no")

	b.follow("switch to acme", "#tenant-use", chromedp.SetValue(chromedp.ID("tenant"), "acme"), chromedp.Click(chromedp.ID("switch-tenant")))
	if v := b.value("#tenant"); v != "acme" {
		t.Errorf("the tenant in force after the switch: %q, want acme", v)
	}
	b.wantText("acme's overview", "#tenant-use", "2 not finished of 10", "2 endpoints of 5", "not throttled")
	b.open("/ui/messages", "#messages")
	b.row("#messages", "acme-inv-1")
	b.row("#messages", "acme-inv-2")
	b.open("/ui/endpoints", "#ep-vault")
	b.wantText("acme's endpoints", "main", "acme-only.invalid/hook", "acme-only.invalid/vault")
	for _, path := range []string{"/ui/messages", "/ui/endpoints"} {
		b.open(path, "main h1")
		if body := b.text("main"); strings.Contains(body, "beta") || strings.Contains(body, "default-") {
			t.Errorf("%s in acme shows another tenant's: %q", path, body)
		}
	}

	b.follow("log out", "#key", chromedp.Click(chromedp.CSS(`form.who button`)))
	b.follow("log in as beta", "#tenant-in-force", chromedp.SendKeys(chromedp.ID("key"), tenantSecrets["beta-admin"]),
		chromedp.Submit(chromedp.ID("key")))
	b.wantText("beta's overview", "#tenant-in-force", "Tenant beta")
	b.wantText("beta's overview", "#tenant-use", "1 not finished of 1", "throttled quota:")
	for _, p := range tenantPages {
		b.open(p.path, "main h1")
		body := b.text("body")
		if !strings.Contains(body, p.want) {
			t.Errorf("%s with beta's key shows no %q: %q", p.path, p.want, body)
		}
		for _, other := range []string{"acme", "default-"} {
			if strings.Contains(body, other) {
				t.Errorf("%s with beta's key shows %q: %q", p.path, other, body)
			}
		}
		if n, err := chromedp.Run(b.ctx, chromedp.Evaluate[int](`document.querySelectorAll("#tenant").length`)); err != nil || n != 0 {
			t.Errorf("%s with beta's key has a tenant switcher (%d, %v)", p.path, n, err)
		}
	}
}
