package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// BenchPayload is the payload of the benchmarks' messages: 1 KiB of JSON.
var BenchPayload = []byte(`"` + strings.Repeat("x", 1022) + `"`)

// benchMessage returns a message of type "bench" with BenchPayload on
// route, not yet accepted.
func benchMessage(id, route string) *courier.Message {
	return &courier.Message{ID: id, Type: "bench", Route: route, Payload: BenchPayload, ContentType: "application/json"}
}

// BenchMessage returns a message of type "bench" with BenchPayload on
// route, accepted at now.
func BenchMessage(id, route string, now time.Time) *courier.Message {
	m := benchMessage(id, route)
	courier.Accept(m, courier.DefaultPolicy(), false, now)
	return m
}

// IngestBench ingests into s, in batches of 5,000, n messages of
// BenchPayload named prefix-0, prefix-1, … on the route "bench", each
// accepted at now after shape (when not nil), given its index, changed it.
func IngestBench(b testing.TB, s courier.Store, n int, prefix string, now time.Time, shape func(m *courier.Message, i int)) {
	b.Helper()
	for first := 0; first < n; first += 5000 {
		msgs := make([]*courier.Message, min(5000, n-first))
		for i := range msgs {
			m := benchMessage(fmt.Sprintf("%s-%d", prefix, first+i), "bench")
			if shape != nil {
				shape(m, first+i)
			}
			courier.Accept(m, courier.DefaultPolicy(), false, now)
			msgs[i] = m
		}
		if _, err := s.Ingest(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchIngest measures durable ingest into stores that open makes: many
// goroutines with one 1 KiB message each (group commit), of no tenant and
// of a tenant with caps (each ingest checked against its use, in a
// transaction of its own under the tenant's lock), and one goroutine with
// batches of 1,000, of no key and of 200 ordering keys (each message joins
// its key's order and is numbered in it, Courier-Sequence).
func BenchIngest(b *testing.B, open func(b *testing.B) courier.Store) {
	single := func(b *testing.B, s courier.Store, idPrefix, route string) {
		var n atomic.Int64
		b.SetParallelism(32) // 64 goroutines on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m := BenchMessage(fmt.Sprintf("%s%d", idPrefix, n.Add(1)), route, time.Now())
				if _, err := s.Ingest(context.Background(), []*courier.Message{m}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	}
	b.Run("single-64", func(b *testing.B) { single(b, open(b), "m-", "bench") })
	b.Run("single-64-capped", func(b *testing.B) {
		s := open(b)
		s.SetTenantQuotas(map[string]courier.Quotas{"acme": {MaxQueued: 1 << 30, MaxBytes: 1 << 40}})
		single(b, s, "acme~m-", "acme/bench")
	})
	batches := func(b *testing.B, prefix string, keyed bool) {
		s := open(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			msgs := make([]*courier.Message, 1000)
			for j := range msgs {
				msgs[j] = BenchMessage(fmt.Sprintf("%s-%d-%d", prefix, i, j), "bench", time.Now())
				if keyed {
					msgs[j].OrderingKey = fmt.Sprintf("key-%d", j%200)
				}
			}
			if _, err := s.Ingest(context.Background(), msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msgs/s")
	}
	b.Run("batch-1000", func(b *testing.B) { batches(b, "b", false) })
	b.Run("keyed-batch-1000", func(b *testing.B) { batches(b, "k", true) })
}

// BenchClaim measures claiming 100 due messages at a time of the route
// "bench", with each of backlogs queued behind them, from stores that
// queued makes with n messages queued there at now.
func BenchClaim(b *testing.B, backlogs []int, queued func(b *testing.B, n int, now time.Time) courier.Store) {
	for _, backlog := range backlogs {
		b.Run(fmt.Sprintf("backlog-%d", backlog), func(b *testing.B) {
			now := time.Now()
			s := queued(b, backlog+b.N*100, now)
			BenchClaimDue(b, s, now)
		})
	}
}

// BenchClaimDue claims 100 due messages of the route "bench" b.N times, as
// of now, and reports the messages claimed per second.
func BenchClaimDue(b *testing.B, s courier.Store, now time.Time) {
	claim := courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Owner: "bench",
		Routes: []courier.RouteQuota{{Route: "bench", Limit: 100}}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		got, err := s.ClaimDue(context.Background(), claim)
		if err != nil || len(got) != 100 {
			b.Fatalf("claimed %d, %v", len(got), err)
		}
	}
	b.ReportMetric(float64(b.N*100)/b.Elapsed().Seconds(), "msgs/s")
}
