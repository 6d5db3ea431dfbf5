package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	httptransport "github.com/courier-gw/courier/transport/http"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"github.com/courier-gw/courier/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

var routeFields = []string{"tenant", "endpoints", "strategy", "weights", "ordered_on_failure", "workflow", "envelope", "compensation_policy",
	"lookup", "endpoint_template", "redrive"}

func (d *decoder) routes(n *yaml.Node, t *courier.Topology, refs *[]ref) {
	for _, p := range d.entries(n, "routes") {
		r := d.route(p, refs)
		addEntry(d, t.Routes, p, "routes", "route", r.Name, r)
	}
}

// route reads one entry of routes: (or one route of the store), adding the
// names it uses to refs.
func (d *decoder) route(p pair, refs *[]ref) *courier.Route {
	name, path := d.enter(p, "routes")
	defer d.leave()
	d.checkName(ownName(p), path, courier.ValidName)
	if strings.HasPrefix(ownName(p).key, "courier.") {
		d.errorf(p.line, path, "route names starting with \"courier.\" are reserved for courier's own notices")
	}
	o := d.object(p.value, path, p.line, routeFields)
	d.tenantField(o, p)
	r := &courier.Route{Name: name, OrderedOnFailure: defaultOrderedOnFailure}
	switch {
	case o.has("workflow"):
		d.workflow(o, r, refs)
	case o.has("lookup") || o.has("endpoint_template"):
		d.lookup(o, r)
	}
	if r.Workflow == nil {
		for _, f := range []string{"envelope", "compensation_policy"} {
			if o.has(f) {
				o.errorf(f, "only a workflow route has it")
			}
		}
	}
	if r.Workflow == nil && r.Lookup == nil && o.required("endpoints", ": a list of endpoint names (or a workflow: of steps, or a lookup: of recipients)") {
		items, _ := o.list("endpoints")
		if v := o.value("endpoints"); v.Kind == yaml.SequenceNode && len(v.Content) == 0 {
			o.errorf("endpoints", "must list at least one endpoint")
		}
		for _, it := range items {
			if slices.Contains(r.Endpoints, d.qualify(it.value)) {
				d.errorf(it.line, it.field, "endpoint %q is listed twice", check.Clip(it.value))
				continue
			}
			r.Endpoints = append(r.Endpoints, d.use(refs, ref{line: it.line, field: it.field, kind: "endpoint", name: it.value}))
		}
	}
	r.Strategy = defaultStrategy(len(r.Endpoints))
	var strategy string
	if l := o.str("strategy", &strategy); l > 0 {
		switch s := courier.Strategy(strategy); {
		case !slices.Contains(courier.Strategies, s):
			d.errorf(l, o.field("strategy"), "must be single, failover, round_robin or weighted, not %q", check.Clip(strategy))
		case s == courier.StrategySingle && len(r.Endpoints) > 1:
			d.errorf(l, o.field("strategy"), "single takes one endpoint and this route has %d; use failover, round_robin or weighted", len(r.Endpoints))
		default:
			r.Strategy = s
		}
	}
	if o.has("weights") && (strategy == "" || slices.Contains(courier.Strategies, courier.Strategy(strategy))) {
		d.weights(o, r, strategy)
	}
	oneOf(o, "ordered_on_failure", &r.OrderedOnFailure, courier.OrderedBlock, courier.OrderedSkip)
	d.redrive(o, r)
	return r
}

var redriveFields = []string{"on_recovery", "reasons", "max_age"}

// redrive reads a route's redrive: which suspended messages are resubmitted
// when one of its endpoints recovers. Only suspension reasons a receiver
// may take on a second try are allowed: never rejected or invalid.
func (d *decoder) redrive(o *object, r *courier.Route) {
	ro := o.sub("redrive", redriveFields)
	if ro == nil {
		return
	}
	if r.Workflow != nil || r.Lookup != nil {
		o.errorf("redrive", "only a route with endpoints of its own has it")
		return
	}
	rd := &courier.Redrive{MaxAge: courier.DefaultRedriveMaxAge}
	ro.boolean("on_recovery", &rd.OnRecovery)
	if items, ok := ro.list("reasons"); ok {
		if len(items) == 0 {
			ro.errorf("reasons", "must list at least one suspension reason (default [exhausted, expired])")
		}
		for _, it := range items {
			switch reason := courier.Reason(it.value); {
			case !reason.Valid():
				d.errorf(it.line, it.field, "%q is not a suspension reason", check.Clip(it.value))
			case !reason.Redrivable():
				d.errorf(it.line, it.field, "%s messages are never re-driven: they would fail again", reason)
			case slices.Contains(rd.Reasons, reason):
				d.errorf(it.line, it.field, "%q is listed twice", reason)
			default:
				rd.Reasons = append(rd.Reasons, reason)
			}
		}
	}
	if len(rd.Reasons) == 0 {
		rd.Reasons = slices.Clone(courier.DefaultRedriveReasons)
	}
	if l := ro.duration("max_age", &rd.MaxAge); l > 0 && rd.MaxAge <= 0 {
		d.errorf(l, ro.field("max_age"), "must be greater than 0")
	}
	r.Redrive = rd
}

func (d *decoder) weights(o *object, r *courier.Route, strategy string) {
	if courier.Strategy(strategy) != courier.StrategyWeighted {
		o.errorf("weights", "only for strategy weighted")
		return
	}
	r.Weights = map[string]int{}
	for _, p := range d.entries(o.value("weights"), o.field("weights")) {
		wo := &object{d: d, path: o.field("weights"), line: p.line, fields: map[string]pair{p.key: p}}
		var w int
		l := wo.integer(p.key, &w)
		switch {
		case !slices.Contains(r.Endpoints, d.qualify(p.key)):
			d.errorf(p.line, wo.field(p.key), "%q is not an endpoint of this route", check.Clip(p.key))
		case l > 0 && w < 1:
			d.errorf(l, wo.field(p.key), "must be at least 1")
		case l > 0:
			r.Weights[d.qualify(p.key)] = w
		case p.value == nil:
			wo.errorf(p.key, "required: a whole number of at least 1")
		}
	}
}

var stepFields = []string{"endpoint", "compensate"}

// workflow reads a workflow route: its steps, each an endpoint and the
// endpoint that undoes it, instead of endpoints of its own.
func (d *decoder) workflow(o *object, r *courier.Route, refs *[]ref) {
	for _, f := range []string{"endpoints", "strategy", "weights", "lookup", "endpoint_template"} {
		if o.has(f) {
			o.errorf(f, "not a field of a workflow route: its steps name their endpoints")
		}
	}
	w := &courier.Workflow{}
	r.Workflow = w
	n := o.value("workflow")
	if n == nil || n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		o.errorf("workflow", "must list the steps: - {endpoint: a, compensate: a-cancel}")
		return
	}
	for i, c := range n.Content {
		path := fmt.Sprintf("%s[%d]", o.field("workflow"), i)
		so := d.object(yamlnode.Resolve(c), path, nodeLine(c, n), stepFields)
		var step courier.WorkflowStep
		if so.required("endpoint", ": the endpoint of this step") {
			if l := so.str("endpoint", &step.Endpoint); l > 0 {
				step.Endpoint = d.use(refs, ref{line: l, field: so.field("endpoint"), kind: "endpoint", name: step.Endpoint})
			}
		}
		if l := so.str("compensate", &step.Compensate); l > 0 && step.Compensate != "" {
			step.Compensate = d.use(refs, ref{line: l, field: so.field("compensate"), kind: "endpoint", name: step.Compensate})
		}
		w.Steps = append(w.Steps, step)
	}
	o.boolean("envelope", &w.Envelope)
	if l := o.str("compensation_policy", &w.CompensationPolicy); l > 0 {
		w.CompensationPolicy = d.use(refs, ref{line: l, field: o.field("compensation_policy"), kind: "policy", name: w.CompensationPolicy})
	}
	r.Strategy = courier.StrategySingle
}

var lookupFields = []string{"url", "timeout", "cache_ttl", "negative_ttl"}

// lookup reads a route that resolves each message's endpoint from its
// recipient through a registry: the registry, and the settings of the
// endpoints it resolves.
func (d *decoder) lookup(o *object, r *courier.Route) {
	for _, f := range []string{"endpoints", "strategy", "weights"} {
		if o.has(f) {
			o.errorf(f, "not a field of a lookup route: its endpoint is resolved for each recipient")
		}
	}
	l := &courier.Lookup{Timeout: courier.DefaultLookupTimeout, CacheTTL: courier.DefaultLookupCacheTTL,
		NegativeTTL: courier.DefaultLookupNegativeTTL}
	r.Lookup, r.Strategy = l, courier.StrategySingle
	lo := o.sub("lookup", lookupFields)
	if lo == nil {
		o.errorf("lookup", "required with endpoint_template: the registry that resolves recipients ({url: ...})")
		lo = d.object(nil, o.field("lookup"), o.keyLine("endpoint_template"), lookupFields)
	}
	if lo.required("url", ": the registry's URL, with {recipient} (and {type})") {
		if line := lo.str("url", &l.URL); line > 0 {
			switch {
			case check.URL(l.LookupURL("r", "t"), "http", "https") != nil:
				d.errorf(line, lo.field("url"), "must be an absolute http or https URL")
			case !strings.Contains(l.URL, "{recipient}"):
				d.errorf(line, lo.field("url"), "must contain {recipient}, where the message's recipient goes")
			}
		}
	}
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"timeout", &l.Timeout}, {"cache_ttl", &l.CacheTTL}, {"negative_ttl", &l.NegativeTTL}} {
		if line := lo.duration(f.name, f.dst); line > 0 && *f.dst <= 0 {
			d.errorf(line, lo.field(f.name), "must be greater than 0")
		}
	}
	e := courier.NewEndpoint("", courier.TransportHTTP)
	fields := append(slices.Clone(endpointFields), httptransport.Kind.Fields...)
	to := d.object(o.value("endpoint_template"), o.field("endpoint_template"), o.keyLine("endpoint_template"), fields)
	var tr string
	if line := to.str("transport", &tr); line > 0 && tr != string(courier.TransportHTTP) {
		d.errorf(line, to.field("transport"), "resolved endpoints are http endpoints, not %q", check.Clip(tr))
	}
	if to.has("url") {
		to.errorf("url", "not a field of the template: the registry gives each resolved endpoint its URL")
	}
	d.endpointRules(to, e)
	e.Settings = httptransport.Decode(settingsFields{to}, false)
	r.EndpointTemplate = e
}
