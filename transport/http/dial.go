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
}

// errConnectTimeout is the cause of a dial's context when the connect
// timeout ran out.
var errConnectTimeout = errors.New("connect timeout")

// dial opens a TCP connection; left is what remains of the attempt.
func (d *dialer) dial(addr string, left time.Duration) (net.Conn, error) {
	d.t.count(d.pool)
	ctx, cancel, limit := d.context(left)
	defer cancel()
	conn, err := d.dialTCP(ctx, addr, limit)
	if err != nil {
		d.pool.uncount()
		return nil, err
	}
	return &trackedConn{Conn: conn, st: newConnState(conn, d.pool)}, nil
}

// context bounds a connect and handshake by the connect timeout and by
// what is left of the attempt; limit is the bound it applied.
func (d *dialer) context(left time.Duration) (ctx context.Context, cancel context.CancelFunc, limit time.Duration) {
	limit = d.connectTimeout
	if left > 0 {
		limit = min(limit, left)
	}
	ctx, cancel = context.WithTimeoutCause(context.Background(), limit, errConnectTimeout)
	return ctx, cancel, limit
}

// dialTCP connects to addr. limit is the context's bound, for the message.
func (d *dialer) dialTCP(ctx context.Context, addr string, limit time.Duration) (net.Conn, error) {
	conn, err := d.net.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &dialError{stage: netclass.Connecting, addr: addr, err: err, timedOut: context.Cause(ctx) == errConnectTimeout, limit: limit}
	}
	return conn, nil
}

// dialTLS opens a TCP connection and makes the TLS handshake on it; the
// pool takes a handshaken connection as it is.
func (d *dialer) dialTLS(addr string, left time.Duration) (net.Conn, error) {
	d.t.count(d.pool)
	ctx, cancel, limit := d.context(left)
	defer cancel()
	conn, err := d.dialTCP(ctx, addr, limit)
	if err != nil {
		d.pool.uncount()
		return nil, err
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
		d.pool.uncount()
		return nil, &dialError{stage: netclass.Handshaking, addr: addr, err: err, timedOut: context.Cause(ctx) == errConnectTimeout, limit: limit}
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
