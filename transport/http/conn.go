package http

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// connState is what one connection of a pool met: when it was opened, the
// last error a read on it returned, and whether the answer it carried lets
// it carry another request. The HTTP client reports a failed first read of
// a response as a bare EOF; the error itself (a reset, a TLS alert of a
// receiver that refused the client certificate) is kept here.
type connState struct {
	openedAt time.Time
	local    net.Addr // the connection's local address, a connAddr made once
	tcp      net.Conn // closed when the connection is retired
	pool     *client  // where the connection is counted; nil when it is not
	released atomic.Bool

	mu      sync.Mutex
	judged  sync.Cond // signalled when an answer is judged
	readErr error
	sent    bool // a request went out and no answer has begun
	held    bool // an answer began and is not judged yet
	retired bool // an answer ended the connection's use for HTTP
}

func newConnState(tcp net.Conn, pool *client) *connState {
	st := &connState{openedAt: time.Now(), tcp: tcp, pool: pool}
	st.local = connAddr{tcp.LocalAddr(), st}
	st.judged.L = &st.mu
	return st
}

// errRetired is what a request meets on a retired connection.
var errRetired = errors.New("connection retired after its last answer")

// read passes on what a read of the connection returned, noting its error.
// The first bytes after a request hold the connection until their answer
// is judged: the client pools a connection whose answer has no body before
// the transport sees that answer.
func (st *connState) read(n int, err error) (int, error) {
	st.mu.Lock()
	if n > 0 && st.sent {
		st.sent, st.held = false, true
	}
	if err != nil {
		st.readErr = err
	}
	st.mu.Unlock()
	return n, err
}

// write passes p to write once the last answer is judged, unless that
// answer retired the connection.
func (st *connState) write(p []byte, write func([]byte) (int, error)) (int, error) {
	st.mu.Lock()
	for st.held {
		st.judged.Wait()
	}
	if st.retired {
		st.mu.Unlock()
		return 0, errRetired
	}
	st.sent = true
	st.mu.Unlock()
	return write(p)
}

// judge releases the connection after an answer: to the next request when
// reuse holds, otherwise to none, closing it.
func (st *connState) judge(reuse bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.held = false
	if !reuse && !st.retired {
		st.retired = true
		st.tcp.Close()
		st.release()
	}
	st.judged.Broadcast()
}

// release uncounts the connection, once however often it is closed.
func (st *connState) release() {
	if st.pool != nil && st.released.CompareAndSwap(false, true) {
		st.pool.uncount()
	}
}

func (st *connState) isRetired() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.retired
}

func (st *connState) lastReadErr() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.readErr
}

// stateOf finds the state of the connection a response came on, by the
// local address the client noted of it.
func stateOf(addr net.Addr) *connState {
	if a, ok := addr.(connAddr); ok {
		return a.st
	}
	return nil
}

// connAddr is a connection's local address, leading back to its state.
type connAddr struct {
	net.Addr
	st *connState
}

// trackedConn is a connection the dialer opened, TCP or TLS over TCP: the
// client reads and writes HTTP through it, so its state sees every answer
// and every error.
type trackedConn struct {
	net.Conn
	st *connState
}

// LocalAddr is asked for at every response.
func (c *trackedConn) LocalAddr() net.Addr { return c.st.local }

func (c *trackedConn) Read(p []byte) (int, error) { return c.st.read(c.Conn.Read(p)) }

func (c *trackedConn) Write(p []byte) (int, error) { return c.st.write(p, c.Conn.Write) }

func (c *trackedConn) Close() error {
	defer c.st.release()
	return c.Conn.Close()
}

// trackedTLSConn keeps the Handshake method by which the client knows a
// connection is TLS already.
type trackedTLSConn struct {
	trackedConn
	tls *tls.Conn
}

func (c *trackedTLSConn) Handshake() error { return c.tls.Handshake() }

// roundTripper is the client's own, and judges each answer's connection
// before another request may go out on it. An answer outside 200..599
// ends the connection: a 101 hands it to another protocol, and an unknown
// status promises nothing about what follows. Retiring is needed for a 1xx
// above all: the client pooled its connection already, as the answer has
// no body; one whose body streams closes with the body.
type roundTripper struct{}

func (roundTripper) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	retry, err := fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
	if err != nil {
		return retry, err // the client closed the connection
	}
	if st := stateOf(resp.LocalAddr()); st != nil {
		code := resp.StatusCode()
		reuse := code >= 200 && code <= 599
		if !reuse {
			resp.SetConnectionClose()
		}
		st.judge(reuse)
	}
	return retry, nil
}
