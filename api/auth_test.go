package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	httptransport "github.com/courier-gw/courier/transport/http"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/httpcheck"
)

// The secrets of the test keys, by key name.
var testSecrets = map[string]string{
	"erp":     "secret-of-erp",
	"shop":    "secret-of-shop",
	"limited": "secret-of-limited",
	"ops":     "secret-of-ops",
	"root":    "secret-of-root",
}

func testKeys(t *testing.T) []api.Key {
	t.Helper()
	mk := func(name string, role courier.Role, routes ...string) api.Key {
		h, err := api.ParseKeyHash(api.HashSecret(testSecrets[name]))
		if err != nil {
			t.Fatal(err)
		}
		return api.Key{Name: name, Role: role, Hash: h, Routes: routes}
	}
	return []api.Key{
		mk("erp", courier.RoleSender),
		mk("shop", courier.RoleSender),
		mk("limited", courier.RoleSender, "globex"),
		mk("ops", courier.RoleOperator),
		mk("root", courier.RoleAdmin),
	}
}

// callAs sends a request with the secret of the named key ("" for none).
func (ts *testServer) callAs(t *testing.T, key, method, path, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		secret, ok := testSecrets[key]
		if !ok {
			secret = key // a made-up secret
		}
		req.Header.Set("Authorization", "Bearer "+secret)
	}
	return ts.send(t, req)
}

// send sends req to the server and reads the whole answer: its status,
// body and headers.
func (ts *testServer) send(t *testing.T, req *http.Request) (int, []byte, http.Header) {
	t.Helper()
	return httpcheck.Do(t, ts.Client(), req)
}

func newKeyedServer(t *testing.T, mutate ...func(*api.Options)) *testServer {
	t.Helper()
	return newTestServer(t, append([]func(*api.Options){func(o *api.Options) {
		o.Keys = testKeys(t)
		o.ReloadFunc = func(context.Context) error { return nil }
	}}, mutate...)...)
}

// TestRoleTable checks every role against every endpoint of the API: the
// roles that may get the handler's answer, the others 403 permission_denied.
func TestRoleTable(t *testing.T) {
	ts := newKeyedServer(t)
	// m-1 belongs to erp, so that every reader finds it.
	if status, body, _ := ts.callAs(t, "erp", "PUT", "/v1/messages/m-1", invoiceBody); status != 201 {
		t.Fatalf("setup: %d %s", status, body)
	}
	const (
		sender   = "sender"
		operator = "operator"
		admin    = "admin"
	)
	roleKey := map[string]string{sender: "erp", operator: "ops", admin: "root"}
	tests := []struct {
		method, path, body string
		allowed            []string
		want               int // the status of an allowed role
	}{
		{"PUT", "/v1/messages/{role}-put", invoiceBody, []string{sender, admin}, 201},
		{"POST", "/v1/messages", invoiceBody, []string{sender, admin}, 201},
		{"POST", "/v1/messages/batch", `{"messages":[` + invoiceBody + `]}`, []string{sender, admin}, 200},
		{"GET", "/v1/messages", "", []string{sender, operator, admin}, 200},
		{"GET", "/v1/messages/m-1", "", []string{sender, operator, admin}, 200},
		{"GET", "/v1/messages/m-1/attempts", "", []string{sender, operator, admin}, 200},
		{"POST", "/v1/messages/m-1/resubmit", "", []string{operator, admin}, 409},
		{"POST", "/v1/messages/nope/discard", "", []string{operator, admin}, 404},
		{"POST", "/v1/messages/resubmit", `{}`, []string{operator, admin}, 501},
		{"POST", "/v1/messages/discard", `{}`, []string{operator, admin}, 501},
		{"GET", "/v1/operations/nope", "", []string{operator, admin}, 404},
		{"GET", "/v1/endpoints", "", []string{operator, admin}, 200},
		{"GET", "/v1/endpoints/nope", "", []string{operator, admin}, 404},
		{"POST", "/v1/endpoints/nope/off", "", []string{operator, admin}, 404},
		{"POST", "/v1/endpoints/nope/on", "", []string{operator, admin}, 404},
		{"POST", "/v1/reload", "", []string{admin}, 200},
		{"GET", "/v1/stats", "", []string{operator, admin}, 200},
		{"GET", "/v1/routes", "", []string{operator, admin}, 200},
		{"GET", "/metrics", "", []string{operator, admin}, 404},
		{"GET", "/healthz", "", []string{sender, operator, admin}, 200},
		{"GET", "/readyz", "", []string{sender, operator, admin}, 200},
	}
	for _, tt := range tests {
		for _, role := range []string{sender, operator, admin} {
			path := strings.ReplaceAll(tt.path, "{role}", role)
			status, body, _ := ts.callAs(t, roleKey[role], tt.method, path, tt.body)
			allowed := false
			for _, a := range tt.allowed {
				allowed = allowed || a == role
			}
			if !allowed {
				wantError(t, status, body, 403, courier.CodePermissionDenied, roleKey[role])
				continue
			}
			if status != tt.want {
				t.Errorf("%s %s as %s: status %d, want %d; body %s", tt.method, path, role, status, tt.want, body)
			}
		}
	}
}

func TestUnauthenticated(t *testing.T) {
	ts := newKeyedServer(t)
	tests := []struct {
		name, header, in string
	}{
		{"no key", "", "requires an API key"},
		{"unknown key", "Bearer not-a-key", "not valid"},
		{"other scheme", "Basic " + testSecrets["erp"], "Bearer"},
		{"empty bearer", "Bearer ", "Bearer"},
	}
	for _, tt := range tests {
		for _, path := range []string{"/v1/messages", "/v1/messages/m-1", "/v2/unknown"} {
			req, _ := http.NewRequest("GET", ts.URL+path, nil)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			status, body, header := ts.send(t, req)
			t.Run(tt.name+path, func(t *testing.T) {
				wantError(t, status, body, 401, courier.CodeUnauthenticated, tt.in)
				if got := header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate %q", got)
				}
				if strings.Contains(string(body), testSecrets["erp"]) {
					t.Errorf("the answer repeats the secret: %s", body)
				}
			})
		}
	}
	// The probes need no key.
	for _, path := range []string{"/healthz", "/readyz"} {
		if status, body, _ := ts.call(t, "GET", path, ""); status != 200 {
			t.Errorf("%s without a key: %d %s", path, status, body)
		}
	}
}

func TestSenderRoutesAndOwnMessages(t *testing.T) {
	ts := newKeyedServer(t)
	globex := strings.Replace(invoiceBody, `"acme"`, `"globex"`, 1)

	status, body, _ := ts.callAs(t, "limited", "PUT", "/v1/messages/l-1", invoiceBody)
	wantError(t, status, body, 403, courier.CodePermissionDenied, `route "acme"`)
	if status, body, _ := ts.callAs(t, "limited", "PUT", "/v1/messages/l-1", globex); status != 201 {
		t.Fatalf("limited key to its route: %d %s", status, body)
	}
	status, body, _ = ts.callAs(t, "limited", "POST", "/v1/messages/batch", `{"messages":[`+invoiceBody+`,`+globex+`]}`)
	res := decode[api.BatchResponse](t, body)
	if status != 200 || len(res.Results) != 2 || res.Results[0].Status != 403 || res.Results[0].Error.Code != courier.CodePermissionDenied || res.Results[1].Status != 201 {
		t.Fatalf("batch of a limited key: %d %s", status, body)
	}

	// Each sender sees its own messages only; others' are not found.
	if status, body, _ := ts.callAs(t, "erp", "PUT", "/v1/messages/e-1", invoiceBody); status != 201 {
		t.Fatalf("erp ingest: %d %s", status, body)
	}
	for _, path := range []string{"/v1/messages/e-1", "/v1/messages/e-1/attempts"} {
		status, body, _ := ts.callAs(t, "shop", "GET", path, "")
		wantError(t, status, body, 404, courier.CodeNotFound, "e-1")
		if status, body, _ := ts.callAs(t, "erp", "GET", path, ""); status != 200 {
			t.Errorf("erp reads %s: %d %s", path, status, body)
		}
		if status, body, _ := ts.callAs(t, "ops", "GET", path, ""); status != 200 {
			t.Errorf("ops reads %s: %d %s", path, status, body)
		}
	}
	listIDs := func(key, query string) []string {
		t.Helper()
		status, body, _ := ts.callAs(t, key, "GET", "/v1/messages"+query, "")
		if status != 200 {
			t.Fatalf("list as %s: %d %s", key, status, body)
		}
		var ids []string
		for _, m := range decode[api.MessageList](t, body).Messages {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got := fmt.Sprint(listIDs("erp", "")); got != "[e-1]" {
		t.Errorf("erp lists %s, want [e-1]", got)
	}
	if got := len(listIDs("ops", "")); got != 3 {
		t.Errorf("ops lists %d messages, want 3", got)
	}
	// Compared whole: the other message of limited has a generated id,
	// which may hold "e-1" within it.
	if got := listIDs("ops", "?sender=limited"); !slices.Contains(got, "l-1") || slices.Contains(got, "e-1") {
		t.Errorf("ops lists sender=limited: %v", got)
	}
	status, body, _ = ts.callAs(t, "erp", "GET", "/v1/messages?sender=shop", "")
	wantError(t, status, body, 403, courier.CodePermissionDenied, "own")

	// The same id from another key is not the same message, and says
	// nothing about the other's.
	status, body, _ = ts.callAs(t, "shop", "PUT", "/v1/messages/e-1", invoiceBody)
	wantError(t, status, body, 409, courier.CodeConflict, "e-1")
	if status, _, _ := ts.callAs(t, "erp", "PUT", "/v1/messages/e-1", invoiceBody); status != 200 {
		t.Errorf("erp repeats its own message: %d", status)
	}
}

// The key's name is who of an operator action.
func TestActionsRecordTheKey(t *testing.T) {
	ts := newKeyedServer(t)
	suspendMessage(t, ts.store, "s-1", "invoice", courier.ReasonRejected)
	if status, body, _ := ts.callAs(t, "ops", "POST", "/v1/messages/s-1/discard", ""); status != 200 {
		t.Fatalf("discard: %d %s", status, body)
	}
	actions, err := ts.store.Actions(context.Background(), "s-1")
	if err != nil || len(actions) != 1 || actions[0].Who != "ops" {
		t.Fatalf("actions %+v, %v; want one by ops", actions, err)
	}
}

func TestRateLimit(t *testing.T) {
	clock := clocktest.New(time.Now())
	ts := newKeyedServer(t, func(o *api.Options) {
		o.Clock = clock
		for i := range o.Keys {
			if o.Keys[i].Name == "erp" {
				o.Keys[i].Rate = courier.Rate{N: 3, Per: time.Minute}
			}
		}
	})
	for i := 0; i < 3; i++ {
		if status, body, _ := ts.callAs(t, "erp", "POST", "/v1/messages", invoiceBody); status != 201 {
			t.Fatalf("message %d within the rate: %d %s", i, status, body)
		}
	}
	status, body, hdr := ts.callAs(t, "erp", "POST", "/v1/messages", invoiceBody)
	wantError(t, status, body, 429, courier.CodeRateLimited, "3/m")
	if got := hdr.Get("Retry-After"); got != "20" {
		t.Errorf("Retry-After %q, want 20 (one message per 20 s)", got)
	}
	// Another key is not limited by erp's rate.
	if status, _, _ := ts.callAs(t, "shop", "POST", "/v1/messages", invoiceBody); status != 201 {
		t.Errorf("shop while erp is limited: %d", status)
	}
	clock.Advance(20 * time.Second)
	if status, body, _ := ts.callAs(t, "erp", "POST", "/v1/messages", invoiceBody); status != 201 {
		t.Fatalf("after the wait: %d %s", status, body)
	}
	// A batch takes a token per message.
	clock.Advance(time.Minute)
	batch := `{"messages":[` + invoiceBody + `,` + invoiceBody + `,` + invoiceBody + `,` + invoiceBody + `]}`
	if status, body, _ := ts.callAs(t, "erp", "POST", "/v1/messages/batch", batch); status != 200 {
		t.Fatalf("batch: %d %s", status, body)
	}
	status, body, _ = ts.callAs(t, "erp", "POST", "/v1/messages/batch", batch)
	wantError(t, status, body, 429, courier.CodeRateLimited, "erp")
}

func TestSuspendedCap(t *testing.T) {
	ts := newKeyedServer(t, func(o *api.Options) {
		for i := range o.Keys {
			if o.Keys[i].Name == "erp" {
				o.Keys[i].MaxSuspended = 2
			}
		}
	})
	suspend := func(id string) {
		t.Helper()
		if status, body, _ := ts.callAs(t, "erp", "PUT", "/v1/messages/"+id, invoiceBody); status != 201 {
			t.Fatalf("ingest %s: %d %s", id, status, body)
		}
		// Suspended as the engine would after a permanent failure.
		m, err := ts.store.Message(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		next := *m
		next.State, next.Reason, next.FinishedAt, next.NextAttemptAt = courier.StateSuspended, courier.ReasonRejected, time.Now(), time.Time{}
		applied, err := ts.store.Apply(context.Background(), []courier.Change{{Message: &next, From: courier.StateQueued, Token: m.TotalAttempts}})
		if err != nil || !applied[0] {
			t.Fatalf("suspend %s: %v %v", id, applied, err)
		}
	}
	suspend("c-1")
	suspend("c-2")
	status, body, hdr := ts.callAs(t, "erp", "PUT", "/v1/messages/c-3", invoiceBody)
	wantError(t, status, body, 429, courier.CodeRateLimited, "2 suspended messages")
	if hdr.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	status, body, _ = ts.callAs(t, "erp", "POST", "/v1/messages/batch", `{"messages":[`+invoiceBody+`]}`)
	wantError(t, status, body, 429, courier.CodeRateLimited, "max_suspended")
	// Other keys go on.
	if status, _, _ := ts.callAs(t, "shop", "PUT", "/v1/messages/s-3", invoiceBody); status != 201 {
		t.Errorf("shop while erp is full: %d", status)
	}
	// An operator discards one; erp may send again.
	if status, body, _ := ts.callAs(t, "ops", "POST", "/v1/messages/c-1/discard", ""); status != 200 {
		t.Fatalf("discard: %d %s", status, body)
	}
	if status, body, _ := ts.callAs(t, "erp", "PUT", "/v1/messages/c-3", invoiceBody); status != 201 {
		t.Errorf("erp after the discard: %d %s", status, body)
	}
}

// TestKeylessRefusesOtherSites: without keys (loopback only), a request
// that names another host (DNS rebinding) is refused, and so is a change
// asked for by a page of another origin; the CLI's requests, reads and the
// probes go through.
func TestKeylessRefusesOtherSites(t *testing.T) {
	good := courier.NewEndpoint("good", courier.TransportHTTP)
	httptransport.Of(good).URL = "https://good.example/in"
	ts := newTestServer(t, func(o *api.Options) {
		o.Topology.Endpoints = map[string]*courier.Endpoint{"good": good}
	})
	port := ts.URL[strings.LastIndex(ts.URL, ":"):]
	for _, tt := range []struct {
		name    string
		method  string
		path    string
		host    string
		headers map[string]string
		status  int
		in      string
	}{
		{"a form from another site", "POST", "/v1/endpoints/good/off", "", map[string]string{
			"Origin": "https://evil.example", "Content-Type": "application/x-www-form-urlencoded"}, 403, "another origin"},
		{"a fetch the browser calls cross-site", "POST", "/v1/endpoints/good/off", "", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "cross-site"},
		{"another port of localhost", "POST", "/v1/endpoints/good/off", "", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, "same-site"},
		{"a sandboxed page", "POST", "/v1/endpoints/good/off", "", map[string]string{"Origin": "null"}, 403, "another origin"},
		{"a rebound name", "POST", "/v1/endpoints/good/off", "evil.example" + port, nil, 403, "loopback"},
		{"a rebound name, reading", "GET", "/v1/endpoints", "evil.example" + port, nil, 403, "loopback"},
		{"a rebound name, unknown path", "GET", "/v1/nowhere", "evil.example", nil, 403, "loopback"},
		{"a probe by any name", "GET", "/healthz", "evil.example", nil, 200, ""},
		{"a readiness probe by any name", "GET", "/readyz", "evil.example", nil, 200, ""},
		{"a read from another site", "GET", "/v1/endpoints", "", map[string]string{"Origin": "https://evil.example"}, 200, ""},
		{"the CLI", "POST", "/v1/endpoints/good/on", "", nil, 200, ""},
		{"the CLI at localhost", "POST", "/v1/endpoints/good/on", "localhost" + port, nil, 200, ""},
		{"a page of this server", "POST", "/v1/endpoints/good/on", "", map[string]string{
			"Origin": ts.URL, "Sec-Fetch-Site": "same-origin"}, 200, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(""))
			if err != nil {
				t.Fatal(err)
			}
			if tt.host != "" {
				req.Host = tt.host
			}
			for k, v := range tt.headers {
				req.Header.Set(k, v)
			}
			status, body, _ := ts.send(t, req)
			if tt.status != 200 {
				wantError(t, status, body, tt.status, courier.CodePermissionDenied, tt.in)
			} else if status != 200 {
				t.Errorf("status %d, want 200: %s", status, body)
			}
		})
	}
	h, err := ts.store.Health(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, eh := range h {
		if eh.Endpoint == "good" && eh.State != courier.HealthActive {
			t.Errorf("good is %s after the refused requests, want active", eh.State)
		}
	}
	acts, _ := ts.store.Actions(context.Background(), "good")
	for _, a := range acts {
		if a.Kind == courier.ActionEndpointOff {
			t.Errorf("a refused request switched good off: %+v", a)
		}
	}
}

// TestKeyedIgnoresOrigin: with keys, a bearer token is what counts; the
// browser cannot send one across sites.
func TestKeyedIgnoresOrigin(t *testing.T) {
	ts := newKeyedServer(t)
	req, _ := http.NewRequest("GET", ts.URL+"/v1/stats", nil)
	req.Host = "courier.example.org"
	req.Header.Set("Authorization", "Bearer "+testSecrets["ops"])
	req.Header.Set("Origin", "https://elsewhere.example")
	if status, _, _ := httpcheck.Do(t, ts.Client(), req); status != 200 {
		t.Errorf("with a key by another host name: %d", status)
	}
}

func TestLoopbackHost(t *testing.T) {
	for _, tt := range []struct {
		host string
		want bool
	}{
		{"127.0.0.1:8425", true}, {"127.0.0.1", true}, {"127.1.2.3:80", true}, {"[::1]:8425", true}, {"::1", true},
		{"localhost:8425", true}, {"LOCALHOST", true},
		{"evil.example", false}, {"evil.example:8425", false}, {"localhost.evil.example", false}, {"10.0.0.1:8425", false},
		{"", false}, {"127.0.0.1.evil.example", false},
	} {
		if got := api.LoopbackHost(&http.Request{Host: tt.host}); got != tt.want {
			t.Errorf("LoopbackHost(%q) = %v, want %v", tt.host, got, tt.want)
		}
	}
}
