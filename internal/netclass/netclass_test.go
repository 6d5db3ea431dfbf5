package netclass

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

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
