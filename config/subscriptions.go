package config

import (
	"net/http"
	"slices"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"go.yaml.in/yaml/v3"
)

var subscriptionFields = []string{"tenant", "types", "route", "filter"}

// subscriptions reads who receives a published message (docs/design.md §14): the
// types each subscription wants, the route that delivers its copy and the
// headers a message must carry for it.
func (d *decoder) subscriptions(n *yaml.Node, t *courier.Topology, refs *[]ref) {
	for _, p := range d.entries(n, "subscriptions") {
		s := d.subscription(p, refs)
		addEntry(d, t.Subscriptions, p, "subscriptions", "subscription", s.Name, s)
	}
}

// subscription reads one entry of subscriptions: (or one subscription of
// the store), adding the route it uses to refs.
func (d *decoder) subscription(p pair, refs *[]ref) *courier.Subscription {
	name, path := d.enter(p, "subscriptions")
	defer d.leave()
	d.checkName(ownName(p), path, courier.ValidName)
	o := d.object(p.value, path, p.line, subscriptionFields)
	d.tenantField(o, p)
	s := &courier.Subscription{Name: name}
	if o.required("types", ": a list of message types (order.created) or prefixes of types (order.*)") {
		items, _ := o.list("types")
		if v := o.value("types"); v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
			o.errorf("types", "must list at least one type")
		}
		for _, it := range items {
			switch {
			case !courier.ValidTypePattern(it.value):
				d.errorf(it.line, it.field, "%q is not a message type or a prefix of types: use a type of 1 to %d letters, digits, '.', '_' or '-' (order.created), or its beginning followed by .* (order.*)", check.Clip(it.value), courier.MaxTypeLen)
			case slices.Contains(s.Types, d.qualify(it.value)):
				d.errorf(it.line, it.field, "%q is listed twice", check.Clip(it.value))
			default:
				s.Types = append(s.Types, d.qualify(it.value))
			}
		}
	}
	if o.required("route", ": the route that delivers this subscription's messages") {
		if l := o.str("route", &s.Route); l > 0 {
			s.Route = d.use(refs, ref{line: l, field: o.field("route"), kind: "route", name: s.Route})
		}
	}
	if f := o.sub("filter", []string{"headers"}); f != nil {
		s.Headers = d.headerFilter(f)
	}
	return s
}

// headerFilter reads the headers a message must have, each with exactly its
// value; nil when there are none. Header names match without regard to
// case, so two names that differ only in case are one header given twice.
func (d *decoder) headerFilter(o *object) map[string]string {
	n, field := o.value("headers"), o.field("headers")
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, field, "must be a mapping of header: value ({X-Tenant: acme}), not a %s", kindName(n))
		return nil
	}
	headers := map[string]string{}
	first := map[string]pair{} // by canonical name
	for _, p := range d.pairs(n, field) {
		path := join(field, p.key)
		if !courier.ValidHeaderName(p.key) {
			d.errorf(p.line, path, "%q is not a header name", check.Clip(p.key))
			continue
		}
		canonical := http.CanonicalHeaderKey(p.key)
		if f, dup := first[canonical]; dup {
			d.errorf(p.line, path, "given twice (first as %q at line %d): header names match without regard to case", f.key, f.line)
			continue
		}
		first[canonical] = p
		if p.value == nil {
			d.errorf(p.line, path, `required: the value the header must have ("" for an empty one)`)
			continue
		}
		v, ok := d.scalar(p.value, path)
		switch {
		case !ok:
		case !courier.ValidHeaderValue(v):
			d.errorf(p.value.Line, path, "has a control character in its value")
		default:
			headers[p.key] = v
		}
	}
	if len(headers) == 0 {
		return nil
	}
	return headers
}
