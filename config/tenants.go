package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"github.com/courier-gw/courier/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

// Tenants in the configuration (docs/design.md §20). The section tenants:
// gives tenants their weights and quotas; every entry of endpoints:,
// routes:, policies:, subscriptions: and keys: belongs to a tenant, named
// by its tenant: field or by its key written qualified (acme/orders), and
// is stored under its qualified name. The names an entry uses are its own
// tenant's, written plain; a qualified one may name only an endpoint of
// the tenant system. The decoder keeps the tenant of the entry it reads,
// and qualify and use qualify through it.

var (
	tenantFields       = []string{"weight", "quotas", "retention", "alerts"}
	quotaFields        = []string{"ingest_rate", "burst", "max_queued", "max_bytes", "max_endpoints"}
	tenantAlertsFields = []string{"notify", "max_per_hour"}
)

// tenants reads the tenants: section into t.Tenants, which stays nil for
// a file without it. The endpoints the tenants' alerts name are added to
// refs.
func (d *decoder) tenants(n *yaml.Node, t *courier.Topology, refs *[]ref) {
	entries := d.entries(n, "tenants")
	if entries == nil {
		return
	}
	t.Tenants = map[string]*courier.Tenant{}
	for _, p := range entries {
		t.Tenants[p.key] = d.tenantEntry(p, refs)
	}
}

// tenantEntry reads one tenant's settings: an entry of tenants:, or the spec
// of a tenant held in the store (DecodeObject).
func (d *decoder) tenantEntry(p pair, refs *[]ref) *courier.Tenant {
	path := "tenants." + p.key
	if !courier.ValidTenant(p.key) {
		d.errorf(p.line, path, "%q is not a valid tenant name: use 1 to %d letters, digits, '.', '_' or '-'", check.Clip(p.key), courier.MaxNameLen)
	}
	o := d.object(p.value, path, p.line, tenantFields)
	tn := &courier.Tenant{Name: p.key, Weight: 1}
	if l := o.integer("weight", &tn.Weight); l > 0 && tn.Weight < 1 {
		d.errorf(l, o.field("weight"), "must be at least 1")
	}
	if q := o.sub("quotas", quotaFields); q != nil {
		if l := d.quotas(q, &tn.Quotas); l > 0 {
			if d.capLines == nil {
				d.capLines = map[string]int{}
			}
			d.capLines[p.key] = l
		}
	}
	if l := o.duration("retention", &tn.Retention); l > 0 && tn.Retention <= 0 {
		d.errorf(l, o.field("retention"), "must be greater than 0")
	}
	if a := o.sub("alerts", tenantAlertsFields); a != nil {
		d.tenantAlerts(a, tn, refs)
	}
	return tn
}

// tenantAlerts reads a tenant's alert targets: its own endpoints, written
// plain, or the system tenant's, written qualified; they must take notices
// (smtp or http), as the server's alerts.notify must.
func (d *decoder) tenantAlerts(a *object, tn *courier.Tenant, refs *[]ref) {
	d.tenant = tn.Name
	defer d.leave()
	if items, ok := a.list("notify"); ok {
		for _, it := range items {
			name := d.qualify(it.value)
			if slices.Contains(tn.Alerts.Notify, name) {
				d.errorf(it.line, it.field, "endpoint %q is listed twice", check.Clip(it.value))
				continue
			}
			tn.Alerts.Notify = append(tn.Alerts.Notify, d.use(refs, ref{line: it.line, field: it.field, kind: "endpoint", name: it.value, notice: true}))
		}
	}
	if l := a.integer("max_per_hour", &tn.Alerts.MaxPerHour); l > 0 && tn.Alerts.MaxPerHour < 1 {
		d.errorf(l, a.field("max_per_hour"), "must be at least 1")
	}
}

// quotas reads a tenant's quotas; each bounds when given, and must then
// be at least 1. A burst without ingest_rate bounds nothing, and an
// ingest_rate without burst lets one period's messages come at once.
//
// It returns the line of max_endpoints, 0 when not given.
func (d *decoder) quotas(o *object, q *courier.Quotas) int {
	o.parsed("ingest_rate", func(s string) (err error) {
		q.IngestRate, err = parseRate(s)
		return err
	})
	atLeastOne := func(name string, l int, v int64) {
		if l > 0 && v < 1 {
			d.errorf(l, o.field(name), "must be at least 1")
		}
	}
	l := o.integer("burst", &q.Burst)
	atLeastOne("burst", l, int64(q.Burst))
	switch {
	case l > 0 && q.IngestRate.Unlimited():
		d.errorf(l, o.field("burst"), "only with an ingest_rate: it is the bucket of that rate")
	case l == 0 && !q.IngestRate.Unlimited():
		q.Burst = q.IngestRate.N
	}
	l = o.integer("max_queued", &q.MaxQueued)
	atLeastOne("max_queued", l, int64(q.MaxQueued))
	l = o.size("max_bytes", &q.MaxBytes)
	atLeastOne("max_bytes", l, q.MaxBytes)
	l = o.integer("max_endpoints", &q.MaxEndpoints)
	atLeastOne("max_endpoints", l, int64(q.MaxEndpoints))
	return l
}

// checkEndpointCaps refuses a file in which a tenant has more endpoints
// than its max_endpoints.
func (d *decoder) checkEndpointCaps(t *courier.Topology) {
	for _, tenant := range slices.Sorted(maps.Keys(d.capLines)) {
		if err := t.CheckEndpointQuotas([]string{tenant}); err != nil {
			d.errorf(d.capLines[tenant], "tenants."+tenant+".quotas.max_endpoints", "%s", courier.ErrorMessage(err))
		}
	}
}

// entryName returns the tenant and the tenant's own name of an entry of a
// tenant-owned section: from its key when written qualified, else from
// its tenant: field, else the default tenant. It reads quietly: the
// entry's reader reports what is wrong with either.
func (d *decoder) entryName(p pair) (tenant, own string) {
	if strings.Contains(p.key, "/") {
		return courier.SplitName(p.key)
	}
	tenant = courier.DefaultTenant
	if v := yamlnode.Resolve(p.value); v != nil && v.Kind == yaml.MappingNode {
		quiet := &decoder{lookupEnv: d.lookupEnv, literal: d.literal}
		for _, f := range quiet.pairs(v, "") {
			if f.key == "tenant" && f.value != nil {
				if s, ok := quiet.scalar(f.value, ""); ok && s != "" {
					tenant = s
				}
			}
		}
	}
	return tenant, p.key
}

// enter starts reading an entry of section: the decoder takes its tenant,
// so that the names it uses are qualified with it, and returns its
// qualified name and its path in errors (routes.acme/orders). leave ends
// the entry.
func (d *decoder) enter(p pair, section string) (name, path string) {
	tenant, own := d.entryName(p)
	d.tenant = tenant
	name = courier.Qualify(tenant, own)
	path = section + "." + p.key
	if courier.ValidTenant(tenant) {
		path = section + "." + name
	}
	if strings.Contains(p.key, "/") {
		if courier.ValidTenant(tenant) {
			d.knownTenant(p.line, path, tenant)
		} else {
			d.errorf(p.line, path, "%q is not a valid tenant name: use 1 to %d letters, digits, '.', '_' or '-'", check.Clip(tenant), courier.MaxNameLen)
		}
	}
	return name, path
}

func (d *decoder) leave() { d.tenant = "" }

// ownName returns the entry's own name (orders of acme/orders), for the
// checks of the section's name rules.
func ownName(p pair) pair {
	if _, own, ok := strings.Cut(p.key, "/"); ok {
		p.key = own
	}
	return p
}

// tenantField checks the tenant: field of the entry being read: a tenant
// the file knows, and the tenant of its key when the key is qualified.
func (d *decoder) tenantField(o *object, p pair) {
	var tenant string
	l := o.str("tenant", &tenant)
	if l == 0 {
		return
	}
	field := o.field("tenant")
	switch keyTenant, _ := courier.SplitName(p.key); {
	case strings.Contains(p.key, "/") && tenant != keyTenant:
		d.errorf(l, field, "is %q, but the name %q is tenant %s's: give the tenant once", check.Clip(tenant), check.Clip(p.key), keyTenant)
	case !courier.ValidTenant(tenant):
		d.errorf(l, field, "%q is not a valid tenant name: use 1 to %d letters, digits, '.', '_' or '-'", check.Clip(tenant), courier.MaxNameLen)
	default:
		d.knownTenant(l, field, tenant)
	}
}

// knownTenant reports a tenant the file does not list under tenants:.
// Objects decoded one at a time (DecodeObject) know no list: their tenants
// are the server's to check.
func (d *decoder) knownTenant(line int, field, tenant string) {
	if d.known == nil || tenant == courier.DefaultTenant || tenant == courier.SystemTenant || d.known[tenant] != nil {
		return
	}
	names := []string{courier.DefaultTenant, courier.SystemTenant}
	for n := range d.known {
		names = append(names, n)
	}
	hint := ""
	if s := closest(tenant, names); s != "" {
		hint = fmt.Sprintf(" (did you mean %q?)", s)
	}
	d.errorf(line, field, "tenant %q is not listed under tenants:%s", check.Clip(tenant), hint)
}

// qualify returns the qualified name of a name the entry being read uses:
// the entry's tenant's object, or, written qualified, the one it names.
func (d *decoder) qualify(name string) string {
	if strings.Contains(name, "/") {
		return name
	}
	return courier.Qualify(d.tenant, name)
}

// use records r, a name the entry being read uses, for checkRefs, and
// returns the name qualified.
func (d *decoder) use(refs *[]ref, r ref) string {
	r.tenant = cmp.Or(d.tenant, courier.DefaultTenant)
	r.written = r.name
	r.name = d.qualify(r.name)
	*refs = append(*refs, r)
	return r.name
}

// crossTenant reports a reference written qualified that may not be: only
// the endpoints of the tenant system are named with their tenant.
func (d *decoder) crossTenant(r ref) bool {
	if !strings.Contains(r.written, "/") {
		return false
	}
	owner, own := courier.SplitName(r.written)
	switch {
	case owner == courier.SystemTenant && r.kind == "endpoint":
		return false
	case owner == r.tenant:
		d.errorf(r.line, r.field, "names tenant %s's own %s by its plain name: write %q", owner, kindWord(r.kind), check.Clip(own))
	case owner == courier.SystemTenant:
		d.errorf(r.line, r.field, "only the endpoints of tenant system are shared; its %ss are its own", kindWord(r.kind))
	default:
		d.errorf(r.line, r.field, "%q is tenant %s's %s: tenant %s's objects use only its own and the endpoints of tenant system", check.Clip(r.written), owner, kindWord(r.kind), r.tenant)
	}
	return true
}

func kindWord(kind string) string {
	if kind == "fallback" {
		return "route"
	}
	return kind
}

// suggestFor returns the did-you-mean of a name r uses that is not
// defined: among the objects its tenant may use, as it would write them.
func suggestFor[V any](r ref, defined map[string]V) string {
	names := make([]string, 0, len(defined))
	for n := range defined {
		switch owner, own := courier.SplitName(n); {
		case owner == r.tenant:
			names = append(names, own)
		case owner == courier.SystemTenant && r.kind == "endpoint":
			names = append(names, n)
		}
	}
	if s := closest(r.written, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}
