package http

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier"
)

func TestMaxConnsFor(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		soft  uint64
		known bool
		want  int
	}{
		{0, false, DefaultMaxConns},
		{1024, true, 512},
		{20000, true, 4096},
		{1 << 20, true, 4096},
		{^uint64(0), true, 4096}, // RLIM_INFINITY
		{1, true, 1},
	} {
		if got := maxConnsFor(tc.soft, tc.known); got != tc.want {
			t.Errorf("maxConnsFor(%d, %v) = %d, want %d", tc.soft, tc.known, got, tc.want)
		}
	}
}

// answerServer accepts connections on loopback and answers every request
// on each with answer; close ends each connection after its first answer,
// without saying so, as a receiver whose keep-alive lapsed.
func answerServer(t *testing.T, answer string, close bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					io.Copy(io.Discard, req.Body)
					io.WriteString(c, answer)
					if close {
						return
					}
				}
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// Every connection the transport counts is uncounted once it is closed,
// whichever way it ends: kept alive and closed to make room or at Close,
// retired after a 101, found closed by the receiver, or never opened (a
// refused connect, a failed handshake). A count that drifted up would
// make every later dial close others' connections for nothing.
func TestEveryCountedConnectionIsUncounted(t *testing.T) {
	t.Parallel()
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	}))
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is on purpose
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(tlsSrv.Certificate())
	refused, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusedURL := "http://" + refused.Addr().String()
	refused.Close()

	tr := New(Options{Logger: slog.New(slog.DiscardHandler), MaxConns: 2, TLSConfig: &tls.Config{RootCAs: roots},
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(tr.Close)
	ok := answerServer(t, "HTTP/1.1 204 No Content\r\n\r\n", false)
	for _, tc := range []struct {
		name, url string
		times     int
		class     courier.ErrorClass // of every send
	}{
		{"kept-alive", ok, 3, ""},
		{"upgrade", answerServer(t, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n", false), 2, courier.ClassProtocol},
		{"lapsed", answerServer(t, "HTTP/1.1 204 No Content\r\n\r\n", true), 3, ""},
		{"refused", refusedURL, 2, courier.ClassConnectRefused},
		{"tls", tlsSrv.URL, 3, ""},
		{"handshake-failed", strings.Replace(ok, "http:", "https:", 1), 2, courier.ClassTLS},
		{"kept-alive-again", ok, 2, ""},
	} {
		e := &courier.Endpoint{Name: tc.name, Transport: courier.TransportHTTP, Timeout: 5 * time.Second,
			Settings: &Settings{URL: tc.url + "/in"}}
		for i := range tc.times {
			res := tr.Send(context.Background(), courier.Delivery{Message: &courier.Message{ID: "m", Payload: []byte("{}")}, Endpoint: e, Attempt: 1})
			if res.Class != tc.class {
				t.Fatalf("%s, send %d: class %q, want %q (%+v)", tc.name, i, res.Class, tc.class, res)
			}
		}
		// Nothing is in flight between sends, so the bound holds exactly.
		if got := tr.open.Load(); got < 0 || got > 2 {
			t.Errorf("after %s: %d connections counted, want 0 to 2", tc.name, got)
		}
	}
	tr.Close()
	if got := tr.open.Load(); got != 0 {
		t.Errorf("after Close: %d connections counted, want 0", got)
	}
}
