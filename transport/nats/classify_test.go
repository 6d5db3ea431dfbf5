package nats

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
)

// TestClassify covers the client's errors, including those the server in
// the tests is not set up to give (a refused login, a payload over its
// limit).
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		err   error
		class courier.ErrorClass
	}{
		{"no stream", jetstream.ErrNoStreamResponse, courier.ClassRejected},
		{"too large", nats.ErrMaxPayload, courier.ClassRejected},
		{"login refused", &dialError{err: nats.ErrAuthorization}, courier.ClassTransport},
		{"stream full", &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum messages exceeded"}, courier.ClassTransport},
		{"refused", &dialError{err: nats.ErrNoServers, cause: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, courier.ClassConnectRefused},
		{"no ack in time", context.DeadlineExceeded, courier.ClassTimeout},
		{"closed", nats.ErrConnectionClosed, courier.ClassConnectionClosed},
		{"other", errors.New("odd"), courier.ClassTransport},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := classify(tc.err, "orders", "nats:4222", time.Second); got.Class != tc.class {
				t.Errorf("got %s (%s), want %s", got.Class, got.Error, tc.class)
			}
		})
	}
	if got := serverAddr("nats://u:p@a.example,nats://b.example:4223"); got != "a.example:4222" {
		t.Errorf("serverAddr = %q", got)
	}
}
