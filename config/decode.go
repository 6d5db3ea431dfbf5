package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
	"github.com/courier-gw/courier/internal/yamlnode"
	"go.yaml.in/yaml/v3"
)

// The configuration is read from yaml.Node trees rather than decoded into
// tagged structs: only the nodes know the line of every value, and walking
// them lets one pass collect every problem instead of stopping at the first.

// decoder walks one configuration file and collects its problems.
type decoder struct {
	file      string
	lookupEnv func(string) (string, bool)
	lines     map[string]int // field path → line, kept on the Config for later checks; nil: not kept
	errs      Errors

	// literal takes values as they are, without ${NAME} expansion or $$:
	// a spec held in the store is final, and a $ in it is a $.
	literal bool
	// baseUnknown says that the policy being read will inherit from a
	// default policy not known yet, so checks against inherited values
	// wait until it is (see Assemble).
	baseUnknown bool
	// fields, when set, is told of every mapping read and the fields it
	// takes, so that a test can check the reference documents them all.
	fields func(path string, known []string)

	// tenant is the tenant of the entry being read ("" outside entries: the
	// default tenant); known are the tenants the file lists, nil when
	// objects are decoded one at a time and their tenants are not known.
	tenant string
	known  map[string]*courier.Tenant
	// capLines are the lines of the tenants' max_endpoints, by tenant.
	capLines map[string]int
}

func (d *decoder) errorf(line int, field, format string, args ...any) {
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Field: field, Message: fmt.Sprintf(format, args...)})
}

// parseYAML returns the root node of the single document in data, or nil
// when data is empty or unreadable (the problem is then recorded).
func (d *decoder) parseYAML(data []byte) *yaml.Node {
	if line, msg := checkText(data); msg != "" {
		d.errorf(line, "", "%s", msg)
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := decodeNode(dec, &doc); err != nil {
		if !errors.Is(err, io.EOF) {
			d.syntaxError(err, data)
		}
		return nil
	}
	for {
		var extra yaml.Node
		err := decodeNode(dec, &extra)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			d.syntaxError(err, data)
			return nil
		}
		if n := documentContent(&extra); n != nil && !yamlnode.IsNull(n) {
			d.errorf(max(n.Line, 1), "", "a configuration is one YAML document; this is a second one (after ---)")
			return nil
		}
	}
	if root := documentContent(&doc); !yamlnode.IsNull(root) {
		return root
	}
	return nil
}

// decodeNode guards against a panic inside the YAML library, so that a
// broken file is reported as such and never takes the process down.
func decodeNode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: the YAML parser failed: %v", r)
		}
	}()
	return dec.Decode(n)
}

func documentContent(doc *yaml.Node) *yaml.Node {
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		return yamlnode.Resolve(doc.Content[0])
	}
	return yamlnode.Resolve(doc)
}

var yamlLineError = regexp.MustCompile(`(?s)^yaml: line (\d+): (.*)$`)

// syntaxError records a YAML error at its line. The library leaves the line
// out when the problem is on the first line, and for a few errors found
// after parsing; those are located here.
func (d *decoder) syntaxError(err error, data []byte) {
	msg, line := err.Error(), 0
	if m := yamlLineError.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if name, ok := strings.CutPrefix(msg, "unknown anchor '"); ok {
		name, _, _ = strings.Cut(name, "'")
		line = lineOf(data, "*"+name)
	}
	d.errorf(max(line, 1), "", "YAML syntax: %s", msg)
}

// lineOf returns the line of the first occurrence of s in data, or 1.
func lineOf(data []byte, s string) int {
	i := bytes.Index(data, []byte(s))
	if i < 0 {
		return 1
	}
	return 1 + bytes.Count(data[:i], []byte("\n"))
}

// checkText finds what the YAML library would refuse without saying where:
// bytes that are not UTF-8 and characters YAML does not allow.
func checkText(data []byte) (line int, msg string) {
	line = 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line, "the file is not UTF-8 text"
		case r == '\n':
			line++
		case r == '\t', r == '\r', r == 0x85, r >= 0x20 && r <= 0x7e,
			r >= 0xa0 && r <= 0xd7ff, r >= 0xe000 && r <= 0xfffd, r >= 0x10000 && r <= 0x10ffff:
		default:
			return line, fmt.Sprintf("control character %U is not allowed in YAML", r)
		}
		i += size
	}
	return 0, ""
}

// nodeLine returns the line of n, or of its parent when n is missing.
func nodeLine(n, parent *yaml.Node) int {
	if n != nil && n.Line > 0 {
		return n.Line
	}
	return max(parent.Line, 1)
}

func kindName(n *yaml.Node) string {
	if n == nil {
		return "node"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.ScalarNode:
		return "single value"
	}
	return "node"
}

// pair is one key of a mapping with its value; value is nil when the file
// gives the key with an empty (null) value.
type pair struct {
	key   string
	line  int
	value *yaml.Node
}

// pairs returns the keys of a mapping in file order, with the keys merged in
// by "<<: *anchor" after them (explicit keys win). A key given twice is an
// error: YAML would silently keep one of them.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out []pair
	seen := map[string]int{}
	d.collectPairs(n, path, &out, seen, false, map[*yaml.Node]bool{})
	return out
}

func (d *decoder) collectPairs(n *yaml.Node, path string, out *[]pair, seen map[string]int, merged bool, visited map[*yaml.Node]bool) {
	if visited[n] {
		return
	}
	visited[n] = true
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlnode.Resolve(n.Content[i]), yamlnode.Resolve(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode {
			d.errorf(max(n.Content[i].Line, 1), path, "keys must be plain names, not a %s", kindName(k))
			continue
		}
		if k.ShortTag() == "!!merge" {
			merges = append(merges, v)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			if !merged {
				d.errorf(k.Line, join(path, k.Value), "given twice (first at line %d)", first)
			}
			continue
		}
		seen[k.Value] = k.Line
		if yamlnode.IsNull(v) {
			v = nil
		}
		*out = append(*out, pair{key: k.Value, line: k.Line, value: v})
	}
	for _, m := range merges {
		switch {
		case m != nil && m.Kind == yaml.MappingNode:
			d.collectPairs(m, path, out, seen, true, visited)
		case m != nil && m.Kind == yaml.SequenceNode:
			for _, item := range m.Content {
				if item = yamlnode.Resolve(item); item != nil && item.Kind == yaml.MappingNode {
					d.collectPairs(item, path, out, seen, true, visited)
				} else {
					d.errorf(max(m.Line, 1), path, "<< merges mappings only")
				}
			}
		default:
			d.errorf(max(n.Line, 1), path, "<< merges mappings only")
		}
	}
}

// entries returns the named entries of a section such as endpoints: or
// routes:, whose keys are names chosen by the user.
func (d *decoder) entries(n *yaml.Node, path string) []pair {
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "must be a mapping of name: settings, not a %s", kindName(n))
		return nil
	}
	return d.pairs(n, path)
}

// object is a mapping with a fixed set of fields, read one field at a time.
type object struct {
	d      *decoder
	path   string
	line   int // of the key that holds the mapping: where "required" is reported
	fields map[string]pair
	order  []string
	bad    bool // not a mapping: already reported, so nothing in it is "required"
}

// object reads n as a mapping with the known fields; any other key is an
// error, with a suggestion when it looks like a typo. A nil n (an absent or
// empty value) is an empty object.
func (d *decoder) object(n *yaml.Node, path string, line int, known []string) *object {
	o := &object{d: d, path: path, line: line, fields: map[string]pair{}}
	if d.fields != nil {
		d.fields(path, known)
	}
	if n == nil {
		return o
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n.Line, path, "must be a mapping of field: value, not a %s", kindName(n))
		o.bad = true
		return o
	}
	for _, p := range d.pairs(n, path) {
		if !slices.Contains(known, p.key) {
			if s := closest(p.key, known); s != "" {
				d.errorf(p.line, join(path, p.key), "unknown field (did you mean %q?)", s)
			} else {
				d.errorf(p.line, join(path, p.key), "unknown field")
			}
			continue
		}
		o.fields[p.key] = p
		o.order = append(o.order, p.key)
	}
	return o
}

// has reports whether the field is given, even with an empty value.
func (o *object) has(name string) bool { _, ok := o.fields[name]; return ok }

// value returns the field's value, nil when it is absent or empty.
func (o *object) value(name string) *yaml.Node { return o.fields[name].value }

// keyLine returns the line of the field's key, or the object's line.
func (o *object) keyLine(name string) int {
	if p, ok := o.fields[name]; ok {
		return p.line
	}
	return o.line
}

func (o *object) field(name string) string { return join(o.path, name) }

func (o *object) errorf(name, format string, args ...any) {
	o.d.errorf(o.keyLine(name), o.field(name), format, args...)
}

// required reports a missing field and tells whether it is there.
func (o *object) required(name, hint string) bool {
	if o.value(name) != nil {
		return true
	}
	if !o.bad {
		o.errorf(name, "required%s", hint)
	}
	return false
}

// sub returns the mapping in field name, or nil when it is absent.
func (o *object) sub(name string, known []string) *object {
	if !o.has(name) {
		return nil
	}
	o.d.setLine(o.field(name), o.keyLine(name))
	return o.d.object(o.value(name), o.field(name), o.keyLine(name), known)
}

// setLine records where a field is, when the decoder keeps lines.
func (d *decoder) setLine(field string, line int) {
	if d.lines != nil {
		d.lines[field] = line
	}
}

// The typed setters below store the field's value in dst when it is given
// and well-formed, and return its line (0 otherwise) for further checks.

func (o *object) str(name string, dst *string) int {
	return o.parsed(name, func(s string) error {
		*dst = s
		return nil
	})
}

// oneOf reads a field that takes one of a few words into dst, which keeps
// its value when the field is absent or names none of them.
func oneOf[T ~string](o *object, name string, dst *T, words ...T) {
	var s string
	if l := o.str(name, &s); l > 0 {
		if slices.Contains(words, T(s)) {
			*dst = T(s)
		} else {
			o.d.errorf(l, o.field(name), "must be %s, not %q", orList(words), check.Clip(s))
		}
	}
}

// orList writes words as a list in prose: "a, b or c".
func orList[T ~string](words []T) string {
	var b strings.Builder
	for i, w := range words {
		switch {
		case i == 0:
		case i == len(words)-1:
			b.WriteString(" or ")
		default:
			b.WriteString(", ")
		}
		b.WriteString(string(w))
	}
	return b.String()
}

// parsed hands the field's text to parse and records where the field is
// once it is accepted, for checks made later (see Config.problem).
func (o *object) parsed(name string, parse func(string) error) int {
	n := o.value(name)
	if n == nil {
		return 0
	}
	s, ok := o.d.scalar(n, o.field(name))
	if !ok {
		return 0
	}
	if err := parse(s); err != nil {
		o.d.errorf(n.Line, o.field(name), "%v", err)
		return 0
	}
	o.d.setLine(o.field(name), n.Line)
	return n.Line
}

func (o *object) duration(name string, dst *time.Duration) int {
	return o.parsed(name, func(s string) (err error) {
		v, err := parseDuration(s)
		if err == nil {
			*dst = v
		}
		return err
	})
}

func (o *object) integer(name string, dst *int) int {
	return o.parsed(name, func(s string) error {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q is not a whole number", check.Clip(s))
		}
		*dst = v
		return nil
	})
}

func (o *object) number(name string, dst *float64) int {
	return o.parsed(name, func(s string) error {
		v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%q is not a number", check.Clip(s))
		}
		*dst = v
		return nil
	})
}

func (o *object) boolean(name string, dst *bool) int {
	return o.parsed(name, func(s string) error {
		switch s {
		case "true", "True", "TRUE":
			*dst = true
		case "false", "False", "FALSE":
			*dst = false
		default:
			return fmt.Errorf("%q is not true or false", check.Clip(s))
		}
		return nil
	})
}

func (o *object) size(name string, dst *int64) int {
	return o.parsed(name, func(s string) error {
		v, err := ParseSize(s)
		if err == nil {
			*dst = v
		}
		return err
	})
}

// item is one element of a list with its line and path (field[2]).
type item struct {
	value string
	line  int
	field string
}

// list returns the string elements of a list field; ok is false when the
// field is absent or not a list. Elements that are not single values are
// reported and left out.
func (o *object) list(name string) (items []item, ok bool) {
	n := o.value(name)
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.SequenceNode {
		o.d.errorf(n.Line, o.field(name), "must be a list ([a, b] or one \"- a\" per line), not a %s", kindName(n))
		return nil, false
	}
	items = []item{}
	for i, c := range n.Content {
		path := fmt.Sprintf("%s[%d]", o.field(name), i)
		if c = yamlnode.Resolve(c); yamlnode.IsNull(c) {
			o.d.errorf(nodeLine(c, n), path, "empty entry")
			continue
		}
		s, good := o.d.scalar(c, path)
		if good {
			items = append(items, item{value: s, line: c.Line, field: path})
		}
	}
	return items, true
}

// scalar returns the text of a single value with ${NAME} expanded (unless
// the decoder is literal).
func (d *decoder) scalar(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n.Line, path, "must be a single value, not a %s", kindName(n))
		return "", false
	}
	if yamlnode.IsNull(n) {
		return "", true
	}
	if d.literal {
		return n.Value, true
	}
	s, err := expand(n.Value, d.lookupEnv)
	if err != nil {
		d.errorf(n.Line, path, "%v", err)
		return "", false
	}
	return s, true
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// closest returns the candidate nearest to s when it is near enough to be a
// typo of it, else "".
func closest(s string, candidates []string) string {
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	best, bestDist := "", 3
	for _, c := range sorted {
		if d := editDistance(s, c); d < bestDist && 2*d <= len(s) {
			best, bestDist = c, d
		}
	}
	return best
}

// editDistance is the number of edits, in bytes, that make a into b: an
// insertion, a deletion, a change, or two neighbours swapped (the optimal
// string alignment distance). A swap counts once because it is the commonest
// typo (ulr for url), which as two changes would be too far from a short
// name to be suggested.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 64
	}
	// rows[i%3] is row i of the table: a swap looks two rows back.
	var rows [3][]int
	for i := range rows {
		rows[i] = make([]int, len(b)+1)
	}
	for j := range rows[0] {
		rows[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur, prev, before := rows[i%3], rows[(i-1)%3], rows[(i+1)%3]
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], before[j-2]+1)
			}
		}
	}
	return rows[len(a)%3][len(b)]
}
