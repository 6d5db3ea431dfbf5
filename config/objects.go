package config

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"go.yaml.in/yaml/v3"
)

// The topology may live in the store instead of the file (docs/design.md §15): one
// object at a time, each its spec in the file's form as JSON. A spec is read
// by the file's own decoder, as one entry of its section, so the store and
// the file obey the same rules; Assemble then checks what the objects say
// about each other, as Parse does at the end of a file.

// Object is one topology object decoded from its spec, with what it
// refers to; Assemble puts objects together. The values it holds are
// shared by every topology assembled from it and must not be changed.
type Object struct {
	Kind         courier.TopologyKind
	Name         string
	Endpoint     *courier.Endpoint     // KindEndpoint
	Route        *courier.Route        // KindRoute
	Subscription *courier.Subscription // KindSubscription
	Key          *Key                  // KindKey
	Tenant       *courier.Tenant       // KindTenant
	SigningKey   *SigningKey           // KindSigningKey

	// refs are the names the object uses, for Assemble to check.
	refs []ref
	// policy is a policy's spec, which Assemble reads again over the
	// default policy it inherits from.
	policy *yaml.Node
}

// DecodeObject reads the spec of one object, a JSON object of the fields
// the file's section gives it, with the same checks as the file, except
// that what it refers to is checked by Assemble. Values are taken as they
// are: a spec in the store is final, so ${NAME} is not expanded. A policy
// is read over the built-in default policy; checks against what it
// inherits wait for Assemble, which knows the default policy. Any error is
// an Errors, each naming the field as in the file (endpoints.acme.url) and
// its line in spec.
func DecodeObject(kind courier.TopologyKind, name string, spec []byte) (*Object, error) {
	if !kind.Valid() {
		return nil, Errors{{Field: name, Message: fmt.Sprintf("%q is not a kind of topology object: use endpoint, route, policy, subscription, key, tenant or signing_key", check.Clip(string(kind)))}}
	}
	d := &decoder{literal: true}
	path := kind.Section() + "." + name
	root := d.parseSpec(spec, path)
	if root == nil {
		return nil, d.errs.err()
	}
	obj := &Object{Kind: kind, Name: name}
	p := pair{key: name, line: max(root.Line, 1), value: root}
	switch kind {
	case courier.KindEndpoint:
		obj.Endpoint = d.endpoint(p)
	case courier.KindRoute:
		obj.Route = d.route(p, &obj.refs)
	case courier.KindPolicy:
		_, own := d.entryName(p)
		d.baseUnknown = own != courier.DefaultPolicyName
		var refs []ref // Assemble reads the policy again, and its refs with it
		d.policy(p, courier.DefaultPolicy(), &refs)
		obj.policy = root
	case courier.KindSubscription:
		obj.Subscription = d.subscription(p, &obj.refs)
	case courier.KindKey:
		k, _ := d.key(p, &obj.refs)
		obj.Key = &k
	case courier.KindTenant:
		obj.Tenant = d.tenantEntry(p, &obj.refs)
	case courier.KindSigningKey:
		obj.SigningKey = d.signingKey(p)
	}
	if err := d.errs.err(); err != nil {
		return nil, err
	}
	return obj, nil
}

// parseSpec returns the mapping of a spec, or nil after recording why
// there is none. Every problem names path, the object's place in the file.
func (d *decoder) parseSpec(spec []byte, path string) *yaml.Node {
	if !json.Valid(spec) {
		var v any
		err := json.Unmarshal(spec, &v)
		line := 1
		var se *json.SyntaxError
		if errors.As(err, &se) {
			line += bytes.Count(spec[:min(max(se.Offset, 0), int64(len(spec)))], []byte("\n"))
		}
		d.errorf(line, path, "is not JSON: %v", err)
		return nil
	}
	root := d.parseYAML(yamlSafeJSON(spec))
	for _, e := range d.errs {
		if e.Field == "" {
			e.Field = path
		}
	}
	switch {
	case len(d.errs) > 0:
		return nil
	case root == nil:
		d.errorf(1, path, "must be a mapping of field: value, not null")
		return nil
	case root.Kind != yaml.MappingNode:
		d.errorf(max(root.Line, 1), path, "must be a mapping of field: value, not a %s", kindName(root))
		return nil
	}
	return root
}

// yamlSafeJSON rewrites valid JSON where the YAML parser would read it
// otherwise than JSON means it, keeping every line where it is: a tab
// between tokens becomes a space; in strings, \/ becomes /, a \u pair of
// UTF-16 surrogates one \U escape (a lone surrogate U+FFFD, as
// encoding/json reads it), and the characters YAML does not allow in a
// file are escaped. JSON without tabs, backslashes and non-ASCII text is
// returned as it is.
func yamlSafeJSON(spec []byte) []byte {
	i := 0
	for i < len(spec) && spec[i] != '\t' && spec[i] != '\\' && spec[i] < 0x7f {
		i++
	}
	if i == len(spec) {
		return spec
	}
	out := make([]byte, 0, len(spec)+16)
	out = append(out, spec[:i]...)
	for i < len(spec) {
		c := spec[i]
		switch {
		case c == '\t':
			out = append(out, ' ')
			i++
		case c == '\\' && i+1 < len(spec) && spec[i+1] == '/':
			out = append(out, '/')
			i += 2
		case c == '\\' && i+5 < len(spec) && spec[i+1] == 'u':
			r := hexRune(spec[i+2 : i+6])
			if !utf16.IsSurrogate(r) {
				out = append(out, spec[i:i+6]...)
				i += 6
				break
			}
			n := 6
			pair := utf8.RuneError
			if i+11 < len(spec) && spec[i+6] == '\\' && spec[i+7] == 'u' {
				pair = utf16.DecodeRune(r, hexRune(spec[i+8:i+12]))
			}
			if pair != utf8.RuneError {
				r, n = pair, 12
			} else {
				r = utf8.RuneError
			}
			out = appendEscape(out, r)
			i += n
		case c == '\\' && i+1 < len(spec):
			out = append(out, c, spec[i+1])
			i += 2
		case c < 0x7f:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(spec[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				out = append(out, c) // not UTF-8: checkText says so
			case r <= 0x9f || r == 0xfffe || r == 0xffff:
				out = appendEscape(out, r)
			default:
				out = append(out, spec[i:i+size]...)
			}
			i += size
		}
	}
	return out
}

// hexRune reads the four hex digits of a \u escape; valid JSON has them.
func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}

func appendEscape(out []byte, r rune) []byte {
	if r > 0xffff {
		return fmt.Appendf(out, `\U%08X`, r)
	}
	return fmt.Appendf(out, `\u%04X`, r)
}

// kindOrder orders the kinds as the file's sections, keys last.
func kindOrder(k courier.TopologyKind) int {
	if i := slices.Index(courier.TopologyKinds, k); i >= 0 {
		return i
	}
	return len(courier.TopologyKinds)
}

// Assemble builds the topology of objects, at most one of each kind and
// name, as Parse builds it from a file with those entries: every policy
// inherits from the default one when there is one, Policies always holds
// courier.DefaultPolicyName, every name an object uses must be defined,
// and the topology is prepared. Endpoints, routes and subscriptions are
// not read again, so that assembling thousands of them takes little time;
// policies are. Any error is an Errors naming the field of the object that
// refers (routes.acme.endpoints[0]), without a line: the objects' specs
// are not one file.
func Assemble(objects []*Object) (*courier.Topology, error) {
	// The objects are taken as they come, which is what it costs to
	// assemble thousands of them on every change; only when there are
	// problems is it done again in the file's order, so that the errors
	// come in the same order whatever order the objects came in.
	t, errs := assemble(objects)
	if len(errs) == 0 {
		t.Prepare()
		return t, nil
	}
	sorted := slices.DeleteFunc(slices.Clone(objects), func(o *Object) bool { return o == nil })
	slices.SortFunc(sorted, func(a, b *Object) int {
		if a.Kind != b.Kind {
			return cmp.Compare(kindOrder(a.Kind), kindOrder(b.Kind))
		}
		return cmp.Compare(a.Name, b.Name)
	})
	_, errs = assemble(sorted)
	for _, e := range errs {
		e.Line = 0
	}
	return nil, errs
}

// assembleOne adds the object o, which is v, to the topology's objects of
// its kind m, adding the names it uses to refs; one given twice is
// reported and left out.
func assembleOne[T any](d *decoder, m map[string]*T, o *Object, v *T, refs *[]ref) {
	if !addNew(m, o.Name, v) {
		d.givenTwice(o)
		return
	}
	*refs = append(*refs, o.refs...)
}

// givenTwice reports an object whose name another object of its kind has.
func (d *decoder) givenTwice(o *Object) { d.errorf(0, o.Kind.Section()+"."+o.Name, "given twice") }

// addEntry adds v, read from the entry p of section, to m as name; an
// entry whose name was given before is an error, and kind names its object
// in it.
func addEntry[T any](d *decoder, m map[string]*T, p pair, section, kind, name string, v *T) {
	if !addNew(m, name, v) {
		d.errorf(p.line, section+"."+p.key, "is %s %q again: given twice", kind, name)
	}
}

// addNew adds v to m as name, and reports whether name was new: a name
// given already keeps the object it has.
func addNew[T any](m map[string]*T, name string, v *T) bool {
	if m[name] != nil {
		return false
	}
	m[name] = v
	return true
}

// assemble builds the topology of objects in the order given, and returns
// the problems found.
func assemble(objects []*Object) (*courier.Topology, Errors) {
	var count [5]int
	for _, o := range objects {
		if o != nil {
			count[min(kindOrder(o.Kind), len(count)-1)]++
		}
	}
	t := &courier.Topology{
		Endpoints:     make(map[string]*courier.Endpoint, count[0]),
		Routes:        make(map[string]*courier.Route, count[1]),
		Policies:      make(map[string]*courier.Policy, count[2]+1),
		Subscriptions: make(map[string]*courier.Subscription, count[3]),
	}
	d := &decoder{literal: true}
	var refs []ref
	var policies []pair
	hashes := map[string]string{}
	keys := map[string]bool{}
	for _, o := range objects {
		if o == nil {
			continue
		}
		switch {
		case o.Kind == courier.KindEndpoint && o.Endpoint != nil:
			assembleOne(d, t.Endpoints, o, o.Endpoint, &refs)
		case o.Kind == courier.KindRoute && o.Route != nil:
			assembleOne(d, t.Routes, o, o.Route, &refs)
		case o.Kind == courier.KindPolicy && o.policy != nil:
			policies = append(policies, pair{key: o.Name, line: o.policy.Line, value: o.policy})
		case o.Kind == courier.KindSubscription && o.Subscription != nil:
			assembleOne(d, t.Subscriptions, o, o.Subscription, &refs)
		case o.Kind == courier.KindKey && o.Key != nil:
			if keys[o.Name] {
				d.givenTwice(o)
				continue
			}
			keys[o.Name] = true
			// Keys are no part of the topology; the routes a sender key is
			// limited to are checked against it, and no two keys share a
			// secret. Objects come in no order of writing, so both keys of
			// a shared hash are named: the one just written is among them.
			refs = append(refs, o.refs...)
			if other, dup := hashes[o.Key.Hash]; dup {
				d.errorf(0, "keys."+other+".hash", "is the same as the hash of key %q: each key needs its own secret", o.Name)
			}
			d.uniqueHash(hashes, *o.Key, 0, "keys."+o.Name+".hash")
		case o.Kind == courier.KindTenant && o.Tenant != nil:
			if t.Tenants == nil {
				t.Tenants = map[string]*courier.Tenant{}
			}
			assembleOne(d, t.Tenants, o, o.Tenant, &refs)
		case o.Kind == courier.KindSigningKey && o.SigningKey != nil:
			// No part of the topology: the transport takes them as they are.
		default:
			d.errorf(0, o.Kind.Section()+"."+o.Name, "is not an object made by DecodeObject")
		}
	}
	// Policies are few, and read in name order, each once.
	slices.SortFunc(policies, func(a, b pair) int { return cmp.Compare(a.key, b.key) })
	for i := 1; i < len(policies); i++ {
		if policies[i].key == policies[i-1].key {
			d.errorf(0, "policies."+policies[i].key, "given twice")
		}
	}
	policies = slices.CompactFunc(policies, func(a, b pair) bool { return a.key == b.key })
	d.policySet(policies, t, &refs)
	d.checkRefs(t, refs)
	return t, d.errs
}
