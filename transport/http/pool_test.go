package http_test

import (
	"bufio"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

func TestConnectionReuse(t *testing.T) {
	t.Parallel()
	s := mustSink(t)
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
	s := mustSink(t)
	tr := newTransport(t, httptransport.Options{})
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

func TestStaleKeptAliveConnectionIsRetried(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns, requests := 0, 0
	addr := rawServer(t, func(c net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			mu.Lock()
			requests++
			mu.Unlock()
			if first && i == 1 {
				return // the keep-alive race: closed as the request arrived
			}
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("stale", "http://"+addr+"/in")
	for i := range 2 {
		if res := send(t, tr, e, message()); !res.Delivered() {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 2 || requests != 3 {
		t.Fatalf("server saw %d connections and %d requests, want 2 and 3", conns, requests)
	}
}

// A connection that answered 101 belongs to another protocol from then on:
// the next attempt goes out on a new one, as with net/http's client.
func TestConnectionThatAnswered101IsNotReused(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	conns, requests, onFirst := 0, 0, 0
	addr := rawServer(t, func(c net.Conn) {
		mu.Lock()
		conns++
		first := conns == 1
		mu.Unlock()
		br := bufio.NewReader(c)
		for {
			if _, _, err := readRequest(br); err != nil {
				return
			}
			mu.Lock()
			requests++
			n := requests
			if first {
				onFirst++
			}
			mu.Unlock()
			if n == 1 {
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n")
				continue
			}
			io.WriteString(c, "HTTP/1.1 204 No Content\r\n\r\n")
		}
	})
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("upgrade", "http://"+addr+"/in")
	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassProtocol)
	wantError(t, res, "unexpected HTTP status 101")
	if res := send(t, tr, e, message()); !res.Delivered() {
		t.Fatalf("the send after the 101: %+v", res)
	}
	mu.Lock()
	defer mu.Unlock()
	if conns != 2 || requests != 2 || onFirst != 1 {
		t.Fatalf("server saw %d connections and %d requests, %d on the first; want 2, 2 and 1", conns, requests, onFirst)
	}
}
