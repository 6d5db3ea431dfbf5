package http

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/netclass"
	"github.com/valyala/fasthttp"
)

// attemptState is what classify needs to know about the attempt besides its
// error: where it went, its timeout and whether the answer had begun.
type attemptState struct {
	host          string
	timeout       time.Duration // the endpoint's attempt timeout
	answerStarted bool          // the first byte of the response arrived
}

// classify maps the error of one attempt onto exactly one error class and a
// short sentence for people. Order matters: a failed connect or handshake is
// known for what it is even when the attempt's time has run out meanwhile.
// The connect and the handshake go by netclass, as in every TCP transport;
// what fails after them is about the response, and is worded here.
func classify(err error, st attemptState) (courier.ErrorClass, string) {
	var de *dialError
	if errors.As(err, &de) {
		return classifyDial(de)
	}
	if errors.Is(err, errNoConnection) {
		return courier.ClassConnectTimeout, fmt.Sprintf("no connection to %s within %s", st.host, st.timeout)
	}
	if isTimeout(err) {
		if st.answerStarted {
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
	var op *net.OpError
	var errno syscall.Errno
	if errors.As(err, &op) || errors.As(err, &errno) {
		return courier.ClassTransport, fmt.Sprintf("%s: %s", st.host, cause(err))
	}
	var small *fasthttp.ErrSmallBuffer
	if errors.As(err, &small) {
		return courier.ClassProtocol, fmt.Sprintf("the response head from %s is longer than %d KiB", st.host, maxResponseHead>>10)
	}
	// What is left comes from reading the answer: a status line, header or
	// chunk that does not parse.
	return courier.ClassProtocol, fmt.Sprintf("malformed response from %s: %s", st.host, parseProblem(cause(err)))
}

// classifyDial classifies a failed TCP connect or TLS handshake. Its limit
// may be what was left of the attempt, which messages give to the
// millisecond.
func classifyDial(e *dialError) (courier.ErrorClass, string) {
	var blocked *blockedError
	if errors.As(e.err, &blocked) {
		return courier.ClassRejected, "blocked by the SSRF guard: " + blocked.Error()
	}
	if pe, ok := isProxyError(e.err); ok {
		return courier.ClassTransport, pe.Error()
	}
	var pd *proxyDialError
	if errors.As(e.err, &pd) {
		// The proxy is where the attempt goes first: its failure counts as
		// the receiver's would, and says whose it is.
		class, msg := classifyDial(&dialError{stage: e.stage, addr: pd.proxy, err: pd.err, timedOut: e.timedOut, limit: e.limit})
		return class, "the proxy " + pd.proxy + ": " + msg
	}
	op := netclass.Op{Addr: e.addr, Stage: e.stage, Limit: e.limit.Round(time.Millisecond), TimedOut: e.timedOut}
	if class, msg, ok := op.Classify(e.err); ok {
		return class, msg // always ok while handshaking
	}
	return courier.ClassTransport, fmt.Sprintf("cannot connect to %s: %s", e.addr, cause(e.err))
}

// closedEarly reports whether err says the receiver closed or reset the
// connection before its answer was complete.
func closedEarly(err error) bool {
	return errors.Is(err, fasthttp.ErrConnectionClosed) || netclass.Closed(err)
}

// isTimeout reports whether err says the attempt's time ran out.
func isTimeout(err error) bool {
	if errors.Is(err, fasthttp.ErrTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// cause returns the part of err's message worth showing, without the
// addresses a net.OpError repeats. A connection closed before any answer
// is an EOF, whatever advice the HTTP client words around it.
func cause(err error) string {
	if errors.Is(err, fasthttp.ErrConnectionClosed) {
		return io.EOF.Error()
	}
	return netclass.Cause(err)
}

// parseProblem trims the HTTP client's words on a response it could not
// parse to the problem: without its preamble, and without the copy of the
// bytes it read, which the attempt's response excerpt would be the place
// for.
func parseProblem(msg string) string {
	msg = strings.TrimPrefix(msg, "error when reading response headers: ")
	if i := strings.Index(msg, ": buffer size="); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
