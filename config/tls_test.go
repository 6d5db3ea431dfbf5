package config

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	httptransport "github.com/courier-gw/courier/transport/http"

	"github.com/courier-gw/courier/internal/testkit/testcert"
)

// selfSigned writes a certificate and its key into dir and returns their
// paths.
func selfSigned(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	c := testcert.New(t, &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}}, nil)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	c.Write(t, certFile, keyFile)
	return certFile, keyFile
}

func TestEndpointTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := selfSigned(t, dir, "client")
	ca, otherKey := selfSigned(t, dir, "ca")
	endpointWith := func(tls string) string {
		return lines("endpoints:", "  peppol:", "    transport: http", "    url: https://ap.example/as4", "    tls: "+tls)
	}
	c := mustParse(t, endpointWith("{cert: "+cert+", key: "+key+", ca: "+ca+"}"), nil)
	if got, want := httptransport.Of(c.Topology.Endpoints["peppol"]).TLS, (httptransport.TLS{Cert: cert, Key: key, CA: ca}); got != want {
		t.Fatalf("TLS = %+v, want %+v", got, want)
	}
	c = mustParse(t, endpointWith("{ca: "+ca+"}"), nil)
	if got := httptransport.Of(c.Topology.Endpoints["peppol"]).TLS; got.CA != ca || got.Cert != "" {
		t.Fatalf("CA only: %+v", got)
	}

	keyPEM, _ := os.ReadFile(key)
	// A file far larger than any certificate: a wrong path, say a log.
	huge := filepath.Join(dir, "huge.pem")
	os.WriteFile(huge, []byte(strings.Repeat("not a certificate\n", 100_000)), 0o600)
	tests := []struct {
		name, tls, want string
	}{
		{"cert without key", "{cert: " + cert + "}", "c.yaml:5: endpoints.peppol.tls.key: required when tls.cert is set"},
		{"key without cert", "{key: " + key + "}", "c.yaml:5: endpoints.peppol.tls.cert: required when tls.key is set"},
		{"missing file", "{cert: " + cert + ", key: " + dir + "/nope.key}", "nope.key: no such file or directory"},
		{"key of another certificate", "{cert: " + cert + ", key: " + otherKey + "}", "the private key does not match the certificate"},
		{"CA not PEM", "{ca: " + key + "}", "holds no PEM certificate"},
		{"CA missing", "{ca: " + dir + "/nope.pem}", "cannot read the CA bundle"},
		{"certificate too large", "{cert: " + huge + ", key: " + key + "}", "c.yaml:5: endpoints.peppol.tls.cert: cannot load the client certificate with key " + key + ": " + huge + ": larger than 1 MiB"},
		{"key too large", "{cert: " + cert + ", key: " + huge + "}", huge + ": larger than 1 MiB"},
		{"CA too large", "{ca: " + huge + "}", "c.yaml:5: endpoints.peppol.tls.ca: cannot read the CA bundle: " + huge + ": larger than 1 MiB"},
		{"unknown field", "{cert: " + cert + ", key: " + key + ", password: x}", "endpoints.peppol.tls.password: unknown field"},
	}
	for _, tt := range tests {
		_, err := Parse("c.yaml", []byte(endpointWith(tt.tls)), nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), strings.TrimSpace(string(keyPEM))[30:60]) {
			t.Errorf("%s: the error quotes the key file: %v", tt.name, err)
		}
	}
}
