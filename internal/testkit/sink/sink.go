// Package sink is a scriptable HTTP receiver for tests and benchmarks: it
// answers each path as a script says (statuses, delays, resets, black holes,
// random failures), records what arrived and measures how many requests were
// open at once. It listens on a real socket so that transports are tested
// over the network stack, not against mocks.
package sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Options tune what the sink keeps. The zero value keeps everything, which
// is what tests want; benchmarks turn recording down.
type Options struct {
	DiscardBodies bool   // record arrivals without their bodies
	CountOnly     bool   // record no arrivals at all, only counts and concurrency
	Seed          uint64 // seeds the generator of Fail and FailRandomly; 0 means 1
}

// Arrival is one request as the sink received it.
type Arrival struct {
	Seq        int // order of arrival at the sink, from 1
	Time       time.Time
	Method     string
	Path       string
	Header     http.Header
	Body       []byte // nil with Options.DiscardBodies
	RemoteAddr string // tells connections apart
	Status     int    // what the sink answered; 0 for a reset or a black hole
}

// Sink is a running receiver. Its methods are safe for concurrent use.
type Sink struct {
	opts Options
	ln   net.Listener
	srv  *http.Server
	url  string

	conns    atomic.Int64
	handlers sync.WaitGroup
	done     chan struct{} // closed by Close: delays and black holes end

	mu           sync.Mutex
	closed       bool
	paths        map[string]*pathState
	messages     map[string]*script // by webhook-id: a script for one message, before its path's
	statuses     map[int]int
	arrivals     []Arrival
	total        int
	anyWaiters   []waiter
	rng          *rand.Rand
	randomP      float64
	randomStatus int
	held         map[net.Conn]struct{} // hijacked connections, closed by Close
}

// pathState is what the sink knows about one path.
type pathState struct {
	script  *script
	load    func(open int) Step // answers by load, before script; nil: none
	count   int
	open    int
	maxOpen int
	waiters []waiter
}

// waiter is a Wait call blocked until a path has n arrivals.
type waiter struct {
	n  int
	ch chan struct{}
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves with
// the default options.
func Start(addr string) (*Sink, error) { return StartWith(addr, Options{}) }

// StartWith listens on addr and serves with the given options.
func StartWith(addr string, o Options) (*Sink, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("sink: listen on %s: %w", addr, err)
	}
	seed := o.Seed
	if seed == 0 {
		seed = 1
	}
	s := &Sink{
		opts:     o,
		ln:       ln,
		url:      "http://" + ln.Addr().String(),
		done:     make(chan struct{}),
		paths:    make(map[string]*pathState),
		statuses: make(map[int]int),
		rng:      rand.New(rand.NewPCG(seed, seed)),
		held:     make(map[net.Conn]struct{}),
	}
	s.srv = &http.Server{
		Handler: s,
		// Resets and black holes make the server complain; a sink that logs
		// every one of them at 30,000 requests a second helps nobody.
		ErrorLog: log.New(io.Discard, "", 0),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				s.conns.Add(1)
			}
		},
	}
	go s.srv.Serve(ln)
	return s, nil
}

// MustStart starts a sink on a free loopback port with the options o,
// failing the test when it cannot, and closes it when the test ends.
func MustStart(t testing.TB, o Options) *Sink {
	t.Helper()
	s, err := StartWith("127.0.0.1:0", o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// URL returns the sink's base URL, "http://127.0.0.1:port"; append a path.
func (s *Sink) URL() string { return s.url }

// Addr returns the address the sink listens on, for raw connections.
func (s *Sink) Addr() string { return s.ln.Addr().String() }

// Close stops the sink: it ends delays, stalls and black holes, closes every
// connection and returns once no handler runs any more.
func (s *Sink) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	for c := range s.held {
		c.Close()
	}
	s.mu.Unlock()
	s.srv.Close()
	s.handlers.Wait()
}

// Script makes path answer with steps in order, then as an unscripted path,
// or forever if the last step is Repeat or Cycle. It replaces an earlier
// script of the path but keeps its counts.
func (s *Sink) Script(path string, steps ...Step) {
	sc := newScript(steps)
	s.mu.Lock()
	s.path(path).script = sc
	s.mu.Unlock()
}

// ScriptLoad makes path answer each request with the step answer gives for
// the requests open on the path at its arrival, itself included: a
// receiver that slows down or refuses work past some load. It comes before
// the path's script; nil removes it.
func (s *Sink) ScriptLoad(path string, answer func(open int) Step) {
	s.mu.Lock()
	s.path(path).load = answer
	s.mu.Unlock()
}

// ScriptMessage sets the steps played to requests whose webhook-id header is
// id (one message, as the HTTP transport sends it), whatever their path.
// Once they are played, the path's own script or default answers.
func (s *Sink) ScriptMessage(id string, steps ...Step) {
	sc := newScript(steps)
	s.mu.Lock()
	if s.messages == nil {
		s.messages = map[string]*script{}
	}
	s.messages[id] = sc
	s.mu.Unlock()
}

// FailRandomly makes paths without a script answer status to a fraction p
// of requests (0 turns it off), drawn from the seeded generator: a flaky
// receiver for benchmarks.
func (s *Sink) FailRandomly(p float64, status int) {
	s.mu.Lock()
	s.randomP, s.randomStatus = p, status
	s.mu.Unlock()
}

// Count returns the number of requests that arrived at path.
func (s *Sink) Count(path string) int {
	return s.pathCount(path, func(ps *pathState) int { return ps.count })
}

// Total returns the number of requests that arrived at any path.
func (s *Sink) Total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// StatusCount returns how many requests the sink answered with status, over
// all paths; status 0 counts resets and black holes.
func (s *Sink) StatusCount(status int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statuses[status]
}

// Concurrent returns the number of requests to path open right now: arrived
// and not yet answered, reset or given up by the client.
func (s *Sink) Concurrent(path string) int {
	return s.pathCount(path, func(ps *pathState) int { return ps.open })
}

// MaxConcurrent returns the largest number of requests to path that were
// ever open at once: what a concurrency limit must keep down.
func (s *Sink) MaxConcurrent(path string) int {
	return s.pathCount(path, func(ps *pathState) int { return ps.maxOpen })
}

// pathCount reads one count of path's state under the lock; a path that no
// request reached has every count at 0.
func (s *Sink) pathCount(path string, count func(*pathState) int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps, ok := s.paths[path]; ok {
		return count(ps)
	}
	return 0
}

// Conns returns the number of TCP connections accepted so far, which shows
// whether a client reuses its connections.
func (s *Sink) Conns() int { return int(s.conns.Load()) }

// Arrivals returns the requests that arrived at path, in order. It is empty
// with Options.CountOnly.
func (s *Sink) Arrivals(path string) []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Arrival
	for _, a := range s.arrivals {
		if a.Path == path {
			out = append(out, a)
		}
	}
	return out
}

// All returns every recorded arrival, in order.
func (s *Sink) All() []Arrival {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Arrival(nil), s.arrivals...)
}

// ErrClosed is returned by Wait when the sink closes first.
var ErrClosed = errors.New("sink: closed")

// Wait blocks until n requests have arrived at path (at any path when path
// is ""), ctx is done or the sink closes.
func (s *Sink) Wait(ctx context.Context, path string, n int) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	got := s.total
	if path != "" {
		got = s.path(path).count
	}
	if got >= n {
		s.mu.Unlock()
		return nil
	}
	w := waiter{n: n, ch: make(chan struct{})}
	if path == "" {
		s.anyWaiters = append(s.anyWaiters, w)
	} else {
		ps := s.paths[path]
		ps.waiters = append(ps.waiters, w)
	}
	s.mu.Unlock()

	select {
	case <-w.ch:
		return nil
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if path == "" {
		s.anyWaiters = dropWaiter(s.anyWaiters, w.ch)
		got = s.total
	} else {
		ps := s.paths[path]
		ps.waiters = dropWaiter(ps.waiters, w.ch)
		got = ps.count
	}
	return fmt.Errorf("sink: %d of %d arrivals at %q: %w", got, n, path, ctx.Err())
}

func dropWaiter(ws []waiter, ch chan struct{}) []waiter {
	for i, w := range ws {
		if w.ch == ch {
			return append(ws[:i], ws[i+1:]...)
		}
	}
	return ws
}

// wake releases the waiters whose count is reached. Called with s.mu held.
func wake(ws []waiter, count int) []waiter {
	kept := ws[:0]
	for _, w := range ws {
		if count >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	return kept
}

// path returns the state of path, creating it. Called with s.mu held.
func (s *Sink) path(p string) *pathState {
	ps, ok := s.paths[p]
	if !ok {
		ps = &pathState{}
		s.paths[p] = ps
	}
	return ps
}

// copyBufs lends buffers for discarding bodies without allocating.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// ServeHTTP records the request and plays the path's next step.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()

	var body []byte
	if s.opts.DiscardBodies || s.opts.CountOnly {
		buf := copyBufs.Get().(*[]byte)
		io.CopyBuffer(io.Discard, r.Body, *buf)
		copyBufs.Put(buf)
	} else {
		body, _ = io.ReadAll(r.Body)
	}
	now := time.Now()

	s.mu.Lock()
	ps := s.path(r.URL.Path)
	st := s.next(ps, r.Header.Get("webhook-id"))
	ps.count++
	s.total++
	ps.open++
	ps.maxOpen = max(ps.maxOpen, ps.open)
	status := 0
	if st.kind == kindRespond || st.kind == kindStall {
		status = st.status
	}
	s.statuses[status]++
	if !s.opts.CountOnly {
		s.arrivals = append(s.arrivals, Arrival{
			Seq: s.total, Time: now, Method: r.Method, Path: r.URL.Path,
			Header: r.Header, Body: body, RemoteAddr: r.RemoteAddr, Status: status,
		})
	}
	if len(ps.waiters) > 0 {
		ps.waiters = wake(ps.waiters, ps.count)
	}
	if len(s.anyWaiters) > 0 {
		s.anyWaiters = wake(s.anyWaiters, s.total)
	}
	s.mu.Unlock()

	s.play(w, r, st)

	s.mu.Lock()
	ps.open--
	s.mu.Unlock()
}

// next picks the step for a request to ps, resolving random failures so
// that the answer is known when the arrival is recorded. Called with s.mu
// held, which also guards the generator.
func (s *Sink) next(ps *pathState, id string) Step {
	st, ok := Step{}, false
	if sc := s.messages[id]; sc != nil && id != "" {
		st, ok = sc.take()
	}
	if !ok && ps.load != nil {
		st, ok = ps.load(ps.open+1), true
	}
	if !ok && ps.script != nil {
		st, ok = ps.script.take()
	}
	if !ok {
		st = Fail(s.randomP, s.randomStatus)
	}
	if st.kind == kindRandom {
		if st.p > 0 && s.rng.Float64() < st.p {
			return Step{kind: kindRespond, status: st.status, delay: st.delay}
		}
		return Step{kind: kindRespond, status: http.StatusNoContent, delay: st.delay}
	}
	return st
}

// play carries out one step.
func (s *Sink) play(w http.ResponseWriter, r *http.Request, st Step) {
	if st.delay > 0 {
		t := time.NewTimer(st.delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			abort(w)
			return
		case <-s.done:
			t.Stop()
			abort(w)
			return
		}
	}
	switch st.kind {
	case kindRespond:
		h := w.Header()
		for _, kv := range st.header {
			h.Add(kv[0], kv[1])
		}
		if st.body != "" {
			h.Set("Content-Length", strconv.Itoa(len(st.body)))
		}
		w.WriteHeader(st.status)
		if st.body != "" {
			io.WriteString(w, st.body)
		}
	case kindStall:
		h := w.Header()
		for _, kv := range st.header {
			h.Add(kv[0], kv[1])
		}
		h.Set("Content-Length", "1048576")
		w.WriteHeader(st.status)
		io.WriteString(w, st.body)
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-s.done:
		}
	case kindReset:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0) // close sends RST, not FIN
		}
		conn.Close()
	case kindBlackHole:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		if !s.hold(conn) {
			return
		}
		// Reading returns when the client hangs up or Close closes conn; the
		// request counts as open until then.
		buf := copyBufs.Get().(*[]byte)
		io.CopyBuffer(io.Discard, conn, *buf)
		copyBufs.Put(buf)
		s.mu.Lock()
		delete(s.held, conn)
		s.mu.Unlock()
		conn.Close()
	}
}

// hold registers a hijacked connection for Close, or closes it if the sink
// is closing already.
func (s *Sink) hold(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.Close()
		return false
	}
	s.held[c] = struct{}{}
	return true
}

// abort closes the connection of a request that must get no answer; a
// handler that merely returned would make the server answer 200.
func abort(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		conn.Close()
	}
}
