package main

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// An endpoint with OAuth2 client credentials and a secret header, in the
// store-held topology: `courier endpoints test` sends a sample with the
// token and the header and prints what the receiver answered; `endpoints
// show` tells the auth and the token's expiry; a token endpoint that is
// down fails the test with class auth and shows as the last failure; and no
// secret is in `courier get`, the audit or the server's log (at debug).
func TestEndpointsTestAndAuthSecrets(t *testing.T) {
	skipIfShort(t)
	secrets := []string{"client-s3cret", "hdr-s3cret", "basic-s3cret", "bearer-s3cret"}
	var mu sync.Mutex
	var got []http.Header
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if id, secret, _ := r.BasicAuth(); id != "courier" || secret != "client-s3cret" {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"tok-1","token_type":"Bearer","expires_in":3600}`)
	}))
	defer tokens.Close()
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Clone())
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprint(w, `{"queued":"job-17"}`)
	}))
	defer receiver.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/token"
	ln.Close()

	dir := t.TempDir()
	p := startNode(t, dir, "log: {level: debug}\nsecrets_key: "+base64.StdEncoding.EncodeToString(secretsKey(7))+"\n")
	file := filepath.Join(dir, "topology.yaml")
	writeFile(t, file, `endpoints:
  crm:
    transport: http
    url: `+receiver.URL+`/hook
    auth:
      oauth2: {token_url: "`+tokens.URL+`/token", client_id: courier, client_secret: client-s3cret, scopes: [orders]}
    headers:
      X-Api-Key: {secret: hdr-s3cret}
      X-Region: eu
  down:
    transport: http
    url: `+receiver.URL+`/down
    auth:
      oauth2: {token_url: "`+downURL+`", client_id: courier, client_secret: client-s3cret}
  basic: {transport: http, url: "`+receiver.URL+`/b", auth: {basic: {username: u, password: basic-s3cret}}}
  bearer: {transport: http, url: "`+receiver.URL+`/c", auth: {bearer: bearer-s3cret}}
routes:
  crm: {endpoints: [crm]}
`)
	binaryPrints(t, "", []string{"--server", p.url, "apply", "-f", file}, "changed")

	out := binaryPrints(t, "", []string{"--server", p.url, "endpoints", "test", "crm"},
		"delivered", "202", `{"queued":"job-17"}`, "Took", "test-")
	mu.Lock()
	h := got[0]
	mu.Unlock()
	if h.Get("Authorization") != "Bearer tok-1" || h.Get("X-Api-Key") != "hdr-s3cret" || h.Get("X-Region") != "eu" {
		t.Fatalf("the receiver got %v\n%s", h, out)
	}
	binaryPrints(t, "", []string{"--server", p.url, "endpoints", "show", "crm"}, "oauth2", "Token expires")

	errOut := binaryFails(t, nil, "", []string{"--server", p.url, "endpoints", "test", "down"}, "the receiver did not take the test message")
	out, _, _ = runBinary(t, nil, "", "--server", p.url, "endpoints", "test", "down")
	if !strings.Contains(out, "failed (auth)") || !strings.Contains(out, "token endpoint") {
		t.Fatalf("endpoints test down printed:\n%s%s", out, errOut)
	}
	binaryPrints(t, "", []string{"--server", p.url, "endpoints", "show", "down"}, "oauth2", "Auth failure", "token endpoint")
	binaryPrints(t, "", []string{"--server", p.url, "endpoints", "test", "basic"}, "delivered")
	binaryPrints(t, "", []string{"--server", p.url, "endpoints", "test", "bearer"}, "delivered")

	// A header courier sets is refused, naming the field.
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, "endpoints:\n  bad: {transport: http, url: https://a.example/, headers: {Courier-Attempt: '9'}}\n")
	binaryFails(t, nil, "", []string{"--server", p.url, "apply", "-f", bad},
		"endpoints.bad.headers.Courier-Attempt: Courier-Attempt is set by courier itself")

	var shown strings.Builder
	for _, args := range [][]string{{"get", "endpoints"}, {"get", "endpoint", "crm"}, {"get", "topology"},
		{"--output", "json", "get", "endpoint", "crm"}, {"--output", "json", "endpoints", "show", "crm"}, {"audit"}, {"--output", "json", "audit"}} {
		shown.WriteString(binaryPrints(t, "", append([]string{"--server", p.url}, args...)))
	}
	if !strings.Contains(shown.String(), "set") {
		t.Fatalf("courier get shows no secret as set:\n%s", shown.String())
	}
	for _, s := range secrets {
		if strings.Contains(shown.String(), s) {
			t.Errorf("courier get or audit shows %q:\n%s", s, shown.String())
		}
		if strings.Contains(p.log(), s) {
			t.Errorf("the server's log shows %q:\n%s", s, p.log())
		}
	}
}
