package config

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"github.com/courier-gw/courier/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

var policyFields = []string{"tenant", "backoff", "schedule", "max_attempts", "max_age", "priority",
	"escalate", "fallback", "on_exhausted"}

// policies reads the default policy first: every other policy starts from it
// and overrides only what it gives.
func (d *decoder) policies(n *yaml.Node, t *courier.Topology, refs *[]ref) {
	d.policySet(d.entries(n, "policies"), t, refs)
}

// policySet reads the entries of policies: (or the policies of the store)
// into t: each tenant's default policy first, over the built-in one, and
// then the tenant's other policies over it. A tenant's policies never
// inherit from another tenant's default.
func (d *decoder) policySet(entries []pair, t *courier.Topology, refs *[]ref) {
	bases := map[string]*courier.Policy{}
	delete(t.Policies, courier.DefaultPolicyName) // the built-in one, unless the entries give their own
	for _, p := range entries {
		if tenant, own := d.entryName(p); own == courier.DefaultPolicyName {
			pol := d.policy(p, courier.DefaultPolicy(), refs)
			addEntry(d, t.Policies, p, "policies", "policy", pol.Name, pol)
			bases[tenant] = t.Policies[courier.Qualify(tenant, own)]
		}
	}
	if t.Policies[courier.DefaultPolicyName] == nil {
		t.Policies[courier.DefaultPolicyName] = courier.DefaultPolicy()
	}
	for _, p := range entries {
		if tenant, own := d.entryName(p); own != courier.DefaultPolicyName {
			base := bases[tenant]
			if base == nil {
				base = courier.DefaultPolicy()
			}
			pol := d.policy(p, base, refs)
			addEntry(d, t.Policies, p, "policies", "policy", pol.Name, pol)
		}
	}
}

func (d *decoder) policy(p pair, base *courier.Policy, refs *[]ref) *courier.Policy {
	name, path := d.enter(p, "policies")
	defer d.leave()
	if own := ownName(p).key; !courier.ValidType(own) {
		d.errorf(p.line, path, "%q is not a message type: use 1 to %d letters, digits, '.', '_' or '-'", check.Clip(own), courier.MaxTypeLen)
	}
	o := d.object(p.value, path, p.line, policyFields)
	d.tenantField(o, p)
	pol := clonePolicy(base)
	pol.Name = name

	if b := o.sub("backoff", []string{"initial", "factor", "max", "jitter"}); b != nil {
		d.backoff(b, &pol.Backoff, true)
	}
	if o.has("schedule") {
		d.schedule(o, pol)
	} else if o.has("backoff") || o.has("max_attempts") {
		// Retrying by backoff or by count means this type does not follow
		// an inherited schedule, which would override both.
		pol.Schedule = nil
	}
	if l := o.integer("max_attempts", &pol.MaxAttempts); l > 0 && pol.MaxAttempts < 1 {
		d.errorf(l, o.field("max_attempts"), "must be at least 1 (1: no retries)")
	}
	if l := o.duration("max_age", &pol.MaxAge); l > 0 && pol.MaxAge <= 0 {
		d.errorf(l, o.field("max_age"), "must be greater than 0")
	}
	if l := o.integer("priority", &pol.Priority); l > 0 && (pol.Priority < 0 || pol.Priority > 9) {
		d.errorf(l, o.field("priority"), "must be from 0 to 9")
	}
	if o.has("escalate") {
		pol.Escalate = d.escalate(o, refs)
		// The engine fires escalations in this order, once each.
		slices.SortStableFunc(pol.Escalate, func(a, b courier.Escalation) int { return cmp.Compare(a.After, b.After) })
	}
	if o.has("fallback") {
		pol.Fallback = d.fallback(o, refs)
	}
	oneOf(o, "on_exhausted", &pol.OnExhausted, courier.ExhaustedSuspend, courier.ExhaustedDiscard)
	return pol
}

// schedule reads a table of delays, one per retry; it fixes the number of
// attempts, so max_attempts and backoff beside it would contradict it.
func (d *decoder) schedule(o *object, pol *courier.Policy) {
	if o.has("max_attempts") {
		o.errorf("max_attempts", "a schedule sets max_attempts (its length + 1); give one of them")
	}
	if o.has("backoff") {
		o.errorf("backoff", "a schedule replaces backoff; give one of them")
	}
	items, ok := o.list("schedule")
	if !ok {
		if o.value("schedule") == nil {
			o.errorf("schedule", "must list at least one delay (for no retries use max_attempts: 1)")
		}
		return
	}
	if len(items) == 0 {
		o.errorf("schedule", "must list at least one delay (for no retries use max_attempts: 1)")
		return
	}
	sched := make([]time.Duration, 0, len(items))
	for _, it := range items {
		v, err := parseDuration(it.value)
		switch {
		case err != nil:
			d.errorf(it.line, it.field, "%v", err)
		case v <= 0:
			d.errorf(it.line, it.field, "must be greater than 0")
		default:
			sched = append(sched, v)
		}
	}
	pol.Schedule = sched
	pol.MaxAttempts = len(sched) + 1
}

// escalate reads the notices of a policy; an empty value means none, even
// when the default policy has some.
func (d *decoder) escalate(o *object, refs *[]ref) []courier.Escalation {
	n := o.value("escalate")
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n.Line, o.field("escalate"), "must be a list of {after, notify}, not a %s", kindName(n))
		return nil
	}
	out := []courier.Escalation{}
	for i, c := range n.Content {
		path := fmt.Sprintf("%s[%d]", o.field("escalate"), i)
		if c = yamlnode.Resolve(c); yamlnode.IsNull(c) {
			d.errorf(nodeLine(c, n), path, "empty entry; write {after: ..., notify: ...}")
			continue
		}
		eo := d.object(c, path, c.Line, []string{"after", "notify"})
		var esc courier.Escalation
		if eo.required("after", ": the age of the message at which the notice goes out") {
			if l := eo.duration("after", &esc.After); l > 0 && esc.After <= 0 {
				d.errorf(l, eo.field("after"), "must be greater than 0")
			}
		}
		if eo.required("notify", ": an smtp or http endpoint") {
			if l := eo.str("notify", &esc.Notify); l > 0 {
				esc.Notify = d.use(refs, ref{line: l, field: eo.field("notify"), kind: "endpoint", name: esc.Notify, notice: true})
			}
		}
		out = append(out, esc)
	}
	return out
}

// fallback reads the backup route of a policy; an empty value means none,
// even when the default policy has one.
func (d *decoder) fallback(o *object, refs *[]ref) *courier.Fallback {
	if o.value("fallback") == nil {
		return nil
	}
	fo := o.sub("fallback", []string{"after", "route"})
	f := &courier.Fallback{}
	fo.duration("after", &f.After)
	if fo.required("route", ": the route that takes over") {
		if l := fo.str("route", &f.Route); l > 0 {
			f.Route = d.use(refs, ref{line: l, field: fo.field("route"), kind: "fallback", name: f.Route})
		}
	}
	return f
}

func clonePolicy(p *courier.Policy) *courier.Policy {
	c := *p
	c.Schedule = slices.Clone(p.Schedule)
	c.Escalate = slices.Clone(p.Escalate)
	if p.Fallback != nil {
		f := *p.Fallback
		c.Fallback = &f
	}
	return &c
}

// backoff reads initial, factor, max (and jitter when withJitter) over the
// values b already has, then checks them together: a policy that sets only
// max must still end up with max >= initial.
func (d *decoder) backoff(o *object, b *courier.Backoff, withJitter bool) {
	lInitial := o.duration("initial", &b.Initial)
	lFactor := o.number("factor", &b.Factor)
	lMax := o.duration("max", &b.Max)
	if lInitial > 0 && b.Initial <= 0 {
		d.errorf(lInitial, o.field("initial"), "must be greater than 0")
	}
	if lFactor > 0 && b.Factor < 1 {
		d.errorf(lFactor, o.field("factor"), "must be at least 1")
	}
	// Against a base not known yet, only the values given together can be
	// compared; the rest is checked once the base is known.
	given := lMax > 0 || lInitial > 0
	if d.baseUnknown {
		given = lMax > 0 && lInitial > 0
	}
	if given && b.Initial > 0 && b.Max < b.Initial {
		if lMax > 0 {
			d.errorf(lMax, o.field("max"), "must be at least initial (%s)", b.Initial)
		} else {
			d.errorf(lInitial, o.field("initial"), "must not exceed max (%s)", b.Max)
		}
	}
	if withJitter {
		if l := o.number("jitter", &b.Jitter); l > 0 && (b.Jitter < 0 || b.Jitter > 1) {
			d.errorf(l, o.field("jitter"), "must be from 0 to 1 (a fraction of the delay)")
		}
	}
}
