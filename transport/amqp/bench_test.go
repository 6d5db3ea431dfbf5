package amqp_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkPublishConfirmed measures publishes to RabbitMQ that the broker
// confirmed: persistent 1 KiB messages to a durable queue, with one publish
// in flight and with 16 at once (the default max_concurrency of an
// endpoint). Run it with:
//
//	COURIER_TEST_AMQP=amqp://guest:guest@127.0.0.1:5672/ go test -run '^$' -bench PublishConfirmed -benchtime 3s ./transport/amqp
func BenchmarkPublishConfirmed(b *testing.B) {
	a := newAdmin(b)
	tr := newTransport(b)
	for _, inflight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			q, err := a.ch.QueueDeclare(unique("courier.bench"), true, false, false, false, amqp.Table{})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { a.ch.QueueDelete(q.Name, false, false, false) })
			e := endpoint("bench", brokerURL(b), "", q.Name)
			e.MaxConcurrency = inflight
			m := message("bench")
			m.Payload = make([]byte, 1024)
			var failed atomic.Int64
			b.SetBytes(int64(len(m.Payload)))
			b.ResetTimer()
			if inflight == 1 {
				for i := 0; i < b.N; i++ {
					if res := send(b, tr, e, m, 1); !res.Delivered() {
						failed.Add(1)
					}
				}
			} else {
				runConcurrent(b, inflight, func() {
					if res := send(b, tr, e, m, 1); !res.Delivered() {
						failed.Add(1)
					}
				})
			}
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d publishes not confirmed", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// runConcurrent calls f b.N times from n goroutines.
func runConcurrent(b *testing.B, n int, f func()) {
	var next atomic.Int64
	done := make(chan struct{})
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			for next.Add(1) <= int64(b.N) {
				f()
			}
		}()
	}
	for range n {
		<-done
	}
}
