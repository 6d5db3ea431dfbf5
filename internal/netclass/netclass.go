// Package netclass maps the errors of a network connection onto courier's
// error classes (docs/design.md §3), for every transport that speaks over TCP. The
// http transport uses it for the connect and the TLS handshake; what fails
// after that is about the response, and it words that itself.
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
	"time"

	"github.com/courier-gw/courier"
)

// Stage says how far a connection got when it failed: a timeout while
// connecting is a connect_timeout, one later a timeout.
type Stage int

// The stages.
const (
	Connecting  Stage = iota // resolving, connecting, or the TLS handshake
	Connected                // talking to the peer
	Handshaking              // a TLS handshake the caller tells apart from the connect
)

// Op describes the network operation that failed: where it went, how far it
// got, and what the caller knows of its own deadline.
type Op struct {
	Addr  string // host:port of the peer
	Stage Stage
	// Limit is the time the stage had; messages name it when it is set
	// and say "in time" when not.
	Limit time.Duration
	// TimedOut says the caller's deadline for the stage ran out: the
	// failure counts as a timeout even when err does not say so, as a dial
	// whose context ended reports "operation was canceled".
	TimedOut bool
}

// Classify maps err, met at stage on the connection to addr, onto a class
// and a short sentence for people. ok is false when err is not a network
// error at all; the caller classifies it by its protocol.
func Classify(err error, addr string, stage Stage) (class courier.ErrorClass, msg string, ok bool) {
	return Op{Addr: addr, Stage: stage}.Classify(err)
}

// Classify maps err, met in o, onto a class and a short sentence for
// people. ok is false when err is not a network error at all; the caller
// classifies it by its protocol. In the Handshaking stage ok is always
// true: whatever ends a handshake but a timeout is a TLS failure.
func (o Op) Classify(err error) (class courier.ErrorClass, msg string, ok bool) {
	addr := o.Addr
	var dns *net.DNSError
	if errors.As(err, &dns) {
		host := dns.Name
		if host == "" {
			host = hostOnly(addr)
		}
		switch {
		case dns.IsNotFound:
			return courier.ClassDNS, fmt.Sprintf("host %s not found", host), true
		case dns.IsTimeout || o.TimedOut:
			return courier.ClassDNS, fmt.Sprintf("lookup of %s timed out", host), true
		}
		return courier.ClassDNS, fmt.Sprintf("lookup of %s failed: %s", host, dns.Err), true
	}
	// None of the TLS errors below is a timeout, so this order matters only
	// with TimedOut: a handshake whose time ran out is a timeout, whatever
	// it ended with.
	var ne net.Error
	if o.TimedOut || errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded) {
		switch o.Stage {
		case Connecting:
			return courier.ClassConnectTimeout, fmt.Sprintf("no connection to %s %s", addr, o.within()), true
		case Handshaking:
			return courier.ClassConnectTimeout, fmt.Sprintf("TLS handshake with %s not done %s", addr, o.within()), true
		}
		return courier.ClassTimeout, fmt.Sprintf("no answer from %s %s", addr, o.within()), true
	}
	if c, m, ok := classifyTLS(err, addr); ok {
		return c, m, true
	}
	if o.Stage == Handshaking {
		return courier.ClassTLS, fmt.Sprintf("TLS handshake with %s failed: %s", addr, Cause(err)), true
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return courier.ClassConnectRefused, "connection refused by " + addr, true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		// The network answered no at once, as a refusal does; a slow no
		// is a connect timeout instead.
		return courier.ClassConnectRefused, fmt.Sprintf("%s is unreachable (%s)", addr, Cause(err)), true
	case Closed(err):
		return courier.ClassConnectionClosed, fmt.Sprintf("connection to %s closed (%s)", addr, Cause(err)), true
	}
	var op *net.OpError
	var errno syscall.Errno
	if errors.As(err, &op) || errors.As(err, &errno) {
		if o.Stage == Connecting {
			return courier.ClassTransport, fmt.Sprintf("cannot connect to %s: %s", addr, Cause(err)), true
		}
		return courier.ClassTransport, fmt.Sprintf("%s: %s", addr, Cause(err)), true
	}
	return "", "", false
}

// within says how long the stage had, for messages.
func (o Op) within() string {
	if o.Limit > 0 {
		return "within " + o.Limit.String()
	}
	return "in time"
}

// Closed reports whether err says the peer closed or reset the connection.
func Closed(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed)
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
