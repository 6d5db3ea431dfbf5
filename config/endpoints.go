package config

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/courier-gw/courier/transport"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"go.yaml.in/yaml/v3"
)

var endpointFields = []string{"transport", "timeout", "max_concurrency", "max_concurrency_ceiling", "min_interval", "rate",
	"timeout_on", "suspend_on", "permanent", "retries_before_suspension", "suspension", "claim_check"}

// transportFields returns the fields a transport takes besides the common
// ones; a field of another transport is a mistake worth naming as such.
func transportFields(t courier.Transport) ([]string, bool) {
	k, ok := transport.Kind(t)
	return k.Fields, ok
}

// allEndpointFields are the keys an endpoint may have whatever its transport.
var allEndpointFields = func() []string {
	all := append([]string{"tenant"}, endpointFields...)
	for _, k := range transport.Kinds {
		for _, f := range k.Fields {
			if !slices.Contains(all, f) {
				all = append(all, f)
			}
		}
	}
	return all
}()

func (d *decoder) endpoints(n *yaml.Node, t *courier.Topology) {
	for _, p := range d.entries(n, "endpoints") {
		e := d.endpoint(p)
		addEntry(d, t.Endpoints, p, "endpoints", "endpoint", e.Name, e)
	}
}

// endpoint reads one entry of endpoints: (or one endpoint of the store).
func (d *decoder) endpoint(p pair) *courier.Endpoint {
	name, path := d.enter(p, "endpoints")
	defer d.leave()
	d.checkName(ownName(p), path, courier.ValidName)
	o := d.object(p.value, path, p.line, allEndpointFields)
	d.tenantField(o, p)
	var tr string
	names := transport.Names()
	if o.required("transport", ": one of "+strings.Join(transportStrings(names), ", ")) {
		if l := o.str("transport", &tr); l > 0 && !slices.Contains(names, courier.Transport(tr)) {
			d.errorf(l, o.field("transport"), "must be %s, not %q", orList(names), check.Clip(tr))
		}
	}
	e := courier.NewEndpoint(name, courier.Transport(tr))
	kind, known := transport.Kind(e.Transport)
	if own, ok := transportFields(e.Transport); ok {
		for _, f := range o.order {
			if f != "tenant" && !slices.Contains(endpointFields, f) && !slices.Contains(own, f) {
				o.errorf(f, "not a field of %s endpoints (it belongs to %s endpoints)", e.Transport, fieldOwners(f))
			}
		}
	}
	d.endpointRules(o, e)
	if known {
		e.Settings = kind.Decode(settingsFields{o})
	}
	return e
}

func transportStrings(names []courier.Transport) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	return out
}

func fieldOwners(f string) string {
	var owners []string
	for _, k := range transport.Kinds {
		if slices.Contains(k.Fields, f) {
			owners = append(owners, string(k.Name))
		}
	}
	return strings.Join(owners, " and ")
}

// endpointRules reads the fields every transport shares: timeout, limits
// and the health rules of docs/design.md §4.
func (d *decoder) endpointRules(o *object, e *courier.Endpoint) {
	if l := o.duration("timeout", &e.Timeout); l > 0 && e.Timeout <= 0 {
		d.errorf(l, o.field("timeout"), "must be greater than 0")
	}
	d.concurrency(o, e)
	o.duration("min_interval", &e.MinInterval)
	o.parsed("rate", func(s string) (err error) {
		e.Rate, err = parseRate(s)
		return err
	})
	timeoutOn, timeoutGiven := d.classes(o, "timeout_on")
	suspendOn, suspendGiven := d.classes(o, "suspend_on")
	timeoutOn, suspendOn = d.healthClasses(timeoutOn), d.healthClasses(suspendOn)
	if permanent, ok := d.classes(o, "permanent"); ok {
		e.PermanentClasses = make([]courier.ErrorClass, 0, len(permanent))
		for _, c := range permanent {
			e.PermanentClasses = append(e.PermanentClasses, courier.ErrorClass(c.value))
		}
	}
	// A class cannot both count towards suspension and suspend at once.
	// Naming a class in one list takes it out of the other list's default,
	// so that "suspend_on: [http_5xx]" alone means what it says.
	switch {
	case timeoutGiven && suspendGiven:
		for _, c := range suspendOn {
			if slices.ContainsFunc(timeoutOn, func(t item) bool { return t.value == c.value }) {
				d.errorf(c.line, c.field, "%s is in timeout_on too; a class either counts towards suspension or suspends at once", c.value)
			}
		}
	case timeoutGiven:
		e.SuspendOn = slices.DeleteFunc(e.SuspendOn, func(c courier.ErrorClass) bool {
			return slices.ContainsFunc(timeoutOn, func(t item) bool { return t.value == string(c) })
		})
	case suspendGiven:
		e.TimeoutOn = slices.DeleteFunc(e.TimeoutOn, func(c courier.ErrorClass) bool {
			return slices.ContainsFunc(suspendOn, func(t item) bool { return t.value == string(c) })
		})
	}
	if timeoutGiven {
		e.TimeoutOn = toClasses(timeoutOn)
	}
	if suspendGiven {
		e.SuspendOn = toClasses(suspendOn)
	} else if e.AutoConcurrency {
		// A 429 is what an adaptive limit learns from: it cuts the limit
		// rather than suspending the endpoint, unless suspend_on says so.
		e.SuspendOn = slices.DeleteFunc(e.SuspendOn, func(c courier.ErrorClass) bool { return c == courier.ClassHTTP429 })
	}
	if l := o.integer("retries_before_suspension", &e.RetriesBeforeSuspension); l > 0 && e.RetriesBeforeSuspension < 0 {
		d.errorf(l, o.field("retries_before_suspension"), "must not be negative")
	}
	if s := o.sub("suspension", []string{"initial", "factor", "max"}); s != nil {
		d.backoff(s, &e.Suspension, false)
	}
	if c := o.sub("claim_check", []string{"above", "ttl"}); c != nil {
		e.ClaimCheck = d.claimCheck(c)
	}
}

// claimCheck reads an endpoint's claim_check: above, a size, and ttl, how
// long a notice's URL stays valid; a field left out takes its default.
// Its URLs expire on a whole second, so the ttl is at least one.
func (d *decoder) claimCheck(o *object) *courier.ClaimCheck {
	c := &courier.ClaimCheck{Above: courier.DefaultClaimCheckAbove, TTL: courier.DefaultClaimCheckTTL}
	if l := o.size("above", &c.Above); l > 0 && c.Above >= courier.MaxPayloadCeiling {
		d.errorf(l, o.field("above"), "must be less than %s, the largest payload courier takes", formatSize(courier.MaxPayloadCeiling))
	}
	if l := o.duration("ttl", &c.TTL); l > 0 && c.TTL < time.Second {
		d.errorf(l, o.field("ttl"), "must be at least 1s")
	}
	return c
}

// concurrency reads max_concurrency, a number or auto, and with auto the
// max_concurrency_ceiling it may reach (docs/design.md §4).
func (d *decoder) concurrency(o *object, e *courier.Endpoint) {
	l := o.parsed("max_concurrency", func(s string) error {
		if strings.TrimSpace(s) == "auto" {
			e.AutoConcurrency, e.MaxConcurrency = true, courier.DefaultConcurrencyCeiling
			return nil
		}
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is neither a whole number nor auto", check.Clip(s))
		}
		e.MaxConcurrency = v
		return nil
	})
	if l > 0 && !e.AutoConcurrency && e.MaxConcurrency < 1 {
		d.errorf(l, o.field("max_concurrency"), "must be at least 1")
	}
	if !o.has("max_concurrency_ceiling") {
		return
	}
	if !e.AutoConcurrency {
		o.errorf("max_concurrency_ceiling", "only with max_concurrency: auto (a fixed max_concurrency is its own ceiling)")
		return
	}
	if l := o.integer("max_concurrency_ceiling", &e.MaxConcurrency); l > 0 && e.MaxConcurrency < 1 {
		d.errorf(l, o.field("max_concurrency_ceiling"), "must be at least 1")
	}
}

// classes reads a list of error classes; ok tells whether the list is given.
func (d *decoder) classes(o *object, name string) ([]item, bool) {
	items, ok := o.list(name)
	var good []item
	for _, it := range items {
		switch {
		case !courier.ErrorClass(it.value).Valid():
			d.errorf(it.line, it.field, "%q is not an error class%s", check.Clip(it.value), suggestClass(it.value))
		case slices.ContainsFunc(good, func(g item) bool { return g.value == it.value }):
			d.errorf(it.line, it.field, "%s is listed twice", it.value)
		default:
			good = append(good, it)
		}
	}
	return good, ok
}

// healthClasses refuses the classes of failures that never reach the
// receiver (courier.ErrorClass.Blameless): they say nothing of its health,
// so they cannot count towards a suspension.
func (d *decoder) healthClasses(items []item) []item {
	return slices.DeleteFunc(items, func(it item) bool {
		if courier.ErrorClass(it.value).Blameless() {
			d.errorf(it.line, it.field, "%s failures happen before the receiver is reached and never touch its health (docs/design.md §4): leave %s out", it.value, it.value)
			return true
		}
		return false
	})
}

func suggestClass(s string) string {
	names := make([]string, len(courier.ErrorClasses))
	for i, c := range courier.ErrorClasses {
		names[i] = string(c)
	}
	if c := closest(s, names); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return " (see docs/design.md §3 for the classes)"
}

func toClasses(items []item) []courier.ErrorClass {
	out := make([]courier.ErrorClass, len(items))
	for i, it := range items {
		out[i] = courier.ErrorClass(it.value)
	}
	return out
}

// checkClaimChecks refuses endpoints with a claim_check when courier has no
// public_url: their notices' URLs are built on it. It runs once the
// environment has had its say, as COURIER_PUBLIC_URL may set it. The
// topology held in the store is checked when it is used (an attempt fails
// and says why), as public_url is the server's, not the store's.
func (c *Config) checkClaimChecks() Errors {
	if c.Topology == nil {
		return nil
	}
	var errs Errors
	for _, at := range ClaimChecks(c.Topology) {
		if c.PublicURL == "" {
			errs = append(errs, &Error{File: c.File, Line: c.lines[at.Field], Field: at.Field,
				Message: NeedsPublicURL + "; set public_url in this file or COURIER_PUBLIC_URL (courier apply leaves this check to the server)"})
		}
		if c.Retention > 0 && at.Check.TTL >= c.Retention {
			f := at.Field + ".ttl"
			errs = append(errs, &Error{File: c.File, Line: cmp.Or(c.lines[f], c.lines[at.Field]), Field: f,
				Message: fmt.Sprintf("must be shorter than retention (%v): a delivered message, and the payload its link fetches, may be purged before the link expires", c.Retention)})
		}
	}
	return errs
}

// NeedsPublicURL is what a claim check says without public_url.
const NeedsPublicURL = "needs public_url: the URL in its notices, from which receivers fetch the payload, is built on it"

// ClaimCheckAt is a claim check of a topology and the field that sets it.
type ClaimCheckAt struct {
	Field string // endpoints.NAME.claim_check or routes.NAME.endpoint_template.claim_check
	Check *courier.ClaimCheck
}

// ClaimChecks lists the claim checks of t (an endpoint's, or a lookup
// route's template's), in name order: a topology with any needs
// public_url.
func ClaimChecks(t *courier.Topology) []ClaimCheckAt {
	var out []ClaimCheckAt
	for _, name := range slices.Sorted(maps.Keys(t.Endpoints)) {
		if cc := t.Endpoints[name].ClaimCheck; cc != nil {
			out = append(out, ClaimCheckAt{"endpoints." + name + ".claim_check", cc})
		}
	}
	// The endpoints a lookup route resolves take its template's.
	for _, name := range slices.Sorted(maps.Keys(t.Routes)) {
		if tpl := t.Routes[name].EndpointTemplate; tpl != nil && tpl.ClaimCheck != nil {
			out = append(out, ClaimCheckAt{"routes." + name + ".endpoint_template.claim_check", tpl.ClaimCheck})
		}
	}
	return out
}

// settingsFields is an endpoint's object as a transport's Decode reads it.
type settingsFields struct{ o *object }

var _ courier.SettingsFields = settingsFields{}

func (f settingsFields) Has(name string) bool                    { return f.o.has(name) }
func (f settingsFields) Required(name, hint string) bool         { return f.o.required(name, hint) }
func (f settingsFields) String(name string, dst *string) int     { return f.o.str(name, dst) }
func (f settingsFields) Bool(name string, dst *bool) int         { return f.o.boolean(name, dst) }
func (f settingsFields) Field(name string) string                { return f.o.field(name) }
func (f settingsFields) Malformed() bool                         { return f.o.bad }
func (f settingsFields) Errorf(name, format string, args ...any) { f.o.errorf(name, format, args...) }

func (f settingsFields) ErrorAt(line int, field, format string, args ...any) {
	f.o.d.errorf(line, field, format, args...)
}

func (f settingsFields) List(name string) ([]courier.FieldItem, bool) {
	items, ok := f.o.list(name)
	if !ok {
		return nil, false
	}
	out := make([]courier.FieldItem, len(items))
	for i, it := range items {
		out[i] = courier.FieldItem{Value: it.value, Line: it.line, Field: it.field}
	}
	return out, true
}

func (f settingsFields) Len(name string) int {
	if n := f.o.value(name); n != nil && n.Kind == yaml.SequenceNode {
		return len(n.Content)
	}
	return 0
}

func (f settingsFields) Networks(name string) []string {
	var out []string
	for _, p := range f.o.d.networks(f.o, name) {
		out = append(out, p.String())
	}
	return out
}

func (f settingsFields) Entries(name string, known []string) []courier.FieldEntry {
	n := f.o.value(name)
	if n == nil {
		return nil
	}
	f.o.d.setLine(f.o.field(name), f.o.keyLine(name))
	var out []courier.FieldEntry
	for _, p := range f.o.d.entries(n, f.o.field(name)) {
		e := courier.FieldEntry{Key: p.key, Line: p.line, Field: join(f.o.field(name), p.key)}
		switch {
		case p.value == nil:
		case p.value.Kind == yaml.MappingNode:
			e.Sub = settingsFields{f.o.d.object(p.value, e.Field, p.line, known)}
		default:
			s, ok := f.o.d.scalar(p.value, e.Field)
			if !ok {
				continue
			}
			e.Value = s
		}
		out = append(out, e)
	}
	return out
}

func (f settingsFields) Sub(name string, known []string) courier.SettingsFields {
	if s := f.o.sub(name, known); s != nil {
		return settingsFields{s}
	}
	return nil
}
