package api

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

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
func (sc scope) names(names []string) []string { return eachName(names, sc.name) }

// eachName returns each of names turned by f; an empty list as it is.
func eachName(names []string, f func(string) string) []string {
	if len(names) == 0 {
		return names
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = f(n)
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
func (sc scope) showNames(names []string) []string { return eachName(names, sc.showName) }

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

// The views as the tenant knows them: each name and id in them shown by
// showName and showID. For the default tenant (every server without
// tenants) they change nothing.

func (sc scope) showMessage(v *Message) {
	v.ID, v.PreviousID = sc.showID(v.ID), sc.showID(v.PreviousID)
	v.Type, v.Route, v.Subscription, v.Endpoint = sc.showName(v.Type), sc.showName(v.Route), sc.showName(v.Subscription), sc.showName(v.Endpoint)
	if v.PayloadURL != "" {
		v.PayloadURL = sc.path("/v1/messages/" + url.PathEscape(v.ID) + "/payload")
	}
	sc.showHold(v.Held)
	if v.Erased != nil {
		v.Erased.By = sc.showName(v.Erased.By)
	}
	if h := v.WaitingFor; h != nil {
		h.ID = sc.showID(h.ID)
	}
	if w := v.Workflow; w != nil {
		w.Route = sc.showName(w.Route)
		for i := range w.StepsDetail {
			s := &w.StepsDetail[i]
			s.Endpoint, s.Compensate = sc.showName(s.Endpoint), sc.showName(s.Compensate)
		}
	}
	for i := range v.Deliveries {
		d := &v.Deliveries[i]
		d.Subscription, d.Route, d.Endpoint, d.PreviousID = sc.showName(d.Subscription), sc.showName(d.Route), sc.showName(d.Endpoint), sc.showID(d.PreviousID)
		sc.showHold(d.Held)
	}
}

func (sc scope) showHold(h *Hold) {
	if h != nil {
		h.Endpoint, h.Also = sc.showName(h.Endpoint), sc.showNames(h.Also)
	}
}

func (sc scope) showAttempt(a *Attempt) {
	a.Subscription, a.Endpoint, a.Route = sc.showName(a.Subscription), sc.showName(a.Endpoint), sc.showName(a.Route)
}

func (sc scope) showOperation(op *Operation) {
	op.ID, op.Route = sc.showID(op.ID), sc.showName(op.Route)
	if r := op.Replay; r != nil {
		r.Subscription, r.Route, r.Types = sc.showName(r.Subscription), sc.showName(r.Route), sc.showNames(r.Types)
	}
}

// path returns an API path as the scope's tenant reaches it: under
// /v1/tenants/{tenant}/ for a tenant other than the default, which both
// the tenant's keys and the system's reach.
func (sc scope) path(p string) string {
	if sc.tenant == courier.DefaultTenant {
		return p
	}
	return tenantsPrefix + sc.tenant + "/" + strings.TrimPrefix(p, "/v1/")
}

// filter qualifies a filter the request gives and confines it to the
// scope's tenant.
func (sc scope) filter(f courier.MessageFilter) courier.MessageFilter {
	f.Tenant = sc.tenant
	f.Type, f.Route, f.Endpoint, f.Subscription = sc.nameIf(f.Type), sc.nameIf(f.Route), sc.nameIf(f.Endpoint), sc.nameIf(f.Subscription)
	f.Routes = sc.names(f.Routes)
	if f.IDPrefix != "" {
		f.IDPrefix = sc.id(f.IDPrefix)
	}
	if f.Sender != "" {
		f.Sender = sc.name(f.Sender)
	}
	return f
}

// nameIf qualifies a name given, leaving an empty one empty.
func (sc scope) nameIf(n string) string {
	if n == "" {
		return ""
	}
	return sc.name(n)
}

// showText shows the names and ids in an error's message as the tenant
// knows them: courier quotes every name and id it puts in a message
// ("acme/orders", "acme~inv-1"), so the tenant's prefix is taken off
// where a quoted one begins with it.
func (sc scope) showText(text string) string {
	if sc.tenant == courier.DefaultTenant {
		return text
	}
	text = strings.ReplaceAll(text, `"`+sc.tenant+"/", `"`)
	return strings.ReplaceAll(text, `"`+sc.tenant+"~", `"`)
}

func (sc scope) showEndpoint(v *Endpoint) {
	v.Name = sc.showName(v.Name)
	for i := range v.Actions {
		sc.showAction(&v.Actions[i])
	}
}

func (sc scope) showAction(a *ActionView) {
	a.Who, a.Detail = sc.showName(a.Who), sc.showText(a.Detail)
}

func (sc scope) showAudit(e *AuditEntry) {
	if (courier.Action{Kind: e.Action}).OnMessage() {
		e.Subject = sc.showKey(e.Subject)
	} else {
		e.Subject = sc.showName(e.Subject)
	}
	e.Who, e.Detail = sc.showName(e.Who), sc.showText(e.Detail)
	if e.Before != nil {
		e.Before = json.RawMessage(sc.showText(string(e.Before)))
	}
	if e.After != nil {
		e.After = json.RawMessage(sc.showText(string(e.After)))
	}
}

// defaultTenantOnly are the operations that act on the server as a whole
// (its receive locations, its metrics, its configuration file and secrets):
// the default tenant's keys and the system's use them as before, another
// tenant's are answered 404, as for a path that does not exist, so that
// nothing of another tenant can be read or changed through them.
var defaultTenantOnly = map[string]bool{
	"GET /v1/receivers":                true,
	"POST /v1/receivers/{name}/stop":   true,
	"POST /v1/receivers/{name}/start":  true,
	"GET /metrics":                     true,
	"POST /v1/reload":                  true,
	"POST /v1/topology/rotate-secrets": true,
	"POST /v1/signing-keys/rotate":     true,
	"DELETE /v1/signing-keys/{id}":     true,
}

func (s *Server) defaultTenantOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if scopeOf(r).tenant != courier.DefaultTenant {
			s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "no such path for a tenant: %s", r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TenantView is a tenant as GET /v1/tenants shows it: its settings, and
// its use against its quotas.
type TenantView struct {
	Name      string     `json:"name"`
	Weight    int        `json:"weight"`
	Quotas    QuotasView `json:"quotas"`
	Retention string     `json:"retention,omitempty"`
	// Alerts are the tenant's own alert targets, its endpoints by its own
	// names; absent when it has none.
	Alerts    *TenantAlertsView `json:"alerts,omitempty"`
	Use       TenantUse         `json:"use"`
	Endpoints int               `json:"endpoints"`
	// Throttled says that the tenant is held back now, by its quotas (a
	// refusal in the last minute) or by its fair share of scarce capacity
	// on this node; ThrottledBy says by what.
	Throttled   bool   `json:"throttled"`
	ThrottledBy string `json:"throttled_by,omitempty"`
}

// QuotasView is a tenant's quotas; an absent one does not bound.
type QuotasView struct {
	IngestRate   string `json:"ingest_rate,omitempty"`
	Burst        int    `json:"burst,omitempty"`
	MaxQueued    int    `json:"max_queued,omitempty"`
	MaxBytes     int64  `json:"max_bytes,omitempty"`
	MaxEndpoints int    `json:"max_endpoints,omitempty"`
}

// TenantAlertsView is a tenant's alert targets, as tenants.NAME.alerts
// gives them.
type TenantAlertsView struct {
	Notify     []string `json:"notify,omitempty"`
	MaxPerHour int      `json:"max_per_hour,omitempty"`
}

// TenantSpec is a tenant's settings as PUT /v1/tenants/{tenant} takes
// them: the fields of the configuration file's tenants.NAME, checked by
// the same rules.
type TenantSpec struct {
	Weight int `json:"weight"` // at least 1

	Quotas    *QuotasView       `json:"quotas,omitempty"`
	Retention string            `json:"retention,omitempty"`
	Alerts    *TenantAlertsView `json:"alerts,omitempty"`
}

// TenantUse is what a tenant holds now: its messages not yet finished
// (queued, in flight or suspended) and the bytes of their payloads.
type TenantUse struct {
	Queued int64 `json:"queued"`
	Bytes  int64 `json:"bytes"`
}

// TenantList is GET /v1/tenants.
type TenantList struct {
	Tenants []TenantView `json:"tenants"`
}

// handleTenants lists the tenants with their use: every tenant for the
// system's keys (and callers of a server without keys), a tenant's own
// for its keys.
func (s *Server) handleTenants(w http.ResponseWriter, r *http.Request) {
	views, err := s.tenantViews(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TenantList{Tenants: views})
}

// handleTenant shows one tenant: 404 for a tenant the caller may not see.
func (s *Server) handleTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	views, err := s.tenantViews(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	for _, v := range views {
		if v.Name == name {
			writeJSON(w, http.StatusOK, v)
			return
		}
	}
	s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "no such tenant: %q", name))
}

// tenantViews are the tenants the request may see, by name: the
// configured ones and the default tenant.
func (s *Server) tenantViews(r *http.Request) ([]TenantView, error) {
	sc := keyScope(keyOf(r))
	t := s.topology.Load()
	names := map[string]bool{courier.DefaultTenant: true}
	for name := range t.Tenants {
		names[name] = true
	}
	use, err := s.opts.Store.TenantUsage(r.Context())
	if err != nil {
		return nil, err
	}
	byTenant := make(map[string]courier.TenantUsage, len(use))
	for _, u := range use {
		byTenant[u.Tenant] = u
	}
	endpoints := map[string]int{}
	for name := range t.Endpoints {
		endpoints[courier.TenantOf(name)]++
	}
	var out []TenantView
	for _, name := range slices.Sorted(maps.Keys(names)) {
		if !sc.system && name != sc.tenant {
			continue
		}
		tn, u := t.Tenant(name), byTenant[name]
		q := tn.Quotas
		v := TenantView{Name: name, Weight: tn.Weight, Endpoints: endpoints[name],
			Use:    TenantUse{Queued: u.Queued, Bytes: u.Bytes},
			Quotas: QuotasView{Burst: q.Burst, MaxQueued: q.MaxQueued, MaxBytes: q.MaxBytes, MaxEndpoints: q.MaxEndpoints}}
		if !q.IngestRate.Unlimited() {
			v.Quotas.IngestRate = q.IngestRate.String()
		}
		if tn.Retention > 0 {
			v.Retention = tn.Retention.String()
		}
		if a := tn.Alerts; len(a.Notify) > 0 || a.MaxPerHour > 0 {
			v.Alerts = &TenantAlertsView{Notify: scope{tenant: name}.showNames(a.Notify), MaxPerHour: a.MaxPerHour}
		}
		v.Throttled, v.ThrottledBy = s.throttled(name)
		out = append(out, v)
	}
	return out, nil
}

// quotaMemory is how long a quota's refusal shows its tenant as throttled.
const quotaMemory = time.Minute

// refusal is a tenant's latest refusal by one of its quotas.
type refusal struct {
	at  time.Time
	why string
}

// noteRefusal remembers a refusal by a tenant's quota, to show the tenant
// as throttled, and tells the observer of it: the store's caps (their
// codes are the tenants' alone), and the ingest rate (takeTenant).
func (s *Server) noteRefusal(tenant string, err error) {
	switch courier.ErrorCode(err) {
	case courier.CodeQuotaExceeded, courier.CodeStorageQuota, courier.CodeRateLimited:
		s.refusals.Store(tenant, refusal{at: s.opts.Clock.Now(), why: courier.ErrorMessage(err)})
		if o, ok := s.opts.Observer.(QuotaObserver); ok {
			if quota := courier.RefusedBy(err); quota != "" {
				o.Refused(tenant, quota)
			}
		}
	}
}

// Throttled reports whether a tenant is held back now: what GET
// /v1/tenants shows as throttled, for the metrics.
func (s *Server) Throttled(tenant string) bool {
	held, _ := s.throttled(tenant)
	return held
}

// throttled reports whether a tenant is held back now, and by what: a
// refusal by its quotas lately, or its fair share on this node.
func (s *Server) throttled(tenant string) (bool, string) {
	if v, ok := s.refusals.Load(tenant); ok {
		if rf := v.(refusal); s.opts.Clock.Now().Sub(rf.at) < quotaMemory {
			return true, "quota: " + rf.why
		}
	}
	if s.opts.ThrottledFunc != nil {
		if held, why := s.opts.ThrottledFunc(tenant); held {
			return true, "fair share: " + why
		}
	}
	return false, ""
}

func (sc scope) showObject(o TopologyObject) TopologyObject {
	o.Name, o.UpdatedBy = sc.showName(o.Name), sc.showName(o.UpdatedBy)
	return o
}

// Changing tenants. A tenant's settings bound what it may put into courier
// and what it is given, so they are the system's to change: a key of the
// system tenant (or any caller of a server without keys) writes and
// deletes tenants. Another tenant's key is answered 404 for a tenant not
// its own, as for one that does not exist, and 403 for its own, whose
// existence it knows (GET /v1/tenants/{tenant} shows it).

// mayChangeTenant says whether the request may change tenant's settings.
func mayChangeTenant(r *http.Request, tenant string) error {
	sc := keyScope(keyOf(r))
	switch {
	case sc.system:
		return nil
	case tenant != sc.tenant:
		return courier.Errorf(courier.CodeNotFound, "no such tenant: %q", tenant)
	}
	return courier.Errorf(courier.CodePermissionDenied, "a tenant's settings are changed by a key of tenant %s", courier.SystemTenant)
}

// handlePutTenant creates or replaces a tenant's settings.
func (s *Server) handlePutTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	if err := mayChangeTenant(r, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, status, _, ok := s.putObject(w, r, courier.KindTenant, name, tenantsPrefix+url.PathEscape(name))
	if !ok {
		return
	}
	writeJSON(w, status, toObject(o))
}

// handleDeleteTenant deletes a tenant: its settings and every object it
// owns as one change of the topology, so that from the answer on nothing
// of it can be ingested or called; then it starts the bulk operation that
// erases its messages, and answers 202 with the operation. The operation
// is the system tenant's, whose keys follow it at
// /v1/tenants/system/operations/{id}: the tenant's own paths are gone.
func (s *Server) handleDeleteTenant(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("tenant")
	if err := mayChangeTenant(r, name); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.objects()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	changes, err := c.DeleteTenant(r.Context(), actor(r), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.opts.Logger.Info("tenant deleted", "tenant", name, "by", actor(r), "objects", len(changes))
	id, err := operationID("")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	system := scope{tenant: courier.SystemTenant, system: true}
	op := courier.BulkOp{ID: system.id(id), Kind: courier.ActionEraseTenant,
		Filter: courier.MessageFilter{Tenant: name}, Who: actor(r), CreatedAt: s.opts.Clock.Now()}
	if s.opts.Bulk != nil {
		// This node erases at once; without a runner the operation waits
		// for a node that has one (every server's engine resumes it).
		op, err = s.opts.Bulk.Begin(r.Context(), op)
	} else {
		op, err = s.opts.Store.StartBulk(r.Context(), op)
	}
	if err != nil {
		s.opts.Logger.Error("tenant deleted, but the erasing of its messages did not start", "tenant", name, "err", err)
		s.writeError(w, r, err)
		return
	}
	v := toOperation(op)
	system.showOperation(&v)
	w.Header().Set("Location", system.path("/v1/operations/"+url.PathEscape(v.ID)))
	writeJSON(w, http.StatusAccepted, v)
}
