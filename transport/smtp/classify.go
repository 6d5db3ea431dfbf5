package smtp

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/netclass"
)

// classify maps the failure of one session onto a Result. A reply of the
// server decides by its code: 4xx is transport (the server asks to try
// later); 5xx to MAIL, RCPT or DATA is rejected (the server will not take
// this message). A 5xx before MAIL (to EHLO, STARTTLS or AUTH) is about the
// endpoint's settings, not the message, so it is transport too: the
// message waits for the endpoint to be fixed instead of being suspended.
func classify(err error, st *session) courier.Result {
	var reply *textproto.Error
	if errors.As(err, &reply) {
		text := fmt.Sprintf("%d %s", reply.Code, oneLine(reply.Msg))
		res := courier.Result{Status: reply.Code, Response: clip(text, courier.MaxResponseExcerpt),
			Error: fmt.Sprintf("SMTP %s after %s", clip(text, 200), st.stage)}
		switch {
		case reply.Code >= 500 && reply.Code <= 599 && st.message:
			res.Class = courier.ClassRejected
		case reply.Code >= 400 && reply.Code <= 599:
			res.Class = courier.ClassTransport
		default:
			res.Class = courier.ClassProtocol
			res.Error = fmt.Sprintf("unexpected SMTP reply %s after %s", clip(text, 200), st.stage)
		}
		return res
	}
	stage := netclass.Connecting
	if st.connected {
		stage = netclass.Connected
	}
	var te *tlsError
	if errors.As(err, &te) {
		if class, msg, ok := netclass.Classify(te.err, st.addr, netclass.Connecting); ok && class != courier.ClassTransport {
			return courier.Result{Class: class, Error: "STARTTLS: " + msg}
		}
		return courier.Result{Class: courier.ClassTLS, Error: fmt.Sprintf("STARTTLS with %s failed: %s", st.addr, netclass.Cause(te.err))}
	}
	if class, msg, ok := netclass.Classify(err, st.addr, stage); ok {
		if st.connected {
			msg += " during " + st.stage
		}
		return courier.Result{Class: class, Error: msg}
	}
	var pe textproto.ProtocolError
	if errors.As(err, &pe) {
		return courier.Result{Class: courier.ClassProtocol, Error: fmt.Sprintf("malformed SMTP reply from %s during %s: %s", st.addr, st.stage, pe)}
	}
	return courier.Result{Class: courier.ClassTransport, Error: fmt.Sprintf("%s during %s: %v", st.addr, st.stage, err)}
}

// oneLine joins the lines of a multi-line reply.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// clip shortens s to at most n bytes.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
