package config

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The configuration reference, docs/configuration.md, must document every
// field the decoder takes, and nothing it does not. The decoder knows its
// fields as the lists it checks each mapping against (and suggests from
// with "did you mean"); TestReferenceDocumentsEveryField reads a file with
// every kind of mapping in it and has the decoder report each list with
// the mapping's path.

// referencePath is the configuration reference, from this package.
const referencePath = "../docs/configuration.md"

// everyMapping holds every kind of mapping the configuration has, each at
// least once, under names spelt NAME so that its paths read as the
// reference writes them. It need not be valid: only the mappings matter.
const everyMapping = `
listen: 127.0.0.1:8425
tls: {cert: a, key: b}
store: {driver: sqlite, path: a, dsn: a, blob_dir: a, blob_s3: {endpoint: a}}
retention: 1h
log: {format: text}
tracing: {endpoint: http://a}
ingest_in_flight: {max_bytes: 1MiB, max_messages: 1, sender_share: 0.5}
keys:
  NAME: {role: admin}
outbound: {allow_networks: []}
signing_keys: a
alerts: {notify: []}
endpoints:
  NAME:
    transport: http
    url: http://a
    suspension: {initial: 1s}
    claim_check: {}
    tls: {cert: a}
    auth: {basic: {username: a}, oauth2: {token_url: http://a}}
    egress: {proxy: http://a}
routes:
  NAME: {endpoints: [NAME], redrive: {on_recovery: true}}
  workflow:
    workflow: [{endpoint: NAME}]
  lookup:
    lookup: {url: "http://a/{recipient}"}
    endpoint_template: {suspension: {initial: 1s}, claim_check: {}, tls: {cert: a}, egress: {proxy: http://a}}
policies:
  NAME:
    backoff: {initial: 1s}
    escalate: [{after: 1h, notify: NAME}]
    fallback: {route: NAME}
subscriptions:
  NAME: {types: [a], route: NAME, filter: {headers: {}}}
receivers:
  NAME: {transport: dir}
tenants:
  NAME: {weight: 1, quotas: {burst: 1}, alerts: {max_per_hour: 1}}
`

// decoderFields returns every field path the decoder takes (routes.NAME.
// redrive.max_age), with list entries as [] and the routes of a workflow
// and of a lookup read as routes.NAME.
func decoderFields(t *testing.T) (paths []string, lists [][]string) {
	t.Helper()
	seen := map[string]bool{}
	index := regexp.MustCompile(`\[\d+\]`)
	d := &decoder{file: "every.yaml", fields: func(path string, known []string) {
		lists = append(lists, known)
		path = index.ReplaceAllString(path, "[]")
		for _, r := range []string{"routes.workflow", "routes.lookup"} {
			if rest, ok := strings.CutPrefix(path, r); ok {
				path = "routes.NAME" + rest
			}
		}
		for _, f := range known {
			p := f
			if path != "" {
				p = path + "." + f
			}
			if !seen[p] {
				seen[p] = true
				paths = append(paths, p)
			}
		}
	}}
	root := d.parseYAML([]byte(everyMapping))
	if root == nil {
		t.Fatalf("everyMapping does not parse: %v", d.errs)
	}
	d.config(Default(), root)
	sort.Strings(paths)
	return paths, lists
}

// documentedFields returns the field paths the reference documents: the
// first column of each table row, as code, under the path of the heading
// above it (a heading without code is the top level).
func documentedFields(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	row := regexp.MustCompile("^\\|\\s*`([^`]+)`\\s*\\|")
	doc := map[string]bool{}
	prefix := ""
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "```"):
			fenced = !fenced
		case fenced:
		case strings.HasPrefix(line, "#"):
			prefix = ""
			if m := code.FindStringSubmatch(line); m != nil {
				prefix = m[1]
			}
		default:
			if m := row.FindStringSubmatch(line); m != nil {
				p := m[1]
				if prefix != "" {
					p = prefix + "." + p
				}
				doc[p] = true
			}
		}
	}
	return doc
}

// templateAlias is where the reference documents the fields of a lookup
// route's endpoint_template: they are an http endpoint's.
const templateAlias = "routes.NAME.endpoint_template"

func TestReferenceDocumentsEveryField(t *testing.T) {
	paths, _ := decoderFields(t)
	doc := documentedFields(t)
	if len(paths) < 100 {
		t.Fatalf("the decoder reported %d fields; everyMapping misses mappings", len(paths))
	}
	known := map[string]bool{}
	var missing []string
	for _, p := range paths {
		known[p] = true
		if doc[p] {
			continue
		}
		if rest, ok := strings.CutPrefix(p, templateAlias+"."); ok && doc[templateAlias] && doc["endpoints.NAME."+rest] {
			continue
		}
		missing = append(missing, p)
	}
	if len(missing) > 0 {
		t.Errorf("docs/configuration.md does not document these fields (a table row with the field as code, under a heading with its mapping's path as code):\n  %s", strings.Join(missing, "\n  "))
	}
	var unknown []string
	for p := range doc {
		if !known[p] && p != templateAlias {
			unknown = append(unknown, p)
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("docs/configuration.md documents fields the decoder does not take:\n  %s", strings.Join(unknown, "\n  "))
	}
}

// TestEveryMappingIsRead checks that everyMapping reaches every list of
// fields the decoder has: each string of a []string literal that the
// decoder's files pass to object or sub, or keep in a variable named
// ...Fields, is a field the walk above saw. A new mapping the file lacks
// would otherwise go unchecked.
func TestEveryMappingIsRead(t *testing.T) {
	_, lists := decoderFields(t)
	var walked []string
	for _, l := range lists {
		walked = append(walked, l...)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	collect := func(n ast.Node) {
		ast.Inspect(n, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					names = append(names, s)
				}
			}
			return true
		})
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if strings.HasSuffix(id.Name, "Fields") && i < len(n.Values) {
						if _, isFunc := n.Values[i].(*ast.CallExpr); !isFunc {
							collect(n.Values[i])
						}
					}
				}
			case *ast.CallExpr:
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "object" || sel.Sel.Name == "sub") && len(n.Args) > 0 {
					if lit, ok := n.Args[len(n.Args)-1].(*ast.CompositeLit); ok {
						collect(lit)
					}
				}
			}
			return true
		})
	}
	if len(names) < 100 {
		t.Fatalf("found %d field names in the decoder's source; the search is broken", len(names))
	}
	// The fields of a signing key's spec, which the store alone holds
	// (courier signing-keys makes them), are no part of the file.
	storeOnly := []string{"private_key", "created"}
	for _, n := range names {
		if !slices.Contains(walked, n) && !slices.Contains(storeOnly, n) {
			t.Errorf("the decoder knows the field %q, but everyMapping has no mapping where it is read: add one", n)
		}
	}
}
