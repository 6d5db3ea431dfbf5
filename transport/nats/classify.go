package nats

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/netclass"
)

// classify maps a failure to connect or publish onto a Result. No stream
// for the subject, or a message over the server's size limit, is rejected:
// that message will not go by trying again. A stream that refuses it for
// now (full, limits), the login or a JetStream outage are transport;
// network failures go by netclass.
func classify(err error, subject, addr string, timeout time.Duration) courier.Result {
	var de *dialError
	dialing := errors.As(err, &de)
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return courier.Result{Class: courier.ClassRejected, Error: fmt.Sprintf("no JetStream stream takes subject %q", subject)}
	case errors.Is(err, nats.ErrMaxPayload):
		return courier.Result{Class: courier.ClassRejected, Error: "the message is larger than the server's max_payload"}
	case errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired), errors.Is(err, nats.ErrAuthRevoked):
		return courier.Result{Class: courier.ClassTransport, Error: "the server refused the login: " + err.Error()}
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return courier.Result{Class: courier.ClassTransport, Error: "JetStream is not enabled on the server"}
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return courier.Result{Class: courier.ClassTransport, Status: api.Code,
			Response: fmt.Sprintf("%d %d %s", api.Code, api.ErrorCode, api.Description),
			Error:    fmt.Sprintf("the stream refused the message on %q: %s", subject, api.Description)}
	}
	stage := netclass.Connected
	if dialing {
		stage = netclass.Connecting
		if de.cause != nil {
			err = de.cause
		}
	}
	if class, msg, ok := netclass.Classify(err, addr, stage); ok {
		return courier.Result{Class: class, Error: msg}
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, nats.ErrTimeout):
		if dialing {
			return courier.Result{Class: courier.ClassConnectTimeout, Error: fmt.Sprintf("no connection to %s in time", addr)}
		}
		return courier.Result{Class: courier.ClassTimeout, Error: fmt.Sprintf("no ack from the stream on %q within %s", subject, timeout)}
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected), errors.Is(err, nats.ErrConnectionDraining),
		errors.Is(err, nats.ErrStaleConnection):
		return courier.Result{Class: courier.ClassConnectionClosed, Error: fmt.Sprintf("connection to %s closed: %v", addr, err)}
	case dialing:
		return courier.Result{Class: courier.ClassTransport, Error: fmt.Sprintf("cannot connect to %s: %v", addr, err)}
	}
	return courier.Result{Class: courier.ClassTransport, Error: fmt.Sprintf("publish on %q: %v", subject, err)}
}

// serverAddr is the host:port of the first server of a NATS URL list, for
// error messages; never the credentials.
func serverAddr(urls string) string {
	first, _, _ := strings.Cut(urls, ",")
	u, err := url.Parse(strings.TrimSpace(first))
	if err != nil || u.Host == "" {
		return "the NATS server"
	}
	if u.Port() == "" {
		return u.Host + ":4222"
	}
	return u.Host
}
