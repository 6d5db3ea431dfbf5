package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

// Specs are topology objects in the form the store holds them (docs/design.md §15):
// by kind and qualified name, each object's fields as in the file, as a JSON object.
// The JSON is canonical, as encoding/json writes it (keys sorted, no
// spaces), with the values as the file gives them after ${NAME} expansion,
// so that two specs of one object compare byte for byte.
type Specs map[courier.TopologyKind]map[string][]byte

// specs turns the file's topology sections, and its tenants: section,
// into Specs: what courier apply sends to the store. It runs on a file
// without problems; what it finds wrong is recorded all the same.
func (d *decoder) specs(top *object) Specs {
	out := Specs{}
	for _, kind := range append([]courier.TopologyKind{courier.KindTenant}, courier.TopologyKinds...) {
		section := kind.Section()
		out[kind] = map[string][]byte{}
		for _, p := range d.entries(top.value(section), section) {
			path := section + "." + p.key
			v := map[string]any{} // an empty entry (a policy with no fields) is an empty object
			if p.value != nil {
				if m, ok := d.plain(p.value, path, 0).(map[string]any); ok {
					v = m
				}
			}
			spec, err := json.Marshal(v)
			if err != nil {
				d.errorf(p.line, path, "cannot be written as JSON: %v", err)
				continue
			}
			if kind == courier.KindTenant {
				out[kind][p.key] = spec // a tenant's name is its own
				continue
			}
			tenant, own := d.entryName(p)
			out[kind][courier.Qualify(tenant, own)] = spec
		}
	}
	return out
}

// maxSpecDepth bounds the nesting of a spec, against aliases that make a
// value contain itself.
const maxSpecDepth = 32

// plain converts a node to a value for encoding/json as the decoder reads
// it: aliases followed, merge keys resolved, ${NAME} expanded. A scalar
// keeps its text, so the decoder reads the JSON back exactly as it read
// the file: a number or a boolean stays one when its text is valid JSON,
// anything else becomes a string.
func (d *decoder) plain(n *yaml.Node, path string, depth int) any {
	n = yamlnode.Resolve(n)
	if depth > maxSpecDepth {
		d.errorf(max(n.Line, 1), path, "is nested too deeply")
		return nil
	}
	switch {
	case yamlnode.IsNull(n):
		return nil
	case n.Kind == yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for _, p := range d.pairs(n, path) {
			if p.value == nil {
				m[p.key] = nil
				continue
			}
			m[p.key] = d.plain(p.value, join(path, p.key), depth+1)
		}
		return m
	case n.Kind == yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			s = append(s, d.plain(c, fmt.Sprintf("%s[%d]", path, i), depth+1))
		}
		return s
	case n.Kind == yaml.ScalarNode:
		text, ok := d.scalar(n, path)
		if !ok {
			return nil
		}
		switch n.ShortTag() {
		case "!!bool":
			if text == "true" || text == "false" {
				return text == "true"
			}
		case "!!int", "!!float":
			if isJSONNumber(text) {
				return json.Number(text)
			}
		}
		return text
	}
	d.errorf(max(n.Line, 1), path, "must be a mapping, a list or a single value")
	return nil
}

// isJSONNumber reports whether s is a number as JSON writes it, so that
// it can go into a spec as it is.
func isJSONNumber(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\n") {
		return false
	}
	return (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && json.Valid([]byte(s))
}
