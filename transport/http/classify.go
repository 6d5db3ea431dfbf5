package http

import (
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
	"time"

	"github.com/courier-gw/courier"
)

// attemptState is what classify needs to know about the attempt besides its
// error: where it went, how far it got and why its context ended.
type attemptState struct {
	host          string
	timeout       time.Duration // the endpoint's attempt timeout
	timedOut      bool          // the attempt timeout ran out
	canceled      bool          // the caller gave up on the attempt
	resolving     bool          // a name lookup was under way
	connected     bool          // a connection was handed to the request
	answerStarted bool          // the first byte of the response arrived
}

// classify maps the error of one attempt onto exactly one error class and a
// short sentence for people. Order matters: a failed connect or handshake is
// known for what it is even when the attempt's time has run out meanwhile.
func classify(err error, st attemptState) (courier.ErrorClass, string) {
	var ce *connectError
	if errors.As(err, &ce) {
		return classifyConnect(ce)
	}
	var he *handshakeError
	if errors.As(err, &he) {
		return classifyHandshake(he)
	}
	if st.canceled {
		return courier.ClassTransport, "attempt canceled"
	}
	if st.timedOut || errors.Is(err, errAttemptTimeout) {
		switch {
		case st.resolving && !st.connected:
			return courier.ClassDNS, fmt.Sprintf("lookup of %s not done within %s", hostOnly(st.host), st.timeout)
		case !st.connected:
			return courier.ClassConnectTimeout, fmt.Sprintf("no connection to %s within %s", st.host, st.timeout)
		case st.answerStarted:
			return courier.ClassTimeout, fmt.Sprintf("response not complete within %s", st.timeout)
		}
		return courier.ClassTimeout, fmt.Sprintf("no response within %s", st.timeout)
	}
	if closedEarly(err) {
		return courier.ClassConnectionClosed, fmt.Sprintf("connection to %s closed before the response was complete (%s)", st.host, cause(err))
	}
	var alert *net.OpError
	if errors.As(err, &alert) && alert.Op == "remote error" {
		// A TLS alert from the receiver after the handshake: with TLS 1.3
		// the server judges the client certificate only then.
		return courier.ClassTLS, fmt.Sprintf("%s refused the TLS session: %s", st.host, cause(err))
	}
	var ne net.Error
	if errors.As(unwrapURL(err), &ne) && ne.Timeout() {
		return courier.ClassTimeout, fmt.Sprintf("no response within %s", st.timeout)
	}
	var op *net.OpError
	var errno syscall.Errno
	if errors.As(err, &op) || errors.As(err, &errno) {
		return courier.ClassTransport, fmt.Sprintf("%s: %s", st.host, cause(err))
	}
	// What is left comes from net/http reading the answer: a status line,
	// header or chunk it cannot parse.
	return courier.ClassProtocol, fmt.Sprintf("malformed response from %s: %s", st.host, cause(err))
}

// classifyConnect classifies a failed TCP connect.
func classifyConnect(e *connectError) (courier.ErrorClass, string) {
	var blocked *blockedError
	if errors.As(e.err, &blocked) {
		return courier.ClassRejected, "blocked by the SSRF guard: " + blocked.Error()
	}
	var dns *net.DNSError
	if errors.As(e.err, &dns) {
		host := dns.Name
		if host == "" {
			host = hostOnly(e.addr)
		}
		switch {
		case dns.IsNotFound:
			return courier.ClassDNS, fmt.Sprintf("host %s not found", host)
		case dns.IsTimeout || e.timedOut:
			return courier.ClassDNS, fmt.Sprintf("lookup of %s timed out", host)
		}
		return courier.ClassDNS, fmt.Sprintf("lookup of %s failed: %s", host, dns.Err)
	}
	var ne net.Error
	switch {
	case e.timedOut, errors.As(e.err, &ne) && ne.Timeout():
		return courier.ClassConnectTimeout, fmt.Sprintf("no connection to %s within %s", e.addr, e.limit)
	case errors.Is(e.err, syscall.ECONNREFUSED):
		return courier.ClassConnectRefused, "connection refused by " + e.addr
	case errors.Is(e.err, syscall.EHOSTUNREACH), errors.Is(e.err, syscall.ENETUNREACH):
		// The network answered no at once, as a refusal does; a slow
		// no is a connect timeout instead.
		return courier.ClassConnectRefused, fmt.Sprintf("%s is unreachable (%s)", e.addr, cause(e.err))
	}
	return courier.ClassTransport, fmt.Sprintf("cannot connect to %s: %s", e.addr, cause(e.err))
}

// classifyHandshake classifies a failed TLS handshake.
func classifyHandshake(e *handshakeError) (courier.ErrorClass, string) {
	var ne net.Error
	if e.timedOut || (errors.As(e.err, &ne) && ne.Timeout()) {
		return courier.ClassConnectTimeout, fmt.Sprintf("TLS handshake with %s not done within %s", e.addr, e.limit)
	}
	var (
		verr   *tls.CertificateVerificationError
		unk    x509.UnknownAuthorityError
		host   x509.HostnameError
		inv    x509.CertificateInvalidError
		record tls.RecordHeaderError
	)
	switch {
	case errors.As(e.err, &unk):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s is signed by an unknown authority", e.addr)
	case errors.As(e.err, &host):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s is not valid for %s", e.addr, host.Host)
	case errors.As(e.err, &inv):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s is invalid: %s", e.addr, inv.Error())
	case errors.As(e.err, &verr):
		return courier.ClassTLS, fmt.Sprintf("certificate of %s not accepted: %s", e.addr, cause(verr.Err))
	case errors.As(e.err, &record):
		return courier.ClassTLS, fmt.Sprintf("%s does not speak TLS", e.addr)
	}
	return courier.ClassTLS, fmt.Sprintf("TLS handshake with %s failed: %s", e.addr, cause(e.err))
}

// closedEarly reports whether err says the receiver closed or reset the
// connection before its answer was complete.
func closedEarly(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, net.ErrClosed) ||
		strings.Contains(err.Error(), "server closed idle connection")
}

// unwrapURL strips the *url.Error that net/http's client wraps around every
// failure: it names the method and URL, which the attempt record has already,
// and it claims to be a net.Error whatever it holds.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// cause returns the part of err's message worth showing: without the URL
// and net/http's "connection broken" preamble, and without the addresses a
// net.OpError repeats.
func cause(err error) string {
	err = unwrapURL(err)
	for {
		msg := err.Error()
		if strings.HasPrefix(msg, "net/http: HTTP/1.x transport connection broken: ") {
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
				continue
			}
		}
		break
	}
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

// hostOnly strips the port from a host:port.
func hostOnly(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return hostport
}
