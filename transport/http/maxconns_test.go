package http_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// portsServer is one receiver listening on many loopback ports: each port
// is an origin of its own, so each gets a pool of its own in the
// transport. It counts the connections open at once as it sees them.
type portsServer struct {
	urls []string // one per port

	mu       sync.Mutex
	open     int            // accepted and not yet seen closed
	peak     int            // the most open at once
	accepted map[string]int // connections accepted, by URL
}

// newPortsServer starts a receiver on n ports; handler nil answers 204.
func newPortsServer(t *testing.T, n int, handler http.HandlerFunc) *portsServer {
	t.Helper()
	if handler == nil {
		handler = func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.WriteHeader(http.StatusNoContent)
		}
	}
	s := &portsServer{accepted: map[string]int{}}
	srv := &http.Server{Handler: handler, ConnState: s.track}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.urls = append(s.urls, "http://"+ln.Addr().String())
		wg.Go(func() { srv.Serve(ln) })
	}
	return s
}

func (s *portsServer) track(c net.Conn, st http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch st {
	case http.StateNew:
		s.open++
		s.peak = max(s.peak, s.open)
		s.accepted["http://"+c.LocalAddr().String()]++
	case http.StateClosed, http.StateHijacked:
		s.open--
	}
}

// counts returns the connections open now, the most open at once and
// those accepted on url's port.
func (s *portsServer) counts(url string) (open, peak, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open, s.peak, s.accepted[url]
}

// waitOpen waits until the server has seen the connections the transport
// closed: it learns of a close only when its reader meets the end, a
// little after. It fails if the count stays elsewhere for long.
func waitOpen(t *testing.T, s *portsServer, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		open, _, _ := s.counts("")
		if open == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server sees %d connections open, want %d", open, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// Endpoints on many receivers, sent to in turn, keep no more connections
// than MaxConns: each dial past the bound first closes the idle connection
// of the least recently used pool. Without the bound, every one of them
// would stay open until IdleConnTimeout.
func TestConnectionsStayWithinMaxConns(t *testing.T) {
	t.Parallel()
	const endpoints, bound = 50, 8
	s := newPortsServer(t, endpoints, nil)
	tr := newTransport(t, httptransport.Options{MaxConns: bound})
	sent := 0
	for round := range 2 {
		for i, url := range s.urls {
			e := endpoint(fmt.Sprintf("ep-%d", i), url+"/in")
			if res := send(t, tr, e, message()); !res.Delivered() {
				t.Fatalf("round %d, endpoint %d: %+v", round, i, res)
			}
			sent++
			waitOpen(t, s, min(sent, bound))
		}
	}
	// The transport closes the least recently used connection before it
	// opens the next, but the server notices the close in one goroutine
	// and the new connection in another: with the count settled at the
	// bound before each send, it may see the new one first, one over.
	const slack = 1
	if _, peak, _ := s.counts(""); peak > bound+slack {
		t.Fatalf("the server saw %d connections open at once, want at most %d", peak, bound+slack)
	}
}

// The busiest endpoint is the most recently used: making room for others
// closes their connections, never its own, so it goes on with the one it
// has.
func TestBusyEndpointKeepsItsConnectionUnderMaxConns(t *testing.T) {
	t.Parallel()
	const others = 10
	s := newPortsServer(t, 1+others, nil)
	tr := newTransport(t, httptransport.Options{MaxConns: 2})
	busyURL := s.urls[0]
	busy := endpoint("busy", busyURL+"/in")
	for i := 1; i <= others; i++ {
		if res := send(t, tr, busy, message()); !res.Delivered() {
			t.Fatalf("busy, before other %d: %+v", i, res)
		}
		if res := send(t, tr, endpoint(fmt.Sprintf("other-%d", i), s.urls[i]+"/in"), message()); !res.Delivered() {
			t.Fatalf("other %d: %+v", i, res)
		}
		waitOpen(t, s, 2)
	}
	if _, _, got := s.counts(busyURL); got != 1 {
		t.Fatalf("the busy endpoint opened %d connections, want 1", got)
	}
}

// One endpoint sent to over and over keeps its one connection, even under
// the smallest bound: a request that finds an idle connection dials
// nothing.
func TestSingleEndpointReusesItsConnectionUnderMaxConns(t *testing.T) {
	t.Parallel()
	s := sink.MustStart(t, sink.Options{})
	tr := newTransport(t, httptransport.Options{MaxConns: 1})
	e := endpoint("single", s.URL()+"/in")
	const n = 100
	for i := range n {
		if res := send(t, tr, e, message()); !res.Delivered() {
			t.Fatalf("send %d: %+v", i, res)
		}
	}
	if got := s.Conns(); got != 1 {
		t.Fatalf("%d sends to one endpoint opened %d connections, want 1", n, got)
	}
}

// The bound never holds an attempt back: with every connection in use and
// none idle to close, a dial goes ahead past it. The receiver answers only
// once all the attempts have arrived, which they could not if the bound
// made them wait for a connection to free up.
func TestMaxConnsNeverHoldsAnAttemptBack(t *testing.T) {
	t.Parallel()
	const attempts, bound = 6, 2
	var arrived sync.WaitGroup
	arrived.Add(attempts)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	s := newPortsServer(t, attempts, func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		arrived.Done()
		select {
		case <-all:
			w.WriteHeader(http.StatusNoContent)
		case <-time.After(10 * time.Second):
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	})
	tr := newTransport(t, httptransport.Options{MaxConns: bound})
	results := make([]courier.Result, attempts)
	var wg sync.WaitGroup
	for i, url := range s.urls {
		e := endpoint(fmt.Sprintf("ep-%d", i), url+"/in")
		e.Timeout = 20 * time.Second
		wg.Go(func() {
			results[i] = tr.Send(context.Background(), courier.Delivery{Message: message(), Endpoint: e, Attempt: 1})
		})
	}
	wg.Wait()
	for i, res := range results {
		if !res.Delivered() {
			t.Errorf("attempt %d: %+v", i, res)
		}
	}
}
