package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/transport"
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

// The description offers the states the domain has, no more and no fewer.
func TestOpenAPIStatesAreTheDomains(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, v := range doc.Components.Schemas["Message"].Value.Properties["state"].Value.Enum {
		got = append(got, fmt.Sprint(v))
	}
	var want []string
	for _, s := range courier.States {
		want = append(want, string(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("Message.state is one of %v in the description, want %v", got, want)
	}
	desc := doc.Components.Parameters["q_state"].Value.Description
	if !strings.Contains(desc, courier.OneOf(courier.States)) {
		t.Errorf("the state parameter says %q, want it to name %s", desc, courier.OneOf(courier.States))
	}
}

// The description shows the settings of every registered transport, under
// its name, as EndpointConfig.Settings does.
func TestOpenAPIHasEveryTransport(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	props := doc.Components.Schemas["EndpointConfig"].Value.Properties
	for _, name := range transport.Names() {
		if props[string(name)] == nil {
			t.Errorf("EndpointConfig has no property %s for the %s transport's settings", name, name)
		}
	}
}
