package nats_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/natstest"
	"github.com/courier-gw/courier/internal/testkit/sendertest"
)

// BenchmarkPublishAcked measures publishes to NATS JetStream that the
// stream acked: 1 KiB messages with distinct ids to a file-backed stream.
// Run it with:
//
//	COURIER_TEST_NATS=nats://127.0.0.1:4222 go test -run '^$' -bench PublishAcked -benchtime 3s ./transport/nats
func BenchmarkPublishAcked(b *testing.B) {
	tr := newTransport(b)
	sendertest.Throughput(b, func(b *testing.B, _ int) func() courier.Result {
		s := natstest.NewStream(b, jetstream.StreamConfig{Storage: jetstream.FileStorage})
		e := endpoint(s.URL, s.Subject)
		var seq atomic.Int64
		b.SetBytes(1024)
		return func() courier.Result {
			m := message(fmt.Sprintf("bench-%d", seq.Add(1)))
			m.Payload = make([]byte, 1024)
			return send(b, tr, e, m, 1)
		}
	})
}
