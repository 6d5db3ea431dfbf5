package http_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sendertest"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// watchedListener listens on addr and reports, through untouched, whether
// no connection reached it, as sendertest.Untouched does. The test skips
// when the machine cannot listen there (it may have no IPv6).
func watchedListener(t *testing.T, network, addr string) (ln net.Listener, untouched func() bool) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("cannot listen on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln, func() bool {
		t.Helper()
		return sendertest.Untouched(t, ln)
	}
}

// Endpoints on loopback are refused without an allowlist, and no
// connection reaches the receiver; with one, they are reached.
func TestSSRFGuardLoopback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, network, listen, host string
	}{
		{"ipv4", "tcp4", "127.0.0.1:0", "127.0.0.1"},
		{"ipv6", "tcp6", "[::1]:0", "[::1]"},
		{"name resolving to 127.0.0.1", "tcp4", "127.0.0.1:0", "localhost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ln, untouched := watchedListener(t, tt.network, tt.listen)
			_, port, _ := net.SplitHostPort(ln.Addr().String())
			url := "http://" + tt.host + ":" + port + "/in"

			guarded := newTransport(t, httptransport.Options{AllowNetworks: []netip.Prefix{}})
			res := send(t, guarded, endpoint("internal", url), message())
			wantClass(t, res, courier.ClassRejected)
			wantError(t, res, "SSRF guard")
			wantError(t, res, "loopback")
			wantError(t, res, "allow_networks")
			if !untouched() {
				t.Fatal("the blocked attempt reached the receiver")
			}

			// Allowed globally, the attempt gets through to the listener.
			allowed := newTransport(t, httptransport.Options{AllowNetworks: loopback})
			done := make(chan courier.Result, 1)
			go func() { done <- send(t, allowed, endpoint("internal", url), message()) }()
			c, err := ln.Accept()
			if err != nil {
				t.Fatal(err)
			}
			c.Close() // the attempt fails as connection_closed; it arrived
			if res := <-done; res.Class == courier.ClassRejected {
				t.Fatalf("allowed attempt rejected: %+v", res)
			}

			// Allowed by the endpoint alone.
			e := endpoint("internal-own", url)
			httptransport.Of(e).AllowNetworks = []string{"127.0.0.0/8", "::1/128"}
			go func() { done <- send(t, guarded, e, message()) }()
			if c, err = ln.Accept(); err != nil {
				t.Fatal(err)
			}
			c.Close()
			if res := <-done; res.Class == courier.ClassRejected {
				t.Fatalf("attempt allowed by the endpoint rejected: %+v", res)
			}
		})
	}
}

// Private and metadata addresses are refused before any connect: the
// guard runs on the address before the socket connects, so these tests
// send nothing off the machine.
func TestSSRFGuardRefusesBeforeDialing(t *testing.T) {
	t.Parallel()
	tr := newTransport(t, httptransport.Options{AllowNetworks: []netip.Prefix{}})
	tests := []struct {
		url, want string
	}{
		{"http://10.0.0.1/in", "private"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "unique-local"},
		{"http://0.0.0.0:9/in", "unspecified"},
		{"http://[::ffff:127.0.0.1]:9/in", "loopback"},
		{"http://224.0.0.1/in", "multicast"},
	}
	for _, tt := range tests {
		res := send(t, tr, endpoint("internal", tt.url), message())
		wantClass(t, res, courier.ClassRejected)
		wantError(t, res, "blocked by the SSRF guard")
		wantError(t, res, tt.want)
	}
}

// Blocked tells, before any delivery, what the guard would refuse: an
// address in a blocked network that no allowlist lets through, of the
// receiver or of the endpoint's own proxy.
func TestBlocked(t *testing.T) {
	loopback := []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	endpoint := func(url string, allow ...string) *courier.Endpoint {
		e := courier.NewEndpoint("a", courier.TransportHTTP)
		httptransport.Of(e).URL, httptransport.Of(e).AllowNetworks = url, allow
		return e
	}
	tests := []struct {
		name  string
		e     *courier.Endpoint
		allow []netip.Prefix
		want  string // in the answer; "" for none
	}{
		{"loopback", endpoint("http://127.0.0.1:9000/inbox"), nil,
			"127.0.0.1:9000 is a loopback address, which endpoints may not reach: allow it with allow_networks on the endpoint or outbound.allow_networks"},
		{"loopback allowed by the endpoint", endpoint("http://127.0.0.1:9000/inbox", "127.0.0.1/32"), nil, ""},
		{"loopback allowed by outbound", endpoint("http://127.0.0.1:9000/inbox"), loopback, ""},
		{"private, default port", endpoint("https://10.1.2.3/in"), loopback, "10.1.2.3:443 is a private address"},
		{"IPv6 loopback", endpoint("http://[::1]:9000/in"), nil, "[::1]:9000 is a loopback address"},
		{"metadata", endpoint("http://169.254.169.254/latest"), nil, "169.254.169.254:80 is a link-local address"},
		{"public", endpoint("https://93.184.215.14/in"), nil, ""},
		{"name of loopback", endpoint("http://localhost:9000/in"), nil, "localhost resolves to "},
		{"name of loopback allowed", endpoint("http://localhost:9000/in"), []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}, ""},
		{"name that does not resolve", endpoint("https://nothing.invalid/in"), nil, ""},
		{"not http", courier.NewEndpoint("f", courier.TransportFile), nil, ""},
		{"its own proxy on a private address", withProxy(endpoint("https://93.184.215.14/in"), "http://u:hunter2@10.0.0.8:3128"), nil,
			"its proxy 10.0.0.8:3128 is a private address"},
		{"its own proxy allowed", withProxy(endpoint("https://93.184.215.14/in", "10.0.0.0/8"), "http://10.0.0.8:3128"), nil, ""},
		{"behind its proxy, the receiver still judged", withProxy(endpoint("http://127.0.0.1:9000/in", "10.0.0.0/8"), "http://10.0.0.8:3128"), nil,
			"127.0.0.1:9000 is a loopback address"},
	}
	for _, tc := range tests {
		if got := httptransport.Blocked(context.Background(), nil, tc.e, tc.allow); strings.Contains(got, "hunter2") {
			t.Errorf("%s: Blocked shows the proxy's password: %q", tc.name, got)
		}
		got := httptransport.Blocked(context.Background(), nil, tc.e, tc.allow)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: Blocked(%s) = %q, want %q", tc.name, httptransport.Of(tc.e).URL, got, tc.want)
		}
	}
}
