package http_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/tinyproxy"
	httptransport "github.com/courier-gw/courier/transport/http"
)

const proxyOut = tinyproxy.Out

// proxied is what a receiver saw of the requests it got.
type proxied struct {
	mu      sync.Mutex
	remotes []string
	headers []http.Header
}

func (s *proxied) handler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	host, _, _ := net.SplitHostPort(r.RemoteAddr)
	s.remotes = append(s.remotes, host)
	s.headers = append(s.headers, r.Header.Clone())
	s.mu.Unlock()
}

func (s *proxied) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.remotes)
}

func (s *proxied) last() (string, http.Header) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.remotes[len(s.remotes)-1], s.headers[len(s.headers)-1]
}

func withProxy(e *courier.Endpoint, proxy string) *courier.Endpoint {
	e.Settings.(*httptransport.Settings).Egress.Proxy = proxy
	return e
}

// TestProxyPlainHTTP: an http receiver behind the server's default proxy
// and behind an endpoint's own gets its requests from the proxy, as they
// would come straight (signed, with courier's headers).
func TestProxyPlainHTTP(t *testing.T) {
	proxy := tinyproxy.Start(t).Addr
	var got proxied
	srv := httptest.NewServer(http.HandlerFunc(got.handler))
	defer srv.Close()

	tr := newTransport(t, httptransport.Options{})
	e := endpoint("direct", srv.URL)
	e.Settings.(*httptransport.Settings).Secrets = []string{"s3cret"}
	wantClass(t, send(t, tr, e, message()), "")
	if remote, _ := got.last(); remote != "127.0.0.1" {
		t.Fatalf("without a proxy the request came from %s, want 127.0.0.1", remote)
	}

	tr.SetProxy("http://" + proxy)
	wantClass(t, send(t, tr, e, message()), "")
	remote, h := got.last()
	if remote != proxyOut {
		t.Fatalf("behind the default proxy the request came from %s, want the proxy's %s", remote, proxyOut)
	}
	if h.Get("webhook-signature") == "" || h.Get("Courier-Type") != "invoice" {
		t.Fatalf("the request lost courier's headers on the way: %v", h)
	}

	tr.SetProxy("")
	wantClass(t, send(t, tr, e, message()), "")
	if remote, _ := got.last(); remote != "127.0.0.1" {
		t.Fatalf("with the default proxy gone the request came from %s, want 127.0.0.1", remote)
	}

	own := withProxy(endpoint("own", srv.URL), "http://"+proxy)
	wantClass(t, send(t, tr, own, message()), "")
	if remote, _ := got.last(); remote != proxyOut {
		t.Fatalf("behind the endpoint's proxy the request came from %s, want %s", remote, proxyOut)
	}
}

// TestProxyHTTPS: an https receiver is reached through a CONNECT tunnel,
// the TLS session end to end with the receiver.
func TestProxyHTTPS(t *testing.T) {
	tp := tinyproxy.Start(t)
	proxy := tp.Addr
	var got proxied
	srv := httptest.NewTLSServer(http.HandlerFunc(got.handler))
	defer srv.Close()
	roots := x509.NewCertPool()
	roots.AddCert(srv.Certificate())

	tr := newTransport(t, httptransport.Options{TLSConfig: &tls.Config{RootCAs: roots}})
	e := withProxy(endpoint("tls", srv.URL), "http://"+proxy)
	wantClass(t, send(t, tr, e, message()), "")
	if remote, _ := got.last(); remote != proxyOut {
		t.Fatalf("the https request came from %s, want the proxy's %s", remote, proxyOut)
	}
	log := tp.Log()
	if !strings.Contains(log, "CONNECT") {
		t.Fatalf("the proxy's log shows no CONNECT:\n%s", log)
	}
}

// TestProxyGuard: a target the SSRF guard blocks directly is blocked
// behind the proxy too, before anything is sent to the proxy; the proxy
// itself, when an endpoint names it, is judged like any address.
func TestProxyGuard(t *testing.T) {
	tp := tinyproxy.Start(t)
	proxy := tp.Addr
	// A receiver on 127.0.0.3, which the guard blocks: only 127.0.0.1
	// (the proxy's and the allowed receiver's address) is allowed.
	ln, err := net.Listen("tcp", "127.0.0.3:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.3: %v", err)
	}
	var got proxied
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(got.handler)}}
	srv.Start()
	defer srv.Close()
	tr := newTransport(t, httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})

	blocked := endpoint("blocked", srv.URL)
	res := send(t, tr, blocked, message())
	wantClass(t, res, courier.ClassRejected)
	if !strings.Contains(res.Error, "SSRF guard") {
		t.Fatalf("directly: %q does not say the guard blocked it", res.Error)
	}

	tr.SetProxy("http://" + proxy)
	res = send(t, tr, blocked, message())
	wantClass(t, res, courier.ClassRejected)
	if !strings.Contains(res.Error, "SSRF guard") || !strings.Contains(res.Error, "127.0.0.3") {
		t.Fatalf("behind the default proxy: %q does not say the guard blocked 127.0.0.3", res.Error)
	}
	own := withProxy(endpoint("blocked-own", srv.URL), "http://"+proxy)
	wantClass(t, send(t, tr, own, message()), courier.ClassRejected)
	if n := got.count(); n != 0 {
		t.Fatalf("the blocked receiver got %d requests", n)
	}
	log := tp.Log()
	if strings.Contains(log, "127.0.0.3") {
		t.Fatalf("the proxy was asked for the blocked target:\n%s", log)
	}

	// An endpoint's own proxy on an address the guard blocks is refused:
	// naming a "proxy" is no way past the guard.
	tr2 := newTransport(t, httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.3/32")}})
	res = send(t, tr2, withProxy(endpoint("via-blocked-proxy", srv.URL), "http://"+proxy), message())
	wantClass(t, res, courier.ClassRejected)
	if n := got.count(); n != 0 {
		t.Fatalf("the receiver got %d requests through a proxy the guard blocks", n)
	}
}

// TestProxyCredentials: a proxy that asks for credentials gets those of its
// URL; wrong ones are refused, and no message shows the password.
func TestProxyCredentials(t *testing.T) {
	proxy := tinyproxy.Start(t, "courier", "pr0xy-pass").Addr
	var got proxied
	srv := httptest.NewServer(http.HandlerFunc(got.handler))
	defer srv.Close()
	tr := newTransport(t, httptransport.Options{})

	wrong := withProxy(endpoint("wrong", srv.URL), "http://courier:not-the-pass@"+proxy)
	res := send(t, tr, wrong, message())
	wantClass(t, res, courier.ClassTransport)
	// tinyproxy answers a CONNECT with wrong credentials 401, where RFC
	// 9110 would have 407.
	if !strings.Contains(res.Error, "refused") || !strings.Contains(res.Error, "Unauthorized") || strings.Contains(res.Error, "not-the-pass") {
		t.Fatalf("a refused proxy login: %q (want the proxy's refusal, never the password)", res.Error)
	}
	right := withProxy(endpoint("right", srv.URL), "http://courier:pr0xy-pass@"+proxy)
	wantClass(t, send(t, tr, right, message()), "")
	if remote, _ := got.last(); remote != proxyOut {
		t.Fatalf("the request came from %s, want %s", remote, proxyOut)
	}
	shown := right.Settings.Redacted().(*httptransport.Settings).Egress.Proxy
	if strings.Contains(shown, "pr0xy-pass") || !strings.Contains(shown, "courier") {
		t.Fatalf("redacted proxy URL %q", shown)
	}
}

// TestProxyDown: a proxy that is not there fails the attempt as a receiver
// that is not there would, and the error names the proxy.
func TestProxyDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	var got proxied
	srv := httptest.NewServer(http.HandlerFunc(got.handler))
	defer srv.Close()
	tr := newTransport(t, httptransport.Options{})
	res := send(t, tr, withProxy(endpoint("down", srv.URL), "http://courier:pr0xy-pass@"+gone), message())
	wantClass(t, res, courier.ClassConnectRefused)
	if !strings.Contains(res.Error, "proxy "+gone) || strings.Contains(res.Error, "pr0xy-pass") {
		t.Fatalf("error %q does not name the proxy (or shows its password)", res.Error)
	}
}
