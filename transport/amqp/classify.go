package amqp

import (
	"errors"
	"fmt"
	"strings"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/netclass"
)

// classify maps a failure to connect or publish onto a Result. The
// broker's refusals of the message itself (no such exchange, a message over
// its size limit) are rejected; its refusals of the login, the virtual host
// or a permission are the endpoint's to fix, so transport; a closed channel
// or connection is connection_closed, and network failures go by
// netclass.
func classify(err error, target, addr string) courier.Result {
	var de *dialError
	dialing := errors.As(err, &de)
	var ae *amqp.Error
	if errors.As(err, &ae) {
		res := courier.Result{Status: ae.Code, Response: fmt.Sprintf("%d %s", ae.Code, ae.Reason)}
		switch ae.Code {
		case amqp.NotFound, amqp.PreconditionFailed:
			res.Class = courier.ClassRejected
			res.Error = fmt.Sprintf("the broker refused the message for %s: %s", target, ae.Reason)
		case amqp.AccessRefused, amqp.NotAllowed, amqp.ResourceLocked, amqp.ResourceError, amqp.InternalError, amqp.NotImplemented:
			res.Class = courier.ClassTransport
			if dialing {
				res.Error = "the broker refused the connection: " + ae.Reason
			} else {
				res.Error = fmt.Sprintf("the broker refused to publish to %s: %s", target, ae.Reason)
			}
		case amqp.ConnectionForced, amqp.ChannelError:
			res.Class = courier.ClassConnectionClosed
			res.Error = "the broker closed the connection: " + ae.Reason
		case amqp.FrameError:
			// The client reports a connection that broke off as a frame
			// error carrying the read error.
			if !ae.Server && brokenOff(ae.Reason) {
				return courier.Result{Class: courier.ClassConnectionClosed, Error: fmt.Sprintf("connection to %s closed (%s)", addr, ae.Reason)}
			}
			res.Class = courier.ClassProtocol
			res.Error = "AMQP protocol error: " + ae.Reason
		case amqp.SyntaxError, amqp.CommandInvalid, amqp.UnexpectedFrame:
			res.Class = courier.ClassProtocol
			res.Error = "AMQP protocol error: " + ae.Reason
		default:
			res.Class = courier.ClassTransport
			res.Error = fmt.Sprintf("AMQP error %d: %s", ae.Code, ae.Reason)
		}
		return res
	}
	stage := netclass.Connected
	if dialing {
		stage = netclass.Connecting
	}
	if class, msg, ok := netclass.Classify(err, addr, stage); ok {
		return courier.Result{Class: class, Error: msg}
	}
	if errors.Is(err, amqp.ErrClosed) {
		return courier.Result{Class: courier.ClassConnectionClosed, Error: "the connection to the broker is closed"}
	}
	if dialing {
		return courier.Result{Class: courier.ClassTransport, Error: "cannot connect to the broker: " + err.Error()}
	}
	return courier.Result{Class: courier.ClassTransport, Error: fmt.Sprintf("publish to %s: %v", target, err)}
}

// brokenOff reports whether a client-side frame error is a read that ended
// because the connection closed or reset.
func brokenOff(reason string) bool {
	for _, s := range []string{"EOF", "connection reset", "broken pipe", "use of closed network connection"} {
		if strings.Contains(reason, s) {
			return true
		}
	}
	return false
}
