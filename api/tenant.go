package api

import (
	"context"
	"net/http"
	"strings"

	courier "github.com/courier-gw/courier"
)

// Tenants in the API (docs/design.md §20).
//
// Every request acts in one tenant. A tenant's key acts in its own; a key
// of the system tenant, and any caller of a server without keys, acts in
// the default tenant, or in any other it names by the path prefix
// /v1/tenants/{tenant}/ before an API path (/v1/tenants/acme/routes/orders
// is /v1/routes/orders of acme). A tenant's key may name its own tenant so
// too; naming another answers 404, as a tenant that does not exist.
//
// A handler qualifies each name and id the request gives (scope.name,
// scope.id, scope.key) and shows each the answer holds as the tenant knows
// it (scope.showName, scope.showID): so a tenant reaches only its own
// objects and messages by construction, and lists are filtered by tenant.

// tenantsPrefix begins the paths that name the tenant they act in.
const tenantsPrefix = "/v1/tenants/"

type scopeContext struct{}

// scope is the tenant a request acts in, and whether its caller may act in
// every tenant.
type scope struct {
	tenant string
	system bool
}

// scopeOf returns the scope of a request (the default tenant, acting for
// all, for a request made without ServeHTTP, as in a handler's unit test).
func scopeOf(r *http.Request) scope { return scopeIn(r.Context()) }

func scopeIn(ctx context.Context) scope {
	if sc, ok := ctx.Value(scopeContext{}).(scope); ok {
		return sc
	}
	return scope{tenant: courier.DefaultTenant, system: true}
}

func withScope(r *http.Request, sc scope) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), scopeContext{}, sc))
}

// keyScope is the scope of a request made with key k (nil: a server
// without keys) before its path names a tenant.
func keyScope(k *Key) scope {
	switch {
	case k == nil:
		return scope{tenant: courier.DefaultTenant, system: true}
	case k.Tenant == courier.SystemTenant:
		return scope{tenant: courier.DefaultTenant, system: true}
	case k.Tenant == "":
		return scope{tenant: courier.DefaultTenant}
	}
	return scope{tenant: k.Tenant}
}

// tenantPath splits a path that names its tenant (/v1/tenants/acme/routes)
// into the tenant and the API path it stands for (/v1/routes). ok is false
// for any other path, /v1/tenants/acme itself included.
func tenantPath(path string) (tenant, rest string, ok bool) {
	after, found := strings.CutPrefix(path, tenantsPrefix)
	if !found {
		return "", "", false
	}
	tenant, rest, found = strings.Cut(after, "/")
	if !found || tenant == "" || rest == "" {
		return "", "", false
	}
	return tenant, "/v1/" + rest, true
}

// enter returns the scope of a request to a path that names tenant, or
// CodeNotFound when the caller may not act there or it does not exist.
func (s *Server) enter(sc scope, tenant string) (scope, error) {
	t := s.topology.Load()
	exists := tenant == courier.DefaultTenant || tenant == courier.SystemTenant || t.Tenants[tenant] != nil
	if !exists || !sc.system && tenant != sc.tenant {
		return sc, courier.Errorf(courier.CodeNotFound, "no such tenant: %q", tenant)
	}
	sc.tenant = tenant
	return sc, nil
}

// name qualifies a name the request gives. A name that names its tenant
// already (system/peppol-ap, a shared endpoint) is left as it is: whether
// it may be used there is the caller's check (usable).
func (sc scope) name(n string) string {
	if strings.Contains(n, "/") {
		return n
	}
	return courier.Qualify(sc.tenant, n)
}

// names qualifies each of names.
func (sc scope) names(names []string) []string {
	if len(names) == 0 {
		return names
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = sc.name(n)
	}
	return out
}

// id qualifies a message id the request gives.
func (sc scope) id(id string) string { return courier.QualifyID(sc.tenant, id) }

// key qualifies the Key of a message or delivery: its id and subscription.
func (sc scope) key(id, subscription string) string {
	if subscription == "" {
		return sc.id(id)
	}
	return courier.DeliveryKey(sc.id(id), sc.name(subscription))
}

// owns reports whether a qualified name is the scope's tenant's.
func (sc scope) owns(qualified string) bool { return courier.TenantOf(qualified) == sc.tenant }

// ownsID reports whether a stored id or key is the scope's tenant's.
func (sc scope) ownsID(stored string) bool { return courier.TenantOfID(stored) == sc.tenant }

// usable reports whether the scope's tenant may use the object of a
// qualified name: its own, or the system tenant's shared endpoints.
func (sc scope) usable(qualified string) bool {
	t := courier.TenantOf(qualified)
	return t == sc.tenant || t == courier.SystemTenant
}

// showName shows a qualified name as the tenant knows it: its own without
// the prefix, another's (a shared endpoint) with it.
func (sc scope) showName(qualified string) string {
	if t, n := courier.SplitName(qualified); t == sc.tenant {
		return n
	}
	return qualified
}

// showNames shows each of names.
func (sc scope) showNames(names []string) []string {
	if len(names) == 0 {
		return names
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = sc.showName(n)
	}
	return out
}

// showID shows a stored id as the tenant knows it.
func (sc scope) showID(stored string) string {
	if t, id := courier.SplitID(stored); t == sc.tenant {
		return id
	}
	return stored
}

// withPath returns the request for the API path that a path naming its
// tenant stands for.
func withPath(r *http.Request, path string) *http.Request {
	u := *r.URL
	u.Path = path
	if _, raw, ok := tenantPath(r.URL.RawPath); ok {
		u.RawPath = raw
	} else {
		u.RawPath = ""
	}
	r2 := new(http.Request)
	*r2 = *r
	r2.URL = &u
	return r2
}

// showKey shows a stored Key (a message's id, or a delivery's id and
// subscription) as the tenant knows it.
func (sc scope) showKey(stored string) string {
	id, sub := courier.ParseKey(stored)
	return courier.DeliveryKey(sc.showID(id), sc.showName(sub))
}
