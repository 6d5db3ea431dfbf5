package config

import (
	"fmt"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

// ref is a name used in one section that another section must define. They
// are checked after every section is read, so the order of sections in the
// file does not matter.
type ref struct {
	line   int
	field  string
	kind   string // "endpoint" or "route"
	name   string
	notice bool // the endpoint receives notices: smtp or http only
	// name is qualified; written is the name as the file gives it, and
	// tenant the tenant of the entry that uses it (see decoder.use).
	written string
	tenant  string
}

func (d *decoder) checkRefs(t *courier.Topology, refs []ref) {
	for _, r := range refs {
		if d.crossTenant(r) {
			continue
		}
		switch r.kind {
		case "endpoint":
			e, ok := t.Endpoints[r.name]
			switch {
			case !ok:
				d.undefined(r, courier.KindEndpoint, suggestFor(r, t.Endpoints))
			case r.notice && e.Transport != courier.TransportSMTP && e.Transport != courier.TransportHTTP:
				d.errorf(r.line, r.field, "endpoint %q is a %s endpoint; notices go to smtp or http endpoints", r.written, e.Transport)
			}
		case "route":
			if _, ok := t.Routes[r.name]; !ok {
				d.undefined(r, courier.KindRoute, suggestFor(r, t.Routes))
			}
		case "fallback":
			switch rt, ok := t.Routes[r.name]; {
			case !ok:
				d.undefined(r, courier.KindRoute, suggestFor(r, t.Routes))
			case rt.Workflow != nil:
				d.errorf(r.line, r.field, "route %q is a workflow route: messages enter a workflow when they are sent, not by falling back", r.written)
			}
		case "policy":
			if _, ok := t.Policies[r.name]; !ok {
				d.undefined(r, courier.KindPolicy, suggestFor(r, t.Policies))
			}
		}
	}
}

// undefined reports that the object r names, of kind, is not defined.
func (d *decoder) undefined(r ref, kind courier.TopologyKind, suggestion string) {
	d.errs = append(d.errs, &Error{File: d.file, Line: r.line, Field: r.field,
		Message:   fmt.Sprintf("%s %q is not defined%s", kind, check.Clip(r.written), suggestion),
		Undefined: &Reference{Kind: kind, Name: r.name}})
}
