package http_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

func TestConnectRefused(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: the kernel answers RST
	tr := newTransport(t, httptransport.Options{})
	res := send(t, tr, endpoint("refused", "http://"+addr+"/in"), message())
	wantClass(t, res, courier.ClassConnectRefused)
	if want := "connection refused by " + addr; res.Error != want {
		t.Fatalf("error = %q, want %q", res.Error, want)
	}
}

// fakeDNS serves DNS on a loopback UDP port: NXDOMAIN for every question,
// or, when silent, no answer at all.
func fakeDNS(t *testing.T, silent bool) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { pc.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if silent || n < 12 {
				continue
			}
			// The question follows the 12-byte header: labels up to a zero
			// byte, then type and class.
			end := 12
			for end < n && buf[end] != 0 {
				end += int(buf[end]) + 1
			}
			end += 5
			if end > n {
				continue
			}
			resp := []byte{buf[0], buf[1], 0x80 | 0x04 | buf[2]&0x01, 0x80 | 3, 0, 1, 0, 0, 0, 0, 0, 0}
			resp = append(resp, buf[12:end]...)
			pc.WriteTo(resp, from)
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

func TestDNSOnALoopbackResolver(t *testing.T) {
	t.Parallel()
	t.Run("nxdomain", func(t *testing.T) {
		t.Parallel()
		tr := newTransport(t, httptransport.Options{Resolver: fakeDNS(t, false)})
		res := send(t, tr, endpoint("nx", "http://no-such-host.invalid:8080/in"), message())
		wantClass(t, res, courier.ClassDNS)
		if want := "host no-such-host.invalid not found"; res.Error != want {
			t.Fatalf("error = %q, want %q", res.Error, want)
		}
	})
	t.Run("resolver timeout", func(t *testing.T) {
		t.Parallel()
		tr := newTransport(t, httptransport.Options{Resolver: fakeDNS(t, true), ConnectTimeout: 300 * time.Millisecond})
		res := send(t, tr, endpoint("slowdns", "http://silent-resolver.invalid/in"), message())
		wantClass(t, res, courier.ClassDNS)
		wantError(t, res, "timed out")
	})
}

func TestTLSHandshakeThatNeverCompletesIsAConnectTimeout(t *testing.T) {
	t.Parallel()
	addr := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // accepts, never answers
	tr := newTransport(t, httptransport.Options{ConnectTimeout: 300 * time.Millisecond})
	start := time.Now()
	res := send(t, tr, endpoint("tls-stall", "https://"+addr+"/in"), message())
	wantClass(t, res, courier.ClassConnectTimeout)
	wantError(t, res, "TLS handshake with "+addr+" not done within 300ms")
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the connect timeout", el)
	}
}

// A handshake that the attempt's deadline cuts short says the time it had,
// not the connect timeout of the pool.
func TestHandshakeCutShortNamesTheLimitApplied(t *testing.T) {
	t.Parallel()
	addr := rawServer(t, func(c net.Conn) { io.Copy(io.Discard, c) }) // accepts, never answers
	tr := newTransport(t, httptransport.Options{})                    // a connect timeout of 5s: the endpoint's timeout
	const left = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), left)
	defer cancel()
	res := tr.Send(ctx, courier.Delivery{Message: message(), Endpoint: endpoint("tls-short", "https://"+addr+"/in"), Attempt: 1})
	wantClass(t, res, courier.ClassConnectTimeout)
	prefix := "TLS handshake with " + addr + " not done within "
	rest, ok := strings.CutPrefix(res.Error, prefix)
	d, err := time.ParseDuration(rest)
	if !ok || err != nil || d <= 0 || d > left {
		t.Fatalf("error = %q, want %q and a duration of at most %v", res.Error, prefix, left)
	}
}

// newTLSServer starts an HTTPS receiver with httptest's self-signed
// certificate, valid for 127.0.0.1 and example.com only.
func newTLSServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusAccepted)
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are the point
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func TestTLS(t *testing.T) {
	t.Parallel()
	srv := newTLSServer(t)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())

	t.Run("unknown authority", func(t *testing.T) {
		tr := newTransport(t, httptransport.Options{})
		res := send(t, tr, endpoint("tls", srv.URL+"/in"), message())
		wantClass(t, res, courier.ClassTLS)
		wantError(t, res, "unknown authority")
	})
	t.Run("trusted", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		tr := newTransport(t, httptransport.Options{TLSConfig: &tls.Config{RootCAs: roots}})
		res := send(t, tr, endpoint("tls", srv.URL+"/in"), message())
		if !res.Delivered() || res.Status != 202 {
			t.Fatalf("result = %+v, want delivered", res)
		}
	})
	t.Run("wrong host name", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(srv.Certificate())
		tr := newTransport(t, httptransport.Options{TLSConfig: &tls.Config{RootCAs: roots}})
		res := send(t, tr, endpoint("tls", "https://localhost:"+port+"/in"), message())
		wantClass(t, res, courier.ClassTLS)
		wantError(t, res, "not valid for localhost")
	})
	t.Run("plain http behind an https url", func(t *testing.T) {
		s, tr := sinkAndTransport(t)
		res := send(t, tr, endpoint("tls", "https://"+s.Addr()+"/in"), message())
		wantClass(t, res, courier.ClassTLS)
		wantError(t, res, "does not speak TLS")
	})
}
