package postgres_test

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/storetest"
)

// BenchmarkIngest measures durable ingest of messages sent to a route
// (storetest.BenchIngest).
func BenchmarkIngest(b *testing.B) {
	storetest.BenchIngest(b, func(b *testing.B) courier.Store { return pgtest.Open(b) })
}

// BenchmarkClaim measures claiming 100 due messages at a time, with a small
// and a larger backlog queued behind them.
func BenchmarkClaim(b *testing.B) {
	storetest.BenchClaim(b, []int{10000, 100000}, queued)
}

// BenchmarkApply measures writing the outcomes of 100 delivered attempts
// in one call, as the engine's completer does (storetest.BenchApply), in
// wall time per outcome.
func BenchmarkApply(b *testing.B) {
	storetest.BenchApply(b, queued, wallTime, "ns/outcome")
}

// wallTime is the time since an arbitrary start, for measuring spans of
// wall time (the database's work is in another process).
func wallTime() time.Duration { return time.Since(benchEpoch) }

var benchEpoch = time.Now()

// queued opens a store in a fresh schema with n messages of 1 KiB queued
// on the route "bench".
func queued(b *testing.B, n int, now time.Time) courier.Store {
	s := pgtest.Open(b)
	storetest.IngestBench(b, s, n, "m", now, nil)
	return s
}

// BenchmarkLimits measures the shared politeness limits: booking the
// start of an attempt on a paced endpoint (once per attempt), by one node
// and by two nodes in turn (each booking after the other's), and taking
// and giving back an endpoint's slots.
func BenchmarkLimits(b *testing.B) {
	ctx := context.Background()
	b.Run("book", func(b *testing.B) {
		s := pgtest.Open(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, ok, err := s.BookStart(ctx, "paced", time.Microsecond, time.Microsecond, time.Now()); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("book-two-nodes", func(b *testing.B) {
		pair := nodes(b, 2)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			// A booking the other node overtook is tried again at once.
			for booked := false; !booked; {
				var err error
				if _, booked, err = pair[i%2].BookStart(ctx, "paced", time.Microsecond, time.Microsecond, time.Now()); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("acquire-release", func(b *testing.B) {
		s := pgtest.Open(b)
		want := []courier.SlotRequest{{Endpoint: "ep", Max: 4, N: 4}}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if got, err := s.AcquireSlots(ctx, "node", want, time.Minute, time.Now()); err != nil || got["ep"] != 4 {
				b.Fatal(got, err)
			}
			if err := s.ReleaseSlots(ctx, "node", map[string]int{"ep": 4}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
