package nats_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// BenchmarkPublishAcked measures publishes to NATS JetStream that the
// stream acked: 1 KiB messages with distinct ids to a file-backed stream,
// with one publish in flight and with 16 at once (the default
// max_concurrency of an endpoint). Run it with:
//
//	COURIER_TEST_NATS=nats://127.0.0.1:4222 go test -run '^$' -bench PublishAcked -benchtime 3s ./transport/nats
func BenchmarkPublishAcked(b *testing.B) {
	tr := newTransport(b)
	for _, inflight := range []int{1, 16} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			_, subject := stream(b, jetstream.StreamConfig{}, true)
			e := endpoint(serverURL(b), subject)
			var seq, failed atomic.Int64
			publish := func() {
				m := message(fmt.Sprintf("bench-%d", seq.Add(1)))
				m.Payload = make([]byte, 1024)
				if res := send(b, tr, e, m, 1); !res.Delivered() {
					failed.Add(1)
				}
			}
			b.SetBytes(1024)
			b.ResetTimer()
			var next atomic.Int64
			done := make(chan struct{})
			for range inflight {
				go func() {
					defer func() { done <- struct{}{} }()
					for next.Add(1) <= int64(b.N) {
						publish()
					}
				}()
			}
			for range inflight {
				<-done
			}
			b.StopTimer()
			if n := failed.Load(); n > 0 {
				b.Fatalf("%d publishes not acked", n)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}
