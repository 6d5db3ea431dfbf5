package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/courier-gw/courier/api"
)

// openAPI is the API's description, loaded and checked once, with a router
// over its paths.
var openAPI = sync.OnceValues(func() (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, err
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, err
	}
	return doc, nil
})

var openAPIRouter = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openAPI()
	if err != nil {
		return nil, err
	}
	// Match on paths alone: test servers listen on other ports than the
	// description's server.
	c := *doc
	c.Servers = nil
	return legacy.NewRouter(&c)
})

// validated wraps a server under test so that every request it is sent and
// every answer it gives is checked against the OpenAPI description: an
// answer with a status, header or field the description does not have fails
// the test. A request the description does not allow must be refused (4xx):
// tests send malformed requests on purpose, but the API must not take one.
func validated(t *testing.T, h http.Handler) http.Handler {
	t.Helper()
	router, err := openAPIRouter()
	if err != nil {
		t.Fatalf("the OpenAPI description: %v", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())

		vr := r.Clone(context.Background())
		vr.Body = io.NopCloser(bytes.NewReader(reqBody))
		if after, ok := strings.CutPrefix(vr.URL.Path, "/v1/tenants/"); ok {
			// A path that names its tenant is the API path that follows it.
			if _, rest, ok := strings.Cut(after, "/"); ok {
				vr.URL.Path, vr.URL.RawPath = "/v1/"+rest, ""
			}
		}
		if vr.Header.Get("Content-Type") == "" && len(reqBody) > 0 {
			// The API reads every body as JSON, whatever it is labelled.
			vr.Header.Set("Content-Type", "application/json")
		}
		if err := checkExchange(router, vr, rec); err != nil {
			t.Errorf("%s %s answered %d %s: %v", r.Method, r.URL, rec.Code, truncate(rec.Body.String()), err)
		}
	})
}

// checkExchange checks one request and its answer against the description.
func checkExchange(router routers.Router, r *http.Request, rec *httptest.ResponseRecorder) error {
	route, params, err := router.FindRoute(r)
	if err != nil {
		// A path or method the API does not have: the answer is an error
		// body, as for any other error.
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed && rec.Code != http.StatusUnauthorized &&
			rec.Code != http.StatusForbidden {
			return errors.New("a path or method that is not described was not refused")
		}
		doc, _ := openAPI()
		return checkErrorBody(doc, rec.Body.Bytes())
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
		IncludeResponseStatus: true,
		MultiError:            true,
	}
	in := &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && rec.Code < 400 {
		return errors.New("the API took a request the description does not allow: " + err.Error())
	}
	return openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 rec.Code,
		Header:                 rec.Header(),
		Body:                   io.NopCloser(bytes.NewReader(rec.Body.Bytes())),
		Options:                opts,
	})
}

func checkErrorBody(doc *openapi3.T, body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	return doc.Components.Schemas["ErrorBody"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
}

func truncate(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return strings.TrimSpace(s)
}

// Every path of the description answers as described, without a key even
// where the server has keys: the description holds no data.
func TestOpenAPIServed(t *testing.T) {
	ts := newTestServer(t)
	status, body, hdr := ts.call(t, "GET", "/v1/openapi.json", "")
	if status != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "application/json") {
		t.Fatalf("openapi.json: %d %s", status, hdr.Get("Content-Type"))
	}
	var doc struct {
		OpenAPI string         `json:"openapi"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.OpenAPI != "3.1.0" || doc.Paths["/v1/messages/{id}"] == nil {
		t.Fatalf("openapi.json is not the description: %v %.200s", err, body)
	}
	status, body, _ = ts.call(t, "GET", "/v1/openapi.yaml", "")
	if status != 200 || !bytes.Equal(body, api.OpenAPI()) {
		t.Fatalf("openapi.yaml: %d", status)
	}
}
