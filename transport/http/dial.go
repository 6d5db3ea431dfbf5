package http

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/courier-gw/courier/internal/netclass"
)

// dialer opens the connections of one endpoint's pool within the connect
// timeout (and what is left of the attempt's), and marks its errors so that
// classify can tell a failed connect or handshake from a failure later on.
type dialer struct {
	net            net.Dialer
	connectTimeout time.Duration
	tls            *tls.Config
	t              *Transport // counts the connections against MaxConns
	pool           *client    // the pool the connections are for
	guard          guard      // judges the receiver's addresses behind a proxy
	proxy          *proxyURL  // nil: straight to the receiver
}

// errConnectTimeout is the cause of a dial's context when the connect
// timeout ran out.
var errConnectTimeout = errors.New("connect timeout")

// dial opens a TCP connection; left is what remains of the attempt.
func (d *dialer) dial(addr string, left time.Duration) (net.Conn, error) {
	return d.open(addr, left, false)
}

// dialTLS opens a TCP connection and makes the TLS handshake on it; the
// pool takes a handshaken connection as it is.
func (d *dialer) dialTLS(addr string, left time.Duration) (net.Conn, error) {
	return d.open(addr, left, true)
}

// open counts a connection against MaxConns and opens it, with the TLS
// handshake when withTLS, bounded by the connect timeout and by what is
// left of the attempt. A connection that does not open is uncounted.
func (d *dialer) open(addr string, left time.Duration, withTLS bool) (net.Conn, error) {
	d.t.count(d.pool)
	limit := d.connectTimeout
	if left > 0 {
		limit = min(limit, left)
	}
	ctx, cancel := context.WithTimeoutCause(context.Background(), limit, errConnectTimeout)
	defer cancel()
	fail := func(stage netclass.Stage, err error) error {
		d.pool.uncount()
		return &dialError{stage: stage, addr: addr, err: err, timedOut: context.Cause(ctx) == errConnectTimeout, limit: limit}
	}
	var conn net.Conn
	var err error
	if d.proxy != nil {
		conn, err = d.tunnel(ctx, addr)
	} else {
		conn, err = d.net.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, fail(netclass.Connecting, err)
	}
	if !withTLS {
		return &trackedConn{Conn: conn, st: newConnState(conn, d.pool)}, nil
	}
	cfg := d.tls.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"http/1.1"}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fail(netclass.Handshaking, err)
	}
	st := newConnState(conn, d.pool)
	return &trackedTLSConn{trackedConn: trackedConn{Conn: tc, st: st}, tls: tc}, nil
}

// dialError is a failed TCP connect (including the name lookup), or a
// failed TLS handshake on a connected socket: stage tells which.
type dialError struct {
	stage    netclass.Stage // netclass.Connecting or netclass.Handshaking
	addr     string
	err      error
	timedOut bool
	limit    time.Duration // the time it had: the connect timeout or what was left of the attempt
}

func (e *dialError) Error() string {
	if e.stage == netclass.Handshaking {
		return "TLS handshake with " + e.addr + ": " + e.err.Error()
	}
	return "connect to " + e.addr + ": " + e.err.Error()
}

func (e *dialError) Unwrap() error { return e.err }
