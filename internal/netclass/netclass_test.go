package netclass

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier"
)

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestClassify(t *testing.T) {
	t.Parallel()
	op := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	for _, tc := range []struct {
		name  string
		err   error
		stage Stage
		class courier.ErrorClass
		msg   string
		ok    bool
	}{
		{"not found", op(&net.DNSError{Err: "no such host", Name: "mx.invalid", IsNotFound: true}), Connecting, courier.ClassDNS, "host mx.invalid not found", true},
		{"resolver timeout", op(&net.DNSError{Err: "i/o timeout", Name: "mx.example", IsTimeout: true}), Connecting, courier.ClassDNS, "lookup of mx.example timed out", true},
		{"refused", op(os.NewSyscallError("connect", syscall.ECONNREFUSED)), Connecting, courier.ClassConnectRefused, "connection refused by mx:25", true},
		{"unreachable", op(os.NewSyscallError("connect", syscall.EHOSTUNREACH)), Connecting, courier.ClassConnectRefused, "mx:25 is unreachable (no route to host)", true},
		{"connect timeout", op(timeoutError{}), Connecting, courier.ClassConnectTimeout, "no connection to mx:25 in time", true},
		{"read timeout", &net.OpError{Op: "read", Err: timeoutError{}}, Connected, courier.ClassTimeout, "no answer from mx:25 in time", true},
		{"eof", io.EOF, Connected, courier.ClassConnectionClosed, "connection to mx:25 closed (EOF)", true},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, Connected, courier.ClassConnectionClosed, "connection to mx:25 closed (connection reset by peer)", true},
		{"unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, Connecting, courier.ClassTLS, "certificate of mx:25 is signed by an unknown authority", true},
		{"no TLS", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, Connecting, courier.ClassTLS, "mx:25 does not speak TLS", true},
		{"other socket error", op(os.NewSyscallError("socket", syscall.EMFILE)), Connecting, courier.ClassTransport, "cannot connect to mx:25: too many open files", true},
		{"not a network error", errors.New("550 no such user"), Connected, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class, msg, ok := Classify(tc.err, "mx:25", tc.stage)
			if class != tc.class || msg != tc.msg || ok != tc.ok {
				t.Errorf("got %q %q %v, want %q %q %v", class, msg, ok, tc.class, tc.msg, tc.ok)
			}
		})
	}
}

// TestOp covers what a caller adds to the error: its own deadline, the
// stage's time limit and a TLS handshake told apart from the connect.
func TestOp(t *testing.T) {
	t.Parallel()
	op := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	connect := Op{Addr: "a:443", Stage: Connecting, Limit: 10 * time.Second}
	handshake := Op{Addr: "a:443", Stage: Handshaking, Limit: time.Second}
	timedOut := func(o Op) Op { o.TimedOut = true; return o }
	for _, tc := range []struct {
		name  string
		op    Op
		err   error
		class courier.ErrorClass
		msg   string
	}{
		{"connect timeout names the limit", connect, op(timeoutError{}), courier.ClassConnectTimeout, "no connection to a:443 within 10s"},
		{"deadline of the caller", timedOut(connect), op(errors.New("operation was canceled")), courier.ClassConnectTimeout, "no connection to a:443 within 10s"},
		{"lookup cut short by the caller", timedOut(connect), op(&net.DNSError{Err: "operation was canceled", Name: "x.example"}), courier.ClassDNS, "lookup of x.example timed out"},
		{"lookup failure", connect, op(&net.DNSError{Err: "server misbehaving", Name: "x.example"}), courier.ClassDNS, "lookup of x.example failed: server misbehaving"},
		{"read timeout names the limit", Op{Addr: "a:443", Stage: Connected, Limit: 5 * time.Second}, &net.OpError{Op: "read", Err: timeoutError{}}, courier.ClassTimeout, "no answer from a:443 within 5s"},
		{"handshake timeout", timedOut(handshake), context.DeadlineExceeded, courier.ClassConnectTimeout, "TLS handshake with a:443 not done within 1s"},
		{"handshake deadline wins over an alert", timedOut(handshake), tls.AlertError(40), courier.ClassConnectTimeout, "TLS handshake with a:443 not done within 1s"},
		{"handshake timeout without a limit", Op{Addr: "a:443", Stage: Handshaking}, os.ErrDeadlineExceeded, courier.ClassConnectTimeout, "TLS handshake with a:443 not done in time"},
		{"wrong host", handshake, &tls.CertificateVerificationError{Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "b.example"}}, courier.ClassTLS, "certificate of a:443 is not valid for b.example"},
		{"expired", handshake, &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired, Detail: "it ran out"}}, courier.ClassTLS, "certificate of a:443 is invalid: x509: certificate has expired or is not yet valid: it ran out"},
		{"other verification failure", handshake, &tls.CertificateVerificationError{Err: errors.New("x509: too many intermediates")}, courier.ClassTLS, "certificate of a:443 not accepted: x509: too many intermediates"},
		{"alert", handshake, &net.OpError{Op: "remote error", Err: tls.AlertError(40)}, courier.ClassTLS, "TLS handshake with a:443 failed: tls: handshake failure"},
		{"not TLS", handshake, tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, courier.ClassTLS, "a:443 does not speak TLS"},
		{"closed while handshaking", handshake, io.EOF, courier.ClassTLS, "TLS handshake with a:443 failed: EOF"},
		{"reset while handshaking", handshake, &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, courier.ClassTLS, "TLS handshake with a:443 failed: connection reset by peer"},
		{"anything while handshaking", handshake, errors.New("tls: unexpected message"), courier.ClassTLS, "TLS handshake with a:443 failed: tls: unexpected message"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			class, msg, ok := tc.op.Classify(tc.err)
			if class != tc.class || msg != tc.msg || !ok {
				t.Errorf("got %q %q %v, want %q %q true", class, msg, ok, tc.class, tc.msg)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{io.EOF, true},
		{fmt.Errorf("read body: %w", io.ErrUnexpectedEOF), true},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, true},
		{syscall.ECONNABORTED, true},
		{net.ErrClosed, true},
		{&net.OpError{Op: "read", Err: timeoutError{}}, false},
		{syscall.ECONNREFUSED, false},
		{errors.New("malformed HTTP response"), false},
	} {
		if got := Closed(tc.err); got != tc.want {
			t.Errorf("Closed(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
