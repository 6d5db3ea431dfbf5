package http_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/courier-gw/courier/internal/testkit/testcert"

	"github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// newTestCA makes a certificate authority for one test.
func newTestCA(t *testing.T, name string) *testcert.Cert {
	t.Helper()
	c := testcert.New(t, &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}, nil)
	return c
}

// issue returns a certificate signed by the CA, as PEM certificate and key.
func issue(t *testing.T, ca *testcert.Cert, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	t.Helper()
	c := testcert.New(t, &x509.Certificate{
		Subject:  pkix.Name{CommonName: cn},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}, ca)
	return c.PEM(), c.KeyPEM(t)
}

// A receiver that requires a client certificate (a PEPPOL access point)
// takes the endpoint's certificate, and the endpoint trusts the receiver
// through its own CA bundle.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA := newTestCA(t, "receiver CA"), newTestCA(t, "sender CA")
	srvCert, srvKey := issue(t, serverCA, "receiver", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := issue(t, clientCA, "courier at acme", x509.ExtKeyUsageClientAuth)
	otherCert, otherKey := issue(t, newTestCA(t, "stranger CA"), "stranger", x509.ExtKeyUsageClientAuth)

	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(clientCA.Cert)
	seen := make(chan string, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.TLS.PeerCertificates[0].Subject.CommonName
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	files := httptransport.TLS{
		Cert: testcert.WriteFile(t, dir, "client.crt", cliCert),
		Key:  testcert.WriteFile(t, dir, "client.key", cliKey),
		CA:   testcert.WriteFile(t, dir, "receiver-ca.pem", serverCA.PEM()),
	}
	tr := newTransport(t, httptransport.Options{})

	e := endpoint("peppol", srv.URL+"/as4")
	httptransport.Of(e).TLS = files
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("with the client certificate: %+v", res)
	}
	if cn := <-seen; cn != "courier at acme" {
		t.Fatalf("the receiver saw client certificate %q", cn)
	}

	// A file far larger than any certificate: a wrong path, say a log.
	huge := testcert.WriteFile(t, dir, "huge.pem", bytes.Repeat([]byte("not a certificate\n"), 100_000))
	tests := []struct {
		name  string
		files httptransport.TLS
		want  string
	}{
		{"no client certificate", httptransport.TLS{CA: files.CA}, ""},
		{"a certificate the receiver does not trust", httptransport.TLS{
			Cert: testcert.WriteFile(t, dir, "other.crt", otherCert), Key: testcert.WriteFile(t, dir, "other.key", otherKey), CA: files.CA}, ""},
		{"no CA bundle", httptransport.TLS{Cert: files.Cert, Key: files.Key}, "unknown authority"},
		{"a missing key file", httptransport.TLS{Cert: files.Cert, Key: filepath.Join(dir, "missing.key"), CA: files.CA}, "missing.key"},
		{"a key that does not match", httptransport.TLS{Cert: files.Cert, Key: testcert.WriteFile(t, dir, "wrong.key", otherKey), CA: files.CA}, "does not match"},
		{"a CA file without certificates", httptransport.TLS{CA: testcert.WriteFile(t, dir, "empty.pem", []byte("nothing"))}, "no PEM certificate"},
		{"a CA file too large", httptransport.TLS{CA: huge}, "cannot read the CA bundle: " + huge + ": larger than 1 MiB"},
		{"a key file too large", httptransport.TLS{Cert: files.Cert, Key: huge, CA: files.CA}, huge + ": larger than 1 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := endpoint("peppol-"+tt.name, srv.URL+"/as4")
			httptransport.Of(e).TLS = tt.files
			res := send(t, tr, e, message())
			wantClass(t, res, courier.ClassTLS)
			wantError(t, res, tt.want)
			if len(seen) > 0 {
				t.Fatalf("the receiver took a request from %q", <-seen)
			}
		})
	}
}
