package amqp_test

import (
	"testing"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/amqptest"
	"github.com/courier-gw/courier/internal/testkit/sendertest"
)

// BenchmarkPublishConfirmed measures publishes to RabbitMQ that the broker
// confirmed: persistent 1 KiB messages to a durable queue. Run it with:
//
//	COURIER_TEST_AMQP=amqp://guest:guest@127.0.0.1:5672/ go test -run '^$' -bench PublishConfirmed -benchtime 3s ./transport/amqp
func BenchmarkPublishConfirmed(b *testing.B) {
	tr := newTransport(b)
	sendertest.Throughput(b, func(b *testing.B, inflight int) func() courier.Result {
		a := amqptest.NewAdmin(b)
		e := endpoint("bench", a.URL, "", a.Queue(nil))
		e.MaxConcurrency = inflight
		m := message("bench")
		m.Payload = make([]byte, 1024)
		b.SetBytes(int64(len(m.Payload)))
		return func() courier.Result { return send(b, tr, e, m, 1) }
	})
}
