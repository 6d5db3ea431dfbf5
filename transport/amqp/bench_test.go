package amqp_test

import (
	"fmt"
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/amqptest"
	"github.com/courier-gw/courier/internal/sendertest"
)

// BenchmarkPublishConfirmed measures publishes to RabbitMQ that the broker
// confirmed: persistent 1 KiB messages to a durable queue, with one publish
// in flight and with 16 at once (the default max_concurrency of an
// endpoint). Run it with:
//
//	COURIER_TEST_AMQP=amqp://guest:guest@127.0.0.1:5672/ go test -run '^$' -bench PublishConfirmed -benchtime 3s ./transport/amqp
func BenchmarkPublishConfirmed(b *testing.B) {
	tr := newTransport(b)
	for _, inflight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			a := amqptest.NewAdmin(b)
			e := endpoint("bench", a.URL, "", a.Queue(nil))
			e.MaxConcurrency = inflight
			m := message("bench")
			m.Payload = make([]byte, 1024)
			b.SetBytes(int64(len(m.Payload)))
			sendertest.Throughput(b, inflight, func() courier.Result { return send(b, tr, e, m, 1) })
		})
	}
}
