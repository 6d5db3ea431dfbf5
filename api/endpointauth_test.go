package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// The secrets of these tests: none may show in any answer, the audit or
// the log.
var authSecrets = []string{"client-s3cret", "hdr-s3cret", "basic-s3cret", "bearer-s3cret"}

func TestEndpointAuthThroughTheAPI(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var tokens int
	var got []http.Header
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if id, secret, _ := r.BasicAuth(); id != "courier" || secret != "client-s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		tokens++
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"tok-%d","token_type":"Bearer","expires_in":3600}`, tokens)
	}))
	t.Cleanup(tokenSrv.Close)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"accepted":true}`)
	}))
	t.Cleanup(receiver.Close)
	// A token endpoint that is down: nothing listens there.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/token"
	ln.Close()

	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(lockedWriter{&logs, &logMu}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tr := httptransport.New(httptransport.Options{Logger: logger, AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(tr.Close)
	ts, _ := newCatalogServer(t, false, func(o *api.Options) {
		o.Logger, o.AuthFunc, o.TestSendFunc = logger, tr.AuthState, tr.Send
	})

	oauth := `{"transport":"http","url":"` + receiver.URL + `/in","allow_networks":["127.0.0.0/8"],
		"auth":{"oauth2":{"token_url":"` + tokenSrv.URL + `/token","client_id":"courier","client_secret":"client-s3cret","scopes":["orders"]}},
		"headers":{"X-Api-Key":{"secret":"hdr-s3cret"},"X-Region":"eu"}}`
	for _, put := range []struct{ name, spec string }{
		{"crm", oauth},
		{"basic", `{"transport":"http","url":"` + receiver.URL + `/b","auth":{"basic":{"username":"u","password":"basic-s3cret"}}}`},
		{"bearer", `{"transport":"http","url":"` + receiver.URL + `/c","auth":{"bearer":"bearer-s3cret"}}`},
		{"down", `{"transport":"http","url":"` + receiver.URL + `/d","allow_networks":["127.0.0.0/8"],
			"auth":{"oauth2":{"token_url":"` + downURL + `","client_id":"courier","client_secret":"client-s3cret"}}}`},
	} {
		status, body, _ := ts.call(t, "PUT", "/v1/endpoints/"+put.name, put.spec)
		if status != http.StatusCreated {
			t.Fatalf("PUT %s: %d %s", put.name, status, body)
		}
		if !strings.Contains(string(body), `"set"`) {
			t.Errorf("PUT %s answers %s: the secrets are not shown as set", put.name, body)
		}
	}

	// Headers courier sets itself are refused, naming the field.
	status, body, _ := ts.call(t, "PUT", "/v1/endpoints/bad", `{"transport":"http","url":"https://a.example/","headers":{"Courier-Type":"x"}}`)
	wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument,
		"headers.Courier-Type: Courier-Type is set by courier itself")
	status, body, _ = ts.call(t, "PUT", "/v1/endpoints/bad", `{"transport":"http","url":"https://a.example/","headers":{"webhook-id":"x"}}`)
	wantError(t, status, body, http.StatusUnprocessableEntity, courier.CodeInvalidArgument, "headers.webhook-id")

	// The test message goes with the token and the headers.
	status, body, _ = ts.call(t, "POST", "/v1/endpoints/crm/test", "")
	if status != http.StatusOK {
		t.Fatalf("test: %d %s", status, body)
	}
	res := decode[api.EndpointTestResult](t, body)
	if !res.Delivered || res.Status != http.StatusAccepted || res.Response != `{"accepted":true}` || !strings.HasPrefix(res.MessageID, "test-") {
		t.Fatalf("test result %+v, want delivered with 202 and the receiver's answer", res)
	}
	mu.Lock()
	h := got[0]
	mu.Unlock()
	if h.Get("Authorization") != "Bearer tok-1" || h.Get("X-Api-Key") != "hdr-s3cret" || h.Get("X-Region") != "eu" ||
		h.Get("Courier-Type") != api.TestType || h.Get("Webhook-Id") != res.MessageID {
		t.Fatalf("the receiver got %v", h)
	}

	ep := decode[api.Endpoint](t, mustGet(t, ts, "/v1/endpoints/crm"))
	if ep.Auth == nil || ep.Auth.Type != "oauth2" || ep.Auth.TokenExpiresAt == nil || ep.Auth.LastFailureAt != nil {
		t.Fatalf("endpoint auth %+v, want oauth2 with its token's expiry", ep.Auth)
	}
	if ep.State != courier.HealthActive || ep.LastHour["delivered"] != 0 {
		t.Errorf("the test changed the endpoint's health or counts: %+v", ep)
	}

	// A token endpoint that is down: class auth, shown on the endpoint.
	status, body, _ = ts.call(t, "POST", "/v1/endpoints/down/test", "")
	res = decode[api.EndpointTestResult](t, body)
	if status != http.StatusOK || res.Delivered || res.Class != courier.ClassAuth {
		t.Fatalf("test of down: %d %+v, want class auth", status, res)
	}
	ep = decode[api.Endpoint](t, mustGet(t, ts, "/v1/endpoints/down"))
	if ep.Auth == nil || ep.Auth.LastFailureAt == nil || !strings.Contains(ep.Auth.LastFailure, "token endpoint") {
		t.Fatalf("endpoint auth %+v, want its last failure", ep.Auth)
	}
	if ep.State != courier.HealthActive {
		t.Errorf("state %s after a token endpoint failure, want active", ep.State)
	}
	for _, name := range []string{"basic", "bearer"} {
		ep = decode[api.Endpoint](t, mustGet(t, ts, "/v1/endpoints/"+name))
		if ep.Auth == nil || ep.Auth.Type != name {
			t.Errorf("%s: auth %+v", name, ep.Auth)
		}
		if status, body, _ = ts.call(t, "POST", "/v1/endpoints/"+name+"/test", `{"type":"invoice","payload":{"n":1}}`); status != http.StatusOK {
			t.Fatalf("test %s: %d %s", name, status, body)
		}
	}
	mu.Lock()
	if u, p, _ := (&http.Request{Header: got[1]}).BasicAuth(); u != "u" || p != "basic-s3cret" {
		t.Errorf("basic credentials %q %q", u, p)
	}
	if got[2].Get("Authorization") != "Bearer bearer-s3cret" || got[2].Get("Courier-Type") != "invoice" {
		t.Errorf("bearer request %v", got[2])
	}
	mu.Unlock()

	// No read shows a secret: endpoints, routes, topology, audit, events.
	for _, path := range []string{"/v1/endpoints", "/v1/endpoints/crm", "/v1/endpoints/basic", "/v1/endpoints/bearer",
		"/v1/routes", "/v1/topology", "/v1/audit", "/v1/audit?object=endpoint"} {
		text := string(mustGet(t, ts, path))
		for _, s := range authSecrets {
			if strings.Contains(text, s) {
				t.Errorf("GET %s shows the secret %q: %s", path, s, text)
			}
		}
	}
	logMu.Lock()
	text := logs.String()
	logMu.Unlock()
	for _, s := range authSecrets {
		if strings.Contains(text, s) {
			t.Errorf("the log shows the secret %q:\n%s", s, text)
		}
	}
}

func TestEndpointTestAnswers404ForUnknownEndpoints(t *testing.T) {
	t.Parallel()
	ts, _ := newCatalogServer(t, false, func(o *api.Options) {
		o.TestSendFunc = func(context.Context, courier.Delivery) courier.Result { return courier.Result{Status: 200} }
	})
	status, body, _ := ts.call(t, "POST", "/v1/endpoints/nope/test", "")
	wantError(t, status, body, http.StatusNotFound, courier.CodeNotFound, "nope")
}

func mustGet(t *testing.T, ts *testServer, path string) []byte {
	t.Helper()
	status, body, _ := ts.call(t, "GET", path, "")
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, status, body)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return body
}

type lockedWriter struct {
	b  *bytes.Buffer
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
