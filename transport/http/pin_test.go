package http_test

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/testcert"

	"github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// selfSigned returns a self-signed server certificate for dnsName only (not
// for 127.0.0.1, where the tests' receivers listen: a pin does not go by
// the host name), with its PEM.
func selfSigned(t *testing.T, dnsName string) (tls.Certificate, string) {
	t.Helper()
	c := testcert.New(t, &x509.Certificate{
		Subject:  pkix.Name{CommonName: dnsName},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{dnsName},
	}, nil)
	return tls.Certificate{Certificate: [][]byte{c.DER}, PrivateKey: c.Key}, string(c.PEM())
}

// pinnedServer is an HTTPS receiver that presents cert and counts the
// requests its handler ran for and the connections it accepted.
type pinnedServer struct {
	*httptest.Server
	requests, conns atomic.Int64
}

func newPinnedServer(t *testing.T, cert tls.Certificate) *pinnedServer {
	t.Helper()
	s := &pinnedServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// resolved is the endpoint a registry's answer stands for.
func resolved(url, pin string) *courier.Endpoint {
	e := endpoint(courier.ResolvedEndpointPrefix+url, url)
	httptransport.Of(e).PinnedCertificate = pin
	return e
}

// sha256Fingerprint is a certificate's fingerprint as openssl prints it.
func sha256Fingerprint(t *testing.T, pemText string) string {
	t.Helper()
	block, _ := pem.Decode([]byte(pemText))
	if block == nil {
		t.Fatal("not PEM")
	}
	sum := sha256.Sum256(block.Bytes)
	hexed := strings.ToUpper(hex.EncodeToString(sum[:]))
	pairs := make([]string, 0, len(sum))
	for i := 0; i < len(hexed); i += 2 {
		pairs = append(pairs, hexed[i:i+2])
	}
	return strings.Join(pairs, ":")
}

// A pinned certificate is the one the receiver must present, whatever CA
// signed it or names it: the pinned self-signed certificate is taken, any
// other is refused before a request is sent.
func TestPinnedCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	apCert, apPEM := selfSigned(t, "ap.example")
	_, strangerPEM := selfSigned(t, "ap.example") // same name, another key
	ap := newPinnedServer(t, apCert)

	// A receiver with a certificate from a CA the endpoint trusts.
	ca := newTestCA(t, "network CA")
	caCertPEM, caKeyPEM := issue(t, ca, "ap", x509.ExtKeyUsageServerAuth)
	pair, err := tls.X509KeyPair(caCertPEM, caKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	signed := newPinnedServer(t, pair)
	caFile := testcert.WriteFile(t, dir, "network-ca.pem", ca.PEM())

	tests := []struct {
		name    string
		srv     *pinnedServer
		pin     string
		ca      string
		class   courier.ErrorClass // empty: delivered
		errWant []string
	}{
		{name: "the pinned self-signed certificate", srv: ap, pin: apPEM},
		{name: "another certificate", srv: ap, pin: strangerPEM, class: courier.ClassTLS, errWant: []string{
			"the receiver's certificate is not the one the registry gave",
			"presented SHA-256 " + sha256Fingerprint(t, apPEM),
			"the registry gave SHA-256 " + sha256Fingerprint(t, strangerPEM),
		}},
		{name: "trusted CA without a pin", srv: signed, ca: caFile},
		{name: "trusted CA, another certificate pinned", srv: signed, pin: apPEM, ca: caFile, class: courier.ClassTLS, errWant: []string{
			"not the one the registry gave",
		}},
		{name: "trusted CA, its certificate pinned", srv: signed, pin: string(caCertPEM), ca: caFile},
		{name: "a pin that is not PEM", srv: ap, pin: "MIIB...", class: courier.ClassTLS, errWant: []string{"is not PEM"}},
		{name: "a pin that does not parse", srv: ap, pin: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
			class: courier.ClassTLS, errWant: []string{"does not parse"}},
		{name: "a pinned key", srv: ap, pin: string(caKeyPEM), class: courier.ClassTLS, errWant: []string{`PEM "EC PRIVATE KEY", not a CERTIFICATE`}},
		{name: "a pinned chain names the receiver first", srv: ap, pin: apPEM + string(ca.PEM())},
		{name: "a chain with the CA first", srv: ap, pin: string(ca.PEM()) + apPEM, class: courier.ClassTLS, errWant: []string{"not the one the registry gave"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTransport(t, httptransport.Options{})
			e := resolved(tt.srv.URL+"/as4", tt.pin)
			httptransport.Of(e).TLS.CA = tt.ca
			before := tt.srv.requests.Load()
			res := send(t, tr, e, message())
			ran := tt.srv.requests.Load() - before
			if tt.class == "" {
				if !res.Delivered() || res.Status != http.StatusAccepted {
					t.Fatalf("result = %+v, want delivered", res)
				}
				if ran != 1 {
					t.Fatalf("the handler ran %d times, want 1", ran)
				}
				return
			}
			wantClass(t, res, tt.class)
			for _, s := range tt.errWant {
				wantError(t, res, s)
			}
			if ran != 0 {
				t.Fatalf("the handler ran %d times, want none", ran)
			}
		})
	}
}

// A pin has nothing to check over plain HTTP: the attempt is refused
// before any connection.
func TestPinnedCertificateOverPlainHTTP(t *testing.T) {
	t.Parallel()
	ln, untouched := watchedListener(t, "tcp4", "127.0.0.1:0")
	_, pin := selfSigned(t, "ap.example")
	tr := newTransport(t, httptransport.Options{})
	res := send(t, tr, resolved("http://"+ln.Addr().String()+"/as4", pin), message())
	wantClass(t, res, courier.ClassTLS)
	wantError(t, res, "is not https")
	if !untouched() {
		t.Fatal("the transport connected to the receiver")
	}
}

// Endpoints with different pins never share a pool: a connection verified
// against one pin would otherwise serve an endpoint that pins another.
// Endpoints that pin the same certificate at the same receiver do.
func TestPinsDoNotSharePools(t *testing.T) {
	t.Parallel()
	apCert, apPEM := selfSigned(t, "ap.example")
	_, otherPEM := selfSigned(t, "ap.example")
	ap := newPinnedServer(t, apCert)
	url := ap.URL + "/as4"
	tr := newTransport(t, httptransport.Options{})

	// One resolved endpoint whose registry answer changes, then two
	// endpoints of their own at the same receiver.
	steps := []struct {
		name      string
		e         *courier.Endpoint
		delivered bool
	}{
		{"the right pin", resolved(url, apPEM), true},
		{"the right pin again", resolved(url, apPEM), true},
		{"the registry now gives another", resolved(url, otherPEM), false},
		{"and the right one again", resolved(url, apPEM), true},
		{"an endpoint pinning the right one", pinnedEndpoint("a", url, apPEM), true},
		{"an endpoint pinning another", pinnedEndpoint("b", url, otherPEM), false},
	}
	for _, st := range steps {
		res := send(t, tr, st.e, message())
		if st.delivered != res.Delivered() {
			t.Fatalf("%s: result %+v, want delivered %v", st.name, res, st.delivered)
		}
		if !st.delivered {
			wantClass(t, res, courier.ClassTLS)
		}
	}
	if got, want := ap.requests.Load(), int64(4); got != want {
		t.Fatalf("the handler ran %d times, want %d", got, want)
	}
	// The second send reused the first's connection; every change of pin
	// dialled anew; the endpoint pinning the same certificate as the
	// resolved one used its connection.
	if got, want := ap.conns.Load(), int64(4); got != want {
		t.Fatalf("the receiver accepted %d connections, want %d", got, want)
	}
}

func pinnedEndpoint(name, url, pin string) *courier.Endpoint {
	e := endpoint(name, url)
	httptransport.Of(e).PinnedCertificate = pin
	return e
}

// The pools of resolved endpoints are bounded: past MaxLookupPools the
// least recently used goes, with its connections; configured endpoints
// are not counted.
func TestLookupPoolsAreBounded(t *testing.T) {
	t.Parallel()
	sa, sb, sc, ss := sink.MustStart(t, sink.Options{}), sink.MustStart(t, sink.Options{}), sink.MustStart(t, sink.Options{}), sink.MustStart(t, sink.Options{})
	tr := newTransport(t, httptransport.Options{MaxLookupPools: 2})
	a, b, c := resolved(sa.URL()+"/a", ""), resolved(sb.URL()+"/b", ""), resolved(sc.URL()+"/c", "")
	static := endpoint("static", ss.URL()+"/static")

	steps := []struct {
		e     *courier.Endpoint
		conns [4]int // connections each sink (a, b, c, static) accepted so far
	}{
		{a, [4]int{1, 0, 0, 0}}, {static, [4]int{1, 0, 0, 1}}, {b, [4]int{1, 1, 0, 1}},
		{a, [4]int{1, 1, 0, 1}}, // a's pool is kept: two resolved pools
		{c, [4]int{1, 1, 1, 1}}, // evicts b, the least recently used
		{a, [4]int{1, 1, 1, 1}},
		{static, [4]int{1, 1, 1, 1}}, // configured endpoints are not evicted
		{b, [4]int{1, 2, 1, 1}},      // b dials anew
	}
	for i, st := range steps {
		if res := send(t, tr, st.e, message()); !res.Delivered() {
			t.Fatalf("step %d (%s): %+v", i, st.e.Name, res)
		}
		if got := [4]int{sa.Conns(), sb.Conns(), sc.Conns(), ss.Conns()}; got != st.conns {
			t.Fatalf("step %d (%s): connections %v, want %v", i, st.e.Name, got, st.conns)
		}
	}
}

// Endpoints alike in origin and settings share one pool: a thousand
// endpoints on one receiver, sent to in turn, use one kept-alive
// connection, not one each.
func TestEndpointsOnOneReceiverShareConnections(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	for i := 0; i < 1000; i++ {
		e := endpoint(fmt.Sprintf("ep-%d", i), fmt.Sprintf("%s/in/%d", s.URL(), i))
		if res := send(t, tr, e, message()); !res.Delivered() {
			t.Fatalf("endpoint %d: %+v", i, res)
		}
	}
	if got := s.Conns(); got != 1 {
		t.Fatalf("1000 endpoints on one receiver opened %d connections, want 1", got)
	}
}
