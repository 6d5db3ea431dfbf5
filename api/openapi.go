package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"go.yaml.in/yaml/v3"
)

// openAPIYAML is the OpenAPI 3.1 description of the API, kept true by the
// API tests, which validate every request and answer they make against it.
//
//go:embed openapi.yaml
var openAPIYAML []byte

// openAPIJSON is the description as JSON, converted once.
var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(openAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("read the OpenAPI description: %w", err)
	}
	return json.Marshal(doc)
})

// OpenAPI returns the OpenAPI 3.1 description of the API as YAML, as served
// at GET /v1/openapi.yaml.
func OpenAPI() []byte { return openAPIYAML }

func (s *Server) handleOpenAPIJSON(w http.ResponseWriter, r *http.Request) {
	b, err := openAPIJSON()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func (s *Server) handleOpenAPIYAML(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/yaml")
	w.Write(openAPIYAML)
}
