package http_test

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

func TestConnectionReuse(t *testing.T) {
	t.Parallel()
	s := sink.MustStart(t, sink.Options{})
	s.Script("/in", sink.Respond(200).WithBody("ok"), sink.Respond(503), sink.Respond(400).WithBody("no"), sink.Cycle)
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("reuse", s.URL()+"/in")
	const n = 60
	for i := range n {
		res := send(t, tr, e, message())
		if res.Status == 0 {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	if got := s.Conns(); got != 1 {
		t.Fatalf("%d sequential sends used %d connections, want 1", n, got)
	}

	// Concurrent senders share the pool: far fewer connections than sends.
	const workers, each = 4, 30
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				send(t, tr, e, message())
			}
		})
	}
	wg.Wait()
	if got := s.Count("/in"); got != n+workers*each {
		t.Fatalf("sink saw %d requests, want %d", got, n+workers*each)
	}
	if got := s.Conns(); got > 2*workers {
		t.Fatalf("%d concurrent sends used %d connections, want at most %d", workers*each, got, 2*workers)
	}
}

func TestChangedEndpointGetsAFreshPool(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	e := endpoint("reload", s.URL()+"/in")
	send(t, tr, e, message())
	send(t, tr, e, message())
	if got := s.Conns(); got != 1 {
		t.Fatalf("Conns = %d, want 1", got)
	}
	changed := *e
	changed.Timeout = 2 * time.Second // a shorter connect timeout: a new pool
	send(t, tr, &changed, message())
	send(t, tr, &changed, message())
	if got := s.Conns(); got != 2 {
		t.Fatalf("Conns after the change = %d, want 2", got)
	}
}

// An endpoint's pool, and with it its URL, are worked out once and used
// while its settings stay the same: a change of the global allowlist (a
// reload), of the endpoint's own or of its URL is seen at the next attempt.
func TestChangedSettingsAreSeenAtOnce(t *testing.T) {
	t.Parallel()
	s, tr := sinkAndTransport(t)
	e := endpoint("reload", s.URL()+"/in")
	wantClass(t, send(t, tr, e, message()), "")
	tr.SetAllowNetworks(nil)
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassRejected)
	wantError(t, res, "blocked by the SSRF guard")
	own, ownSettings := *e, *httptransport.Of(e)
	ownSettings.AllowNetworks = []string{"127.0.0.0/8"}
	own.Settings = &ownSettings
	wantClass(t, send(t, tr, &own, message()), "")
	other := sink.MustStart(t, sink.Options{})
	moved, movedSettings := own, ownSettings
	movedSettings.URL = other.URL() + "/moved"
	moved.Settings = &movedSettings
	wantClass(t, send(t, tr, &moved, message()), "")
	if got := s.Count("/in"); got != 2 {
		t.Errorf("the first receiver had %d requests, want 2", got)
	}
	if got := other.Count("/moved"); got != 1 {
		t.Errorf("the moved endpoint's receiver had %d requests, want 1", got)
	}
}

// seen is what a countingServer saw.
type seen struct{ conns, requests, onFirst int }

// countingServer is a receiver that counts the connections and requests it
// sees, and answers each request with what answer gives for it: n is its
// number among all requests and i among those of its connection, both from
// 1, and first says whether it came on the first connection. An empty
// answer closes the connection. counts tells what it saw so far.
func countingServer(t *testing.T, answer func(n, i int, first bool) string) (addr string, counts func() seen) {
	t.Helper()
	var mu sync.Mutex
	var saw seen
	addr = rawServer(t, func(c net.Conn) {
		mu.Lock()
		saw.conns++
		first := saw.conns == 1
		mu.Unlock()
		br := bufio.NewReader(c)
		for i := 1; ; i++ {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			mu.Lock()
			saw.requests++
			n := saw.requests
			if first {
				saw.onFirst++
			}
			mu.Unlock()
			a := answer(n, i, first)
			if a == "" {
				return
			}
			io.WriteString(c, a)
		}
	})
	return addr, func() seen {
		mu.Lock()
		defer mu.Unlock()
		return saw
	}
}

func TestStaleKeptAliveConnectionIsRetried(t *testing.T) {
	t.Parallel()
	addr, counts := countingServer(t, func(_, i int, first bool) string {
		if first && i == 2 {
			return "" // the keep-alive race: closed as the request arrived
		}
		return "HTTP/1.1 204 No Content\r\n\r\n"
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("stale", "http://"+addr+"/in")
	for i := range 2 {
		if res := send(t, tr, e, message()); !res.Delivered() {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	if got := counts(); got.conns != 2 || got.requests != 3 {
		t.Fatalf("server saw %d connections and %d requests, want 2 and 3", got.conns, got.requests)
	}
}

// A connection that answered 101 belongs to another protocol from then on:
// the next attempt goes out on a new one, as with net/http's client.
func TestConnectionThatAnswered101IsNotReused(t *testing.T) {
	t.Parallel()
	addr, counts := countingServer(t, func(n, _ int, _ bool) string {
		if n == 1 {
			return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"
		}
		return "HTTP/1.1 204 No Content\r\n\r\n"
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("upgrade", "http://"+addr+"/in")
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassProtocol)
	wantError(t, res, "unexpected HTTP status 101")
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("the send after the 101: %+v", res)
	}
	if got := counts(); got.conns != 2 || got.requests != 2 || got.onFirst != 1 {
		t.Fatalf("server saw %d connections and %d requests, %d on the first; want 2, 2 and 1", got.conns, got.requests, got.onFirst)
	}
}
