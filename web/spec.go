package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

// A topology object's spec travels as JSON (the API's form) and is edited
// as YAML (the configuration file's form). These functions convert
// between the two the way the file is read: a scalar keeps its text, and
// becomes a JSON number or boolean only when that text is one, so that the
// API reads what was typed exactly as it would read the file.

// maxSpecDepth bounds the nesting of a spec typed on the dashboard, against
// aliases that make a value contain itself.
const maxSpecDepth = 32

// maxSpecValues and maxSpecText bound the values a spec expands to, and
// the text of their keys and scalars, against aliases that repeat an
// anchor's value many times over (billion laughs): far more than any
// object has, far less than would keep a request busy. The API takes
// specs of at most 1 MiB.
const (
	maxSpecValues = 20_000
	maxSpecText   = 1 << 20
)

// specYAML shows a spec (a JSON object) as YAML, keys sorted, two spaces
// of indentation.
func specYAML(spec []byte) (string, error) {
	if len(bytes.TrimSpace(spec)) == 0 {
		return "", nil
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("read spec: %w", err)
	}
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return "", nil // an object with no fields (a policy of defaults)
	}
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(yamlNode(v)); err != nil {
		return "", fmt.Errorf("write spec as YAML: %w", err)
	}
	if err := enc.Close(); err != nil {
		return "", fmt.Errorf("write spec as YAML: %w", err)
	}
	return b.String(), nil
}

// yamlNode builds the YAML of a decoded JSON value, mappings' keys sorted
// and every value in block style, quoted only where YAML needs it.
func yamlNode(v any) *yaml.Node {
	switch v := v.(type) {
	case map[string]any:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, k := range slices.Sorted(maps.Keys(v)) {
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k}, yamlNode(v[k]))
		}
		return n
	case []any:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		// A list of single values reads best on one line: [a, b].
		flow := true
		for _, e := range v {
			c := yamlNode(e)
			if c.Kind != yaml.ScalarNode || strings.Contains(c.Value, "\n") {
				flow = false
			}
			n.Content = append(n.Content, c)
		}
		if flow {
			n.Style = yaml.FlowStyle
		}
		return n
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(v.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v.String()}
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v}
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(v)}
	default:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	}
}

// specJSON reads an object's fields typed as YAML and returns them as the
// JSON object the API takes. Empty text is an object with no fields.
func specJSON(text string) ([]byte, error) {
	dec := yaml.NewDecoder(strings.NewReader(text))
	var doc yaml.Node
	switch err := dec.Decode(&doc); {
	case errors.Is(err, io.EOF):
		return []byte("{}"), nil // no document: nothing but comments, or nothing
	case err != nil:
		return nil, fmt.Errorf("the fields are not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, fmt.Errorf("line %d: give the fields of one object only, without a second document (---)", max(more.Line, 1))
	}
	top := &doc
	if top.Kind == yaml.DocumentNode {
		if len(top.Content) == 0 {
			return []byte("{}"), nil
		}
		top = top.Content[0]
	}
	top = yamlnode.Resolve(top)
	if yamlnode.IsNull(top) {
		return []byte("{}"), nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("line %d: the fields must be a mapping of names to values (url: https://…), not a %s", max(top.Line, 1), kindName(top))
	}
	r := &specReader{budget: maxSpecValues, text: maxSpecText}
	v, err := r.value(top, "", 0)
	if err != nil {
		return nil, err
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("the fields cannot be written as JSON: %w", err)
	}
	return out, nil
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "single value"
}

var errTooMany = fmt.Errorf("the fields are too many: with their aliases they make more than %d values or %d KiB", maxSpecValues, maxSpecText>>10)

// specReader reads typed YAML as a spec.
type specReader struct {
	budget int // the values it may still read
	text   int // and the bytes of their text
}

// value converts a node to a value for encoding/json, as the file's
// decoder reads it: aliases followed, merge keys (<<) resolved, a scalar
// kept as its text unless that text is a JSON number or boolean.
func (r *specReader) value(n *yaml.Node, path string, depth int) (any, error) {
	n = yamlnode.Resolve(n)
	if depth > maxSpecDepth {
		return nil, fmt.Errorf("line %d: %s is nested too deeply", max(n.Line, 1), orTop(path))
	}
	if r.budget--; r.budget < 0 {
		return nil, errTooMany
	}
	switch {
	case yamlnode.IsNull(n):
		return nil, nil
	case n.Kind == yaml.MappingNode:
		m := map[string]any{}
		if err := r.collect(n, path, depth, m, map[string]int{}, false); err != nil {
			return nil, err
		}
		return m, nil
	case n.Kind == yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := r.value(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			if err != nil {
				return nil, err
			}
			s = append(s, v)
		}
		return s, nil
	case n.Kind == yaml.ScalarNode:
		text := n.Value
		if r.text -= len(text); r.text < 0 {
			return nil, errTooMany
		}
		switch n.ShortTag() {
		case "!!bool":
			if text == "true" || text == "false" {
				return text == "true", nil
			}
		case "!!int", "!!float":
			if isJSONNumber(text) {
				return json.Number(text), nil
			}
		}
		return text, nil
	}
	return nil, fmt.Errorf("line %d: %s must be a mapping, a list or a single value", max(n.Line, 1), orTop(path))
}

// collect adds a mapping's keys to m; keys given in the mapping itself
// win over those it merges in (<<), and a key given twice is an error.
func (r *specReader) collect(n *yaml.Node, path string, depth int, m map[string]any, seen map[string]int, merged bool) error {
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		// Keys merged in again are skipped, but count: mappings that merge
		// one another over and over must come to an end too.
		k, v := yamlnode.Resolve(n.Content[i]), n.Content[i+1]
		if r.budget--; r.budget < 0 {
			return errTooMany
		}
		if k != nil {
			if r.text -= len(k.Value); r.text < 0 {
				return errTooMany
			}
		}
		if k == nil || k.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: %s: keys must be plain names", max(n.Content[i].Line, 1), orTop(path))
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, yamlnode.Resolve(v))
			continue
		}
		field := join(path, k.Value)
		if first, dup := seen[k.Value]; dup {
			if merged {
				continue
			}
			return fmt.Errorf("line %d: %s is given twice (first at line %d)", k.Line, field, first)
		}
		seen[k.Value] = k.Line
		val, err := r.value(v, field, depth+1)
		if err != nil {
			return err
		}
		m[k.Value] = val
	}
	for _, src := range merges {
		var from []*yaml.Node
		switch src.Kind {
		case yaml.MappingNode:
			from = []*yaml.Node{src}
		case yaml.SequenceNode:
			for _, c := range src.Content {
				from = append(from, yamlnode.Resolve(c))
			}
		default:
			from = []*yaml.Node{src}
		}
		for _, f := range from {
			if f == nil || f.Kind != yaml.MappingNode {
				return fmt.Errorf("line %d: %s: << merges mappings only", max(src.Line, 1), orTop(path))
			}
			if depth > maxSpecDepth {
				return fmt.Errorf("line %d: %s is nested too deeply", max(src.Line, 1), orTop(path))
			}
			if err := r.collect(f, path, depth+1, m, seen, true); err != nil {
				return err
			}
		}
	}
	return nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orTop(path string) string {
	if path == "" {
		return "the fields"
	}
	return path
}

// isJSONNumber reports whether s is a number as JSON writes it.
func isJSONNumber(s string) bool {
	if s == "" || strings.ContainsAny(s, " \t\n") {
		return false
	}
	return (s[0] == '-' || s[0] >= '0' && s[0] <= '9') && json.Valid([]byte(s))
}

// decodeSpec reads a spec as generic JSON, numbers kept as written; nil
// for an empty or unreadable one.
func decodeSpec(spec []byte) map[string]any {
	if len(bytes.TrimSpace(spec)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil
	}
	return m
}

// specSummary is a spec on one line, for lists: its fields by name, a
// nested mapping in braces.
func specSummary(spec []byte) string {
	return summarize(decodeSpec(spec))
}

func summarize(m map[string]any) string {
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+": "+valueText(m[k]))
	}
	return strings.Join(parts, ", ")
}

// valueText shows a value of a spec briefly: a string as it is, a list in
// brackets, a mapping in braces.
func valueText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case map[string]any:
		return "{" + summarize(v) + "}"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = valueText(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case nil:
		return "null"
	default:
		return fmt.Sprint(v)
	}
}

// fieldChange is one field a topology change set, changed or removed.
type fieldChange struct {
	Field         string
	Before, After string
	// Added and Removed tell a field that was not there, or is no longer.
	Added, Removed bool
}

// specChanges lists the fields that differ between two specs, by their
// path (tls.cert); a list is one field.
func specChanges(before, after []byte) []fieldChange {
	b, a := map[string]string{}, map[string]string{}
	flatten(decodeSpec(before), "", b)
	flatten(decodeSpec(after), "", a)
	var out []fieldChange
	for _, f := range slices.Sorted(maps.Keys(a)) {
		old, had := b[f]
		switch {
		case !had:
			out = append(out, fieldChange{Field: f, After: a[f], Added: true})
		case old != a[f]:
			out = append(out, fieldChange{Field: f, Before: old, After: a[f]})
		}
	}
	for _, f := range slices.Sorted(maps.Keys(b)) {
		if _, has := a[f]; !has {
			out = append(out, fieldChange{Field: f, Before: b[f], Removed: true})
		}
	}
	return out
}

func flatten(m map[string]any, path string, out map[string]string) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && len(sub) > 0 {
			flatten(sub, join(path, k), out)
			continue
		}
		out[join(path, k)] = valueText(v)
	}
}

// apiLineRE is the start of a message about one field of a spec as the API
// gives it: the line it counts is of the JSON it was sent, not of the YAML
// typed here.
var apiLineRE = regexp.MustCompile(`^line \d+: (\S.*?): `)

// placeErrors points the API's messages about an object's fields at the
// lines of the YAML they were typed in. A line the API counted that
// cannot be found there (the object's name, another object) is left out:
// it is of the JSON the API was sent.
func placeErrors(msg string, kind courier.TopologyKind, name, text string) string {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return msg
	}
	prefix := kind.Section() + "." + name + "."
	lines := strings.Split(msg, "\n")
	for i, l := range lines {
		m := apiLineRE.FindStringSubmatchIndex(l)
		if m == nil {
			continue
		}
		lines[i] = l[m[2]:]
		field := l[m[2]:m[3]]
		if rest, ok := strings.CutPrefix(field, prefix); ok && len(doc.Content) > 0 {
			if n := lineOf(doc.Content[0], rest); n > 0 {
				lines[i] = fmt.Sprintf("line %d: %s", n, l[m[2]:])
			}
		}
	}
	return strings.Join(lines, "\n")
}

// fieldPathRE splits a field's path (tls.cert, escalate[0].notify) into
// names and indexes.
var fieldPathRE = regexp.MustCompile(`[^.\[\]]+|\[\d+\]`)

// lineOf returns the line of a field of a mapping by its path, 0 when it
// is not there.
func lineOf(n *yaml.Node, path string) int {
	if path == "" {
		return n.Line
	}
	line := 0
	for _, seg := range fieldPathRE.FindAllString(path, -1) {
		n = yamlnode.Resolve(n)
		if n == nil {
			return 0
		}
		if strings.HasPrefix(seg, "[") {
			i, err := strconv.Atoi(strings.Trim(seg, "[]"))
			if err != nil || n.Kind != yaml.SequenceNode || i >= len(n.Content) {
				return 0
			}
			n = n.Content[i]
			line = n.Line
			continue
		}
		if n.Kind != yaml.MappingNode {
			return 0
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if k := yamlnode.Resolve(n.Content[j]); k != nil && k.Value == seg {
				next, line = n.Content[j+1], k.Line
				break
			}
		}
		if next == nil {
			return 0
		}
		n = next
	}
	return line
}
