package main

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/sendertest"
	"github.com/courier-gw/courier/internal/testkit/testcert"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

func TestServeRefusesNonLoopbackWithoutKeys(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		t.Setenv("COURIER_LISTEN", listen)
		t.Setenv("COURIER_STORE_PATH", filepath.Join(t.TempDir(), "db"))
		_, _, err := runCLI(t, "", "serve")
		if err == nil {
			t.Fatalf("serve on %s without keys started", listen)
		}
		for _, want := range []string{"not a loopback address", "no API keys", "courier keys new"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("serve on %s: the error %q does not say %q", listen, err, want)
			}
		}
	}
}

func TestKeysNew(t *testing.T) {
	out, _, err := runCLI(t, "", "keys", "new", "erp", "--role", "sender", "--routes", "acme")
	if err != nil {
		t.Fatal(err)
	}
	var secret, line string
	for _, l := range strings.Split(out, "\n") {
		if s, ok := strings.CutPrefix(l, "secret (shown only now; give it to the caller): "); ok {
			secret = s
		}
		if strings.HasPrefix(l, "  erp: ") {
			line = l
		}
	}
	if !strings.HasPrefix(secret, secretPrefix) || len(secret) < 40 {
		t.Fatalf("secret %q", secret)
	}
	want := fmt.Sprintf(`  erp: {role: sender, hash: %q, routes: [acme]}`, api.HashSecret(secret))
	if line != want {
		t.Fatalf("config line %q, want %q", line, want)
	}
	again, _, _ := runCLI(t, "", "keys", "new", "erp", "--role", "sender")
	if strings.Contains(again, secret) {
		t.Error("two keys got the same secret")
	}
	for _, args := range [][]string{
		{"keys", "new", "erp", "--role", "root"},
		{"keys", "new", "bad name", "--role", "admin"},
		{"keys", "new", "ops", "--role", "operator", "--routes", "acme"},
		{"keys", "new", "erp"},
	} {
		if _, _, err := runCLI(t, "", args...); err == nil {
			t.Errorf("%v was accepted", args)
		}
	}
}

// With keys, courier serves beyond loopback; the command line sends its key
// from COURIER_API_KEY or --api-key, and the server takes the key's role.
func TestServeWithKeys(t *testing.T) {
	skipIfShort(t)
	port := strings.TrimPrefix(freeAddr(t), "127.0.0.1:")
	secrets := map[string]string{"erp": "erp-secret-1", "ops": "ops-secret-1", "root": "root-secret-1"}
	cfg := writeConfig(t, t.TempDir(), "0.0.0.0:"+port, fmt.Sprintf(`keys:
  erp: {role: sender, hash: %q, routes: [acme]}
  ops: {role: operator, hash: %q}
  root: {role: admin, hash: %q}
endpoints:
  acme: {transport: http, url: "http://127.0.0.1:9/inbox"}
routes:
  acme: {endpoints: [acme]}
`, api.HashSecret(secrets["erp"]), api.HashSecret(secrets["ops"]), api.HashSecret(secrets["root"])))
	p := startServerWith(t, cfg)
	server := "127.0.0.1:" + port

	_, _, err := runCLI(t, "", "--server", server, "messages", "list")
	if courier.ErrorCode(err) != courier.CodeUnauthenticated {
		t.Fatalf("messages list without a key: %v", err)
	}
	cliPrints(t, `{"n":1}`, []string{"--server", server, "--api-key", secrets["erp"], "send", "--type", "t", "--route", "acme", "--id", "k-1", "--deliver-after", "1h"},
		"created k-1")
	t.Setenv("COURIER_API_KEY", secrets["ops"])
	cliPrints(t, "", []string{"--server", server, "messages", "list"}, "k-1")
	_, _, err = runCLI(t, `{"n":1}`, "--server", server, "send", "--type", "t", "--route", "acme")
	if courier.ErrorCode(err) != courier.CodePermissionDenied {
		t.Fatalf("send as an operator: %v", err)
	}
	cliPrints(t, "", []string{"--server", server, "messages", "discard", "k-1"})
	cliPrints(t, "", []string{"--server", server, "endpoints", "off", "acme"})
	// Switching the endpoint off is recorded as done by ops.
	cliPrints(t, "", []string{"--server", server, "endpoints", "show", "acme", "-o", "json"}, `"who": "ops"`)
	if log := p.log(); strings.Contains(log, secrets["erp"]) || strings.Contains(log, secrets["ops"]) {
		t.Errorf("a secret is in the log:\n%s", log)
	}

	// Reload through the API is for admins.
	reload := func(secret string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+server+"/v1/reload", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := reload(secrets["ops"]); got != http.StatusForbidden {
		t.Errorf("reload as operator: %d, want 403", got)
	}
	if got := reload(secrets["root"]); got != http.StatusOK {
		t.Errorf("reload as admin: %d, want 200", got)
	}
	// A reload that would leave the open listener without keys is refused.
	body, _ := os.ReadFile(cfg)
	keyless := string(body[:strings.Index(string(body), "keys:")]) + string(body[strings.Index(string(body), "endpoints:"):])
	writeFile(t, cfg, keyless)
	if got := reload(secrets["root"]); got != http.StatusUnprocessableEntity {
		t.Errorf("reload without keys on 0.0.0.0: %d, want 422", got)
	}
	if got := reload(secrets["root"]); got == http.StatusUnauthorized {
		t.Error("the keys are gone after a refused reload")
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key, and
// returns the certificate.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	c := testcert.New(t, &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "courier test"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, nil)
	c.Write(t, certFile, keyFile)
	return c.Cert
}

// The listener serves TLS, and a renewed certificate is taken in on SIGHUP.
func TestServeTLSReloadsCertificate(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	first := writeCert(t, certFile, keyFile, 1)
	p := startNode(t, dir, fmt.Sprintf("tls: {cert: %s, key: %s}\n", certFile, keyFile))
	if !strings.HasPrefix(p.url, "https://") {
		t.Fatalf("listening on %s, want https", p.url)
	}
	serial := func() int64 {
		t.Helper()
		conn, err := tls.Dial("tcp", strings.TrimPrefix(p.url, "https://"), &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
	}
	if got := serial(); got != first.SerialNumber.Int64() {
		t.Fatalf("serial %d, want %d", got, first.SerialNumber.Int64())
	}
	roots := x509.NewCertPool()
	roots.AddCert(first)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := client.Get(p.url + "/healthz")
	if err != nil {
		t.Fatalf("healthz over TLS: %v", err)
	}
	resp.Body.Close()

	writeCert(t, certFile, keyFile, 2)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, p, 10*time.Second, "the renewed certificate taken in after SIGHUP", func() bool { return serial() == 2 })
}

// courier serve guards outbound connections by default: a message for an
// endpoint on loopback, without an allowlist, is suspended as rejected
// and the receiver never sees a connection.
func TestServeGuardsOutboundByDefault(t *testing.T) {
	skipIfShort(t)
	receiver, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer receiver.Close()
	// Not writeConfig: this node has the default outbound rules, with no
	// allowlist.
	dir := t.TempDir()
	cfg := filepath.Join(dir, "courier.yaml")
	writeFile(t, cfg, fmt.Sprintf(`listen: %s
store: {driver: sqlite, path: %s}
endpoints:
  internal: {transport: http, url: "http://%s/in"}
routes:
  internal: {endpoints: [internal]}
`, freeAddr(t), storePath(dir), receiver.Addr()))
	p := startServerWith(t, cfg)
	server := strings.TrimPrefix(p.url, "http://")
	if _, _, err := runCLI(t, `{"n":1}`, "--server", server, "send", "--type", "t", "--route", "internal", "--id", "g-1"); err != nil {
		t.Fatal(err)
	}
	m := waitForState(t, p, api.NewClient(server, ""), "g-1", courier.StateSuspended, time.Now().Add(10*time.Second))
	if m.Reason != courier.ReasonRejected || !strings.Contains(m.LastError, "SSRF guard") {
		t.Fatalf("suspended with %s: %s", m.Reason, m.LastError)
	}
	if !sendertest.Untouched(t, receiver) {
		t.Fatal("courier connected to the blocked receiver")
	}
}
