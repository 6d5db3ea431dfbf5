package api

import (
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// Every operation of the router is in the OpenAPI description, and the
// description has no operation the router does not serve.
func TestOpenAPICoversRoutes(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(Options{})
	if len(s.patterns) < 50 {
		t.Fatalf("the route table has %d patterns; is it read?", len(s.patterns))
	}
	served := map[string]bool{}
	for _, p := range s.patterns {
		method, path, _ := strings.Cut(p, " ")
		served[method+" "+path] = true
		item := doc.Paths.Value(path)
		if item == nil || item.GetOperation(method) == nil {
			t.Errorf("%s is not in the OpenAPI description", p)
		}
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !served[method+" "+path] {
				t.Errorf("the description has %s %s, which the router does not serve", method, path)
			}
		}
	}
}
