// Package netclass maps the errors of a network connection onto courier's
// error classes (DESIGN §3), for the transports that speak their own
// protocol over TCP (smtp, amqp, nats). The http transport has finer rules
// of its own, as it sees every step of a request.
package netclass

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"

	"github.com/courier-gw/courier"
)

// Stage says how far a connection got when it failed: a timeout while
// connecting is a connect_timeout, one later a timeout.
type Stage int

// The stages.
const (
	Connecting Stage = iota // resolving, connecting, or the TLS handshake
	Connected               // talking to the peer
)

// Classify maps err, met at stage on the connection to addr, onto a class
// and a short sentence for people. ok is false when err is not a network
// error at all; the caller classifies it by its protocol.
func Classify(err error, addr string, stage Stage) (class courier.ErrorClass, msg string, ok bool) {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		host := dns.Name
		if host == "" {
			host = hostOnly(addr)
		}
		switch {
		case dns.IsNotFound:
			return courier.ClassDNS, fmt.Sprintf("host %s not found", host), true
		case dns.IsTimeout:
			return courier.ClassDNS, fmt.Sprintf("lookup of %s timed out", host), true
		}
		return courier.ClassDNS, fmt.Sprintf("lookup of %s failed: %s", host, dns.Err), true
	}
	if c, m, ok := classifyTLS(err, addr); ok {
		return c, m, true
	}
	var ne net.Error
	timedOut := errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
	switch {
	case timedOut && stage == Connecting:
		return courier.ClassConnectTimeout, fmt.Sprintf("no connection to %s in time", addr), true
	case timedOut:
		return courier.ClassTimeout, fmt.Sprintf("no answer from %s in time", addr), true
	case errors.Is(err, syscall.ECONNREFUSED):
		return courier.ClassConnectRefused, "connection refused by " + addr, true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return courier.ClassConnectRefused, fmt.Sprintf("%s is unreachable (%s)", addr, Cause(err)), true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED), errors.Is(err, net.ErrClosed):
		return courier.ClassConnectionClosed, fmt.Sprintf("connection to %s closed (%s)", addr, Cause(err)), true
	}
	var op *net.OpError
	var errno syscall.Errno
	if errors.As(err, &op) || errors.As(err, &errno) {
		if stage == Connecting {
			return courier.ClassTransport, fmt.Sprintf("cannot connect to %s: %s", addr, Cause(err)), true
		}
		return courier.ClassTransport, fmt.Sprintf("%s: %s", addr, Cause(err)), true
	}
	return "", "", false
}

// classifyTLS recognises a failed TLS handshake.
func classifyTLS(err error, addr string) (courier.ErrorClass, string, bool) {
	var (
		verr   *tls.CertificateVerificationError
		unk    x509.UnknownAuthorityError
		host   x509.HostnameError
		inv    x509.CertificateInvalidError
		record tls.RecordHeaderError
		alert  tls.AlertError
	)
	switch {
	case errors.As(err, &unk):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s is signed by an unknown authority", addr), true
	case errors.As(err, &host):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s is not valid for %s", addr, host.Host), true
	case errors.As(err, &inv):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s is invalid: %s", addr, inv.Error()), true
	case errors.As(err, &verr):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s not accepted: %s", addr, Cause(verr.Err)), true
	case errors.As(err, &record):
		return courier.ClassTLS, fmt.Sprintf("%s does not speak TLS", addr), true
	case errors.As(err, &alert):
		return courier.ClassTLS, fmt.Sprintf("TLS handshake with %s failed: %s", addr, alert.Error()), true
	}
	return "", "", false
}

// Cause returns the part of err's message worth showing, without the
// addresses a net.OpError repeats.
func Cause(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		err = op.Err
	}
	var sys *os.SyscallError
	if errors.As(err, &sys) {
		return sys.Err.Error()
	}
	return err.Error()
}

func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
