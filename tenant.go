package courier

import (
	"strings"
	"time"
)

// Tenants: the parties one courier serves, each owning its topology,
// messages and keys (docs/design.md §20).
//
// A tenant's object is known inside courier by its qualified name: the
// tenant's name, '/', and the object's own name ("acme/orders"). The
// tenant default has no prefix, so a configuration without tenants, and
// everything stored before tenants existed, are the default tenant's as
// they are. Names and types never contain '/', so a qualified name is
// never mistaken for another tenant's. Every part of courier below the API
// and the configuration (the engine, the stores, health, limits, metrics)
// works on qualified names and needs to know no more of tenants than
// TenantOf tells; the API and the configuration qualify what a tenant
// names and show it its own names.
//
// A message id is the tenant's own too (two tenants may both send
// "inv-1"); ids may contain ':' and the '/' of a delivery's key, so a
// qualified id joins the tenant and the id with '~', which no id holds:
// "acme~inv-1", and its delivery's key "acme~inv-1/crm".

// The tenants every courier has.
const (
	// DefaultTenant owns every object and key that names no tenant.
	DefaultTenant = "default"
	// SystemTenant owns the endpoints that every tenant's routes may use
	// (an external network's access point): their politeness limits hold
	// for all tenants together, and their capacity is shared by weight.
	// Its keys administer tenants.
	SystemTenant = "system"
)

// nameMark joins a tenant and a name; IDMark a tenant and a message id.
const (
	nameMark = "/"
	idMark   = IDMark
)

// IDMark joins a tenant and a message id in a stored id: the ids of the
// default tenant alone lack it.
const IDMark = "~"

// Tenant is one party: its share of scarce capacity and its quotas.
type Tenant struct {
	Name string
	// Weight is the tenant's share, against the other waiting tenants', of
	// a node's claims and of a shared endpoint's capacity (default 1).
	Weight int
	Quotas Quotas
	// Retention keeps the tenant's finished messages this long (zero: the
	// server's retention).
	Retention time.Duration
	// Alerts are the tenant's own alert targets: the events of its
	// endpoints and routes are also told to them.
	Alerts TenantAlerts
}

// TenantAlerts are the endpoints that hear of the operational events whose
// subject is a tenant's (an endpoint's health, a route's lag), beside the
// server's alerts.notify, and how many events of one subject may send them
// notices within an hour (zero: DefaultAlertsPerHour).
type TenantAlerts struct {
	// Notify are qualified names of the tenant's endpoints, or of the
	// system tenant's.
	Notify     []string
	MaxPerHour int
}

// Quotas bound a tenant's use; a zero field does not bound it.
type Quotas struct {
	// IngestRate and Burst are a token bucket of accepted messages: Burst
	// tokens at most, refilled at IngestRate.
	IngestRate Rate
	Burst      int
	// MaxQueued bounds the messages not yet finished (queued, in flight or
	// suspended); MaxBytes the bytes of their payloads.
	MaxQueued int
	MaxBytes  int64
	// MaxEndpoints bounds the tenant's endpoints.
	MaxEndpoints int
}

// ValidTenant reports whether s may name a tenant: the alphabet of names.
func ValidTenant(s string) bool { return ValidName(s) }

// Qualify returns the qualified name of a tenant's object: the name
// itself for the default tenant.
func Qualify(tenant, name string) string { return qualify(tenant, name, nameMark) }

// SplitName splits a qualified name into its tenant and the tenant's own
// name for it.
func SplitName(qualified string) (tenant, name string) { return split(qualified, nameMark) }

// TenantOf returns the tenant of a qualified name: of an object, of a
// route (a workflow's steps and the notice routes included) or of a
// message type.
func TenantOf(qualified string) string {
	t, _ := SplitName(qualified)
	return t
}

// QualifyID returns the id under which a tenant's message is stored.
func QualifyID(tenant, id string) string { return qualify(tenant, id, idMark) }

// SplitID splits a stored message id (or a delivery's key) into its
// tenant and the tenant's own id (or key).
func SplitID(stored string) (tenant, id string) { return split(stored, idMark) }

// TenantOfID returns the tenant of a stored message id or delivery key.
func TenantOfID(stored string) string {
	t, _ := SplitID(stored)
	return t
}

// qualify joins a tenant and its own name (or id) for something with mark;
// the default tenant's stand alone.
func qualify(tenant, own, mark string) string {
	if tenant == DefaultTenant || tenant == "" {
		return own
	}
	return tenant + mark + own
}

// split undoes qualify.
func split(qualified, mark string) (tenant, own string) {
	if t, o, ok := strings.Cut(qualified, mark); ok {
		return t, o
	}
	return DefaultTenant, qualified
}

// Tenant returns the named tenant's settings: those configured, or the
// defaults (weight 1, no quotas) for a tenant that has none, such as the
// default tenant of a configuration without tenants.
func (t *Topology) Tenant(name string) *Tenant {
	if tn := t.Tenants[name]; tn != nil {
		return tn
	}
	return &Tenant{Name: name, Weight: 1}
}

// Tenant returns the tenant of an action's subject: a message's or
// delivery's for the actions on messages, an object's (an endpoint, a
// subscription replayed, a topology object) for the others; the system's
// for a change of a tenant's settings.
func (a Action) Tenant() string {
	if a.Object == KindTenant {
		// A tenant's settings are the system's to change, and their log
		// outlives the tenant's delete.
		return SystemTenant
	}
	if a.OnMessage() {
		return TenantOfID(a.Subject)
	}
	return TenantOf(a.Subject)
}

// OnMessage reports whether an action's subject is a message or delivery
// (by its Key), not an object.
func (a Action) OnMessage() bool {
	switch a.Kind {
	case ActionResubmit, ActionDiscard, ActionResend, ActionClaimFetched, ActionErase:
		return true
	}
	return false
}

// TenantQuotas returns the quotas of the configured tenants, by name: what
// a store is given to check (Store.SetTenantQuotas).
func (t *Topology) TenantQuotas() map[string]Quotas {
	out := make(map[string]Quotas, len(t.Tenants))
	for name, tn := range t.Tenants {
		out[name] = tn.Quotas
	}
	return out
}

// Tenant returns the tenant whose messages an operation acts on: the one
// an erasure erases, a replay's subscription's, a re-drive's route's, else
// the tenant of its id (an operator's operation is stored under its
// tenant's id).
func (op BulkOp) Tenant() string {
	switch {
	case op.Kind == ActionEraseTenant:
		return op.Filter.Tenant
	case op.Replay != nil:
		return TenantOf(op.Replay.Subscription.Name)
	case op.Redrive != nil:
		return TenantOf(op.Filter.Route)
	}
	return TenantOfID(op.ID)
}

// Erasable reports whether a tenant's data may be erased (ActionEraseTenant):
// any tenant but the default and the system, whose names are no prefix of
// anything they own.
func Erasable(tenant string) bool {
	return ValidTenant(tenant) && tenant != DefaultTenant && tenant != SystemTenant
}
