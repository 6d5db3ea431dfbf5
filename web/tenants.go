package web

import (
	"net/http"
	"slices"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// tenantCookie remembers the tenant a session whose key may see several
// has chosen to act in. It names a tenant and nothing more: each request
// checks it against the tenants the key may see (tenantOf), so a cookie
// set by hand reaches nothing the key could not.
const tenantCookie = "courier_tenant"

// enterTenant finds the tenants the session's key may see, with their use,
// and the tenant the session acts in.
func (h *Handler) enterTenant(r *http.Request, s *session) error {
	list, err := h.client(s).Tenants(r.Context())
	if err != nil {
		return err
	}
	chosen := ""
	if c, err := r.Cookie(tenantCookie); err == nil {
		chosen = c.Value
	}
	s.tenants, s.tenant = list.Tenants, tenantOf(list.Tenants, chosen)
	return nil
}

// tenantOf is the tenant a session acts in, of those its key may see: a
// tenant's key sees its own alone, and acts there; a key that sees several
// (the system's, or any on a server without keys) acts in the one chosen,
// if it may see it, else in the default tenant.
func tenantOf(visible []api.TenantView, chosen string) string {
	if len(visible) == 1 {
		return visible[0].Name
	}
	if chosen != "" && slices.ContainsFunc(visible, func(v api.TenantView) bool { return v.Name == chosen }) {
		return chosen
	}
	return courier.DefaultTenant
}

// switches reports whether the session may switch tenants.
func (s *session) switches() bool { return len(s.tenants) > 1 }

// serverWide reports whether the session acts in the default tenant, where
// the operations on the server as a whole (its statistics, its receive
// locations) are answered; another tenant's are 404.
func (s *session) serverWide() bool { return s.tenant == courier.DefaultTenant }

// use is the use of the tenant the session acts in.
func (s *session) use() *api.TenantView {
	for i := range s.tenants {
		if s.tenants[i].Name == s.tenant {
			return &s.tenants[i]
		}
	}
	return nil
}

// switchTenant makes a session whose key may see several tenants act in
// another, one it may see, from the next page on.
func (h *Handler) switchTenant(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PostFormValue("tenant")
	if !s.switches() || tenantOf(s.tenants, name) != name {
		h.fail(w, r, s, courier.Errorf(courier.CodeNotFound, "no such tenant: %q", name))
		return
	}
	// Strict: the choice is this dashboard's own, sent with nothing that
	// another site starts.
	http.SetCookie(w, &http.Cookie{Name: tenantCookie, Value: name, Path: "/ui/", MaxAge: int(sessionAge.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secureCookie(r)})
	h.logger.Info("dashboard tenant switched", "key", s.who, "tenant", name)
	http.Redirect(w, r, "/ui/", http.StatusSeeOther)
}

// tenants lists the tenants the key may see, with their use against their
// quotas and whether they are throttled.
func (h *Handler) tenantsPage(w http.ResponseWriter, r *http.Request, s *session) {
	p := h.base(r, s, "Tenants", "tenants")
	p.Data = s.tenants
	h.render(w, http.StatusOK, "tenants.html", p)
}

// page starts a page of the session: who it is, its form token and the
// tenant it acts in, which is shown where there are tenants.
func (s *session) page(title, nav string) page {
	p := page{Title: title, Nav: nav, Who: s.who, CSRF: s.csrf}
	if s.switches() || !s.serverWide() {
		p.Tenant = s.tenant
	}
	if s.switches() {
		for _, v := range s.tenants {
			p.Tenants = append(p.Tenants, v.Name)
		}
	}
	return p
}
