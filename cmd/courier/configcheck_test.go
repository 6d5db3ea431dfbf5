package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// config check loads the listener's certificate and key as serve does, so
// that a pair serve could not use fails the check.
func TestConfigCheckLoadsTheListenerCertificate(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	writeCert(t, certFile, keyFile, 1)
	otherCert, otherKey := filepath.Join(dir, "other.crt"), filepath.Join(dir, "other.key")
	writeCert(t, otherCert, otherKey, 2)
	notPEM := filepath.Join(dir, "notes.txt")
	os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600)
	huge := filepath.Join(dir, "huge.crt")
	os.WriteFile(huge, []byte(strings.Repeat("not a certificate\n", 100_000)), 0o600)

	check := func(cert, key string) (stdout, stderr string, err error) {
		t.Helper()
		file := filepath.Join(dir, "courier.yaml")
		os.WriteFile(file, []byte(fmt.Sprintf("listen: 127.0.0.1:8425\ntls: {cert: %s, key: %s}\n", cert, key)), 0o600)
		return runCLI(t, "", "config", "check", file)
	}

	out, errOut, err := check(certFile, keyFile)
	if err != nil || !strings.Contains(out, "is valid") {
		t.Fatalf("a good pair: %q %q %v", out, errOut, err)
	}
	for _, tc := range []struct {
		name, cert, key string
		want            []string
	}{
		{"key of another certificate", certFile, otherKey, []string{"courier.yaml: tls:", certFile, "private key does not match"}},
		{"missing key", certFile, filepath.Join(dir, "missing.key"), []string{"missing.key: no such file or directory"}},
		{"certificate not PEM", notPEM, keyFile, []string{notPEM, "PEM"}},
		{"certificate too large", huge, keyFile, []string{huge + ": larger than 1 MiB"}},
	} {
		out, errOut, err := check(tc.cert, tc.key)
		if err == nil || strings.Contains(out, "is valid") {
			t.Errorf("%s: the check passed: %q", tc.name, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%s: the error %q does not say %q", tc.name, errOut, w)
			}
		}
	}
}

// config check counts the objects the file writes, each with its noun in
// the singular for one: the built-in default policy is not the file's.
func TestConfigCheckCounts(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "courier.yaml")
	writeFile(t, file, `endpoints:
  acme: {transport: file, dir: out}
routes:
  acme: {endpoints: [acme]}
  globex: {endpoints: [acme]}
policies:
  invoice: {max_attempts: 3}
`)
	binaryPrints(t, "", []string{"config", "check", file},
		file+" is valid: 1 endpoint, 2 routes, 1 policy, 0 subscriptions, 0 keys")
}
