package http

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/netclass"
	"github.com/valyala/fasthttp"
)

// dialErr builds the error net/http's client returns when our dialer failed.
func dialErr(err error, timedOut bool) error {
	ce := &dialError{stage: netclass.Connecting, addr: "10.0.0.1:443", err: &net.OpError{Op: "dial", Net: "tcp", Err: err}, timedOut: timedOut, limit: 10 * time.Second}
	return &url.Error{Op: "Post", URL: "https://10.0.0.1/in", Err: ce}
}

// TestClassify covers the mapping with synthetic errors of the exact shapes
// net, crypto/tls and net/http produce, including those no loopback test can
// provoke reliably (an unreachable network, a resolver that times out by
// itself).
func TestClassify(t *testing.T) {
	t.Parallel()
	up := attemptState{host: "example.org", timeout: 5 * time.Second}
	for _, tc := range []struct {
		name  string
		err   error
		st    attemptState
		class courier.ErrorClass
		msg   string
	}{
		{"dial timeout", dialErr(os.ErrDeadlineExceeded, false), up, courier.ClassConnectTimeout, "no connection to 10.0.0.1:443 within 10s"},
		{"connect deadline", dialErr(errors.New("operation was canceled"), true), up, courier.ClassConnectTimeout, "no connection to 10.0.0.1:443 within 10s"},
		{"refused", dialErr(os.NewSyscallError("connect", syscall.ECONNREFUSED), false), up, courier.ClassConnectRefused, "connection refused by 10.0.0.1:443"},
		{"host unreachable", dialErr(os.NewSyscallError("connect", syscall.EHOSTUNREACH), false), up, courier.ClassConnectRefused, "10.0.0.1:443 is unreachable (no route to host)"},
		{"other dial error", dialErr(os.NewSyscallError("socket", syscall.EMFILE), false), up, courier.ClassTransport, "cannot connect to 10.0.0.1:443: too many open files"},
		{"name not found", dialErr(&net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}, false), up, courier.ClassDNS, "host x.invalid not found"},
		{"resolver timeout", dialErr(&net.DNSError{Err: "i/o timeout", Name: "x.example", IsTimeout: true}, false), up, courier.ClassDNS, "lookup of x.example timed out"},
		{"resolver failure", dialErr(&net.DNSError{Err: "server misbehaving", Name: "x.example"}, false), up, courier.ClassDNS, "lookup of x.example failed: server misbehaving"},
		{"handshake timeout", &dialError{stage: netclass.Handshaking, addr: "a:443", err: context.DeadlineExceeded, timedOut: true, limit: time.Second}, up, courier.ClassConnectTimeout, "TLS handshake with a:443 not done within 1s"},
		{"unknown authority", &dialError{stage: netclass.Handshaking, addr: "a:443", err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}, up, courier.ClassTLS, "certificate of a:443 is signed by an unknown authority"},
		{"expired", &dialError{stage: netclass.Handshaking, addr: "a:443", err: &tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired, Detail: "it ran out"}}}, up, courier.ClassTLS, "certificate of a:443 is invalid"},
		{"alert", &dialError{stage: netclass.Handshaking, addr: "a:443", err: tls.AlertError(40)}, up, courier.ClassTLS, "TLS handshake with a:443 failed: tls: handshake failure"},
		{"handshake eof", &dialError{stage: netclass.Handshaking, addr: "a:443", err: io.EOF}, up, courier.ClassTLS, "TLS handshake with a:443 failed: EOF"},
		{"attempt timeout before a connection", errNoConnection, attemptState{host: "h:1", timeout: time.Second}, courier.ClassConnectTimeout, "no connection to h:1 within 1s"},
		{"attempt timeout waiting", context.DeadlineExceeded, attemptState{host: "h", timeout: time.Second}, courier.ClassTimeout, "no response within 1s"},
		{"attempt timeout in the body", context.DeadlineExceeded, attemptState{host: "h", timeout: time.Second, answerStarted: true}, courier.ClassTimeout, "response not complete within 1s"},
		{"reset", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, up, courier.ClassConnectionClosed, "connection to example.org closed before the response was complete (connection reset by peer)"},
		{"broken pipe", &net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPIPE)}, up, courier.ClassConnectionClosed, "broken pipe"},
		{"eof", io.EOF, up, courier.ClassConnectionClosed, "(EOF)"},
		{"closed before the first byte", fasthttp.ErrConnectionClosed, up, courier.ClassConnectionClosed, "closed before the response was complete (EOF)"},
		{"unexpected eof", io.ErrUnexpectedEOF, up, courier.ClassConnectionClosed, "(unexpected EOF)"},
		{"client timeout", fasthttp.ErrTimeout, attemptState{host: "h", timeout: time.Second}, courier.ClassTimeout, "no response within 1s"},
		{"read timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, up, courier.ClassTimeout, "no response within 5s"},
		{"other socket error", &net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ENOBUFS)}, up, courier.ClassTransport, "example.org: no buffer space available"},
		{"malformed", fmt.Errorf("error when reading response headers: %w", errors.New(`cannot find whitespace in the first line of response "x": buffer size=3, contents: "x\r\n"`)), up, courier.ClassProtocol, `malformed response from example.org: cannot find whitespace in the first line of response "x"`},
	} {
		class, msg := classify(tc.err, tc.st)
		if class != tc.class || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: classify = %q, %q; want %q, %q", tc.name, class, msg, tc.class, tc.msg)
		}
	}
}

func TestEveryClassIsDefined(t *testing.T) {
	t.Parallel()
	for _, c := range []courier.ErrorClass{courier.ClassDNS, courier.ClassConnectRefused, courier.ClassConnectTimeout,
		courier.ClassTLS, courier.ClassTimeout, courier.ClassConnectionClosed, courier.ClassProtocol,
		courier.ClassHTTP429, courier.ClassHTTP5xx, courier.ClassHTTP4xx, courier.ClassTransport, courier.ClassRejected, courier.ClassAuth} {
		if !c.Valid() {
			t.Errorf("class %q used by the transport is not defined", c)
		}
	}
}
