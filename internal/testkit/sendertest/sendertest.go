// Package sendertest has the checks the tests of transports' senders share:
// a server that goes away and comes back, and one that stalls, each behind
// a proxy so that the server, which other tests use too, never stops; that
// no connection reached a listener a sender must not connect to; and the
// throughput of a benchmark.
package sendertest

import (
	"fmt"
	"net"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/tcpproxy"
)

// SendFunc makes the attempt numbered attempt to deliver the message id to
// an endpoint whose server is at url.
type SendFunc func(url, id string, attempt int) courier.Result

// AwayAndBack points the endpoint at a proxy in front of the server at
// upstream (a URL): with the proxy down the server is unreachable, as a
// stopped one is; cutting the proxy's connections is a server that
// restarts. Each failure must be transient, and the next attempt after the
// server is back must deliver, on a new connection. ids[0] goes while the
// server is away and back, ids[1] while it goes and comes back again, so
// that the server gets each once.
func AwayAndBack(t testing.TB, upstream string, ids [2]string, send SendFunc) {
	t.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := tcpproxy.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	viaProxy := *u
	viaProxy.Host = addr
	to := viaProxy.String()

	// Stopped: nothing listens.
	res := send(to, ids[0], 1)
	if res.Class != courier.ClassConnectRefused || res.Class.PermanentByDefault() {
		t.Fatalf("server away: %+v, want connect_refused", res)
	}
	// Back: the retry delivers.
	proxy := tcpproxy.MustStart(t, addr, u.Host)
	if res := send(to, ids[0], 2); !res.Delivered() {
		t.Fatalf("server back: %+v", res)
	}
	// Goes down again, cutting the open connection.
	proxy.Close()
	res = send(to, ids[1], 1)
	switch res.Class {
	case courier.ClassConnectRefused, courier.ClassConnectionClosed:
	default:
		t.Fatalf("server gone: %+v, want connect_refused or connection_closed", res)
	}
	// And back: the transport connects anew.
	tcpproxy.MustStart(t, addr, u.Host)
	if res := send(to, ids[1], 2); !res.Delivered() {
		t.Fatalf("server back again: %+v", res)
	}
}

// Stalled freezes the connection to the server at upstream (a proxy holds
// every byte): ids[0] goes before the stall; ids[1] times out twice, the
// second time on whatever the first timeout left behind, and once bytes
// flow again its third attempt delivers. send's endpoint must time out
// within a second or so. A publish held in the stall may reach the server
// once bytes flow, so the server may get ids[1] more than once.
func Stalled(t testing.TB, upstream string, ids [2]string, send SendFunc) {
	t.Helper()
	proxy, to := tcpproxy.Via(t, upstream)
	if res := send(to, ids[0], 1); !res.Delivered() {
		t.Fatalf("before the stall: %+v", res)
	}
	proxy.Freeze()
	for attempt := 1; attempt <= 2; attempt++ {
		if res := send(to, ids[1], attempt); res.Class != courier.ClassTimeout {
			t.Fatalf("stalled, attempt %d: %+v, want timeout", attempt, res)
		}
	}
	proxy.Thaw()
	if res := send(to, ids[1], 3); !res.Delivered() {
		t.Fatalf("after the stall: %+v", res)
	}
}

// Untouched reports whether no connection reached ln before the one it
// opens itself: the accept queue is in arrival order, so a connection a
// sender had opened would come out first. Nothing else may accept on ln.
func Untouched(t testing.TB, ln net.Listener) bool {
	t.Helper()
	probe, err := net.Dial(ln.Addr().Network(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.RemoteAddr().String() == probe.LocalAddr().String()
}

// Throughput measures the attempts a transport delivers per second, with
// one attempt in flight and with 16 at once (the default max_concurrency
// of an endpoint), each in a sub-benchmark. prepare readies a target for
// inflight attempts at once and returns the function that makes one; an
// attempt that does not deliver fails the benchmark.
func Throughput(b *testing.B, prepare func(b *testing.B, inflight int) (send func() courier.Result)) {
	for _, inflight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			run(b, inflight, prepare(b, inflight))
		})
	}
}

// run makes b.N attempts with send, inflight of them at once, and reports
// the deliveries per second as msgs/s.
func run(b *testing.B, inflight int, send func() courier.Result) {
	b.Helper()
	var next, failed atomic.Int64
	done := make(chan struct{})
	b.ResetTimer()
	for range inflight {
		go func() {
			defer func() { done <- struct{}{} }()
			for next.Add(1) <= int64(b.N) {
				if res := send(); !res.Delivered() {
					failed.Add(1)
				}
			}
		}()
	}
	for range inflight {
		<-done
	}
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d attempts not delivered", n, b.N)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
