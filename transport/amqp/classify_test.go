package amqp

import (
	"errors"
	"os"
	"syscall"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier"
)

// TestClassify covers the broker's refusals and the client's errors with
// the values amqp091-go returns, including those the broker in the tests
// cannot be made to send (a forced close, an oversized message).
func TestClassify(t *testing.T) {
	t.Parallel()
	const target, addr = `exchange "x" with routing key "k"`, "mq:5672"
	for _, tc := range []struct {
		name  string
		err   error
		class courier.ErrorClass
	}{
		{"no exchange", &amqp.Error{Code: amqp.NotFound, Reason: "NOT_FOUND - no exchange 'x'", Server: true}, courier.ClassRejected},
		{"too large", &amqp.Error{Code: amqp.PreconditionFailed, Reason: "PRECONDITION_FAILED - message size 200 is larger than configured max size 100", Server: true}, courier.ClassRejected},
		{"no permission", &amqp.Error{Code: amqp.AccessRefused, Reason: "ACCESS_REFUSED - write access", Server: true}, courier.ClassTransport},
		{"login refused", &dialError{err: amqp.ErrCredentials}, courier.ClassTransport},
		{"forced close", &amqp.Error{Code: amqp.ConnectionForced, Reason: "CONNECTION_FORCED - broker forced connection closure", Server: true}, courier.ClassConnectionClosed},
		{"closed", amqp.ErrClosed, courier.ClassConnectionClosed},
		{"read broke off", &amqp.Error{Code: amqp.FrameError, Reason: "EOF"}, courier.ClassConnectionClosed},
		{"bad frame", amqp.ErrFrame, courier.ClassProtocol},
		{"refused", &dialError{err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, courier.ClassConnectRefused},
		{"other", errors.New("odd"), courier.ClassTransport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err, target, addr); got.Class != tc.class {
				t.Errorf("got %s (%s), want %s", got.Class, got.Error, tc.class)
			}
		})
	}
}
