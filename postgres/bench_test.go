package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/storetest"
	"github.com/jackc/pgx/v5"
)

var benchPayload = []byte(`"` + strings.Repeat("x", 1022) + `"`)

func benchMessage(id, route string, now time.Time) *courier.Message {
	m := &courier.Message{ID: id, Type: "bench", Route: route, Payload: benchPayload, ContentType: "application/json"}
	courier.Accept(m, courier.DefaultPolicy(), false, now)
	return m
}

// BenchmarkIngest measures durable ingest of messages sent to a route:
// many goroutines with one 1 KiB message each (group commit), and one
// goroutine with batches of 1,000.
func BenchmarkIngest(b *testing.B) {
	b.Run("single-64", func(b *testing.B) {
		s := pgtest.Open(b)
		var n atomic.Int64
		b.SetParallelism(32) // 64 goroutines on 2 cores
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				m := benchMessage(fmt.Sprintf("m-%d", n.Add(1)), "bench", time.Now())
				if _, err := s.Ingest(context.Background(), []*courier.Message{m}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	// A tenant with caps: each ingest is checked against its use, in a
	// transaction of its own under the tenant's lock.
	b.Run("single-64-capped", func(b *testing.B) {
		s := pgtest.Open(b)
		s.SetTenantQuotas(map[string]courier.Quotas{"acme": {MaxQueued: 1 << 30, MaxBytes: 1 << 40}})
		var n atomic.Int64
		b.SetParallelism(32)
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				id := fmt.Sprintf("acme~m-%d", n.Add(1))
				if _, err := s.Ingest(context.Background(), []*courier.Message{benchMessage(id, "acme/bench", time.Now())}); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("batch-1000", func(b *testing.B) {
		s := pgtest.Open(b)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			msgs := make([]*courier.Message, 1000)
			for j := range msgs {
				msgs[j] = benchMessage(fmt.Sprintf("b-%d-%d", i, j), "bench", time.Now())
			}
			if _, err := s.Ingest(context.Background(), msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// BenchmarkClaim measures claiming 100 due messages at a time, with a small
// and a larger backlog queued behind them.
func BenchmarkClaim(b *testing.B) {
	for _, backlog := range []int{10000, 100000} {
		b.Run(fmt.Sprintf("backlog-%d", backlog), func(b *testing.B) {
			now := time.Now()
			s := queuedStore(b, backlog+b.N*100, now)
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
		})
	}
}

// BenchmarkApply measures writing the outcomes of 100 delivered attempts
// in one call, as the engine's completer does (wall time per outcome).
// "delivery" gives the store the message as leased, as the engine does, so
// that it writes a Delivery by its few columns; "whole" does not.
func BenchmarkApply(b *testing.B) {
	for _, kind := range []string{"delivery", "whole"} {
		b.Run(kind, func(b *testing.B) {
			now := time.Now()
			s := queuedStore(b, b.N*100, now)
			storetest.BenchApply(b, s, now, kind == "delivery", wallTime, "ns/outcome")
		})
	}
}

// wallTime is the time since an arbitrary start, for measuring spans of
// wall time (the database's work is in another process).
func wallTime() time.Duration { return time.Since(benchEpoch) }

var benchEpoch = time.Now()

// queuedStore opens a store in a fresh schema with n messages of 1 KiB
// queued on the route "bench".
func queuedStore(b *testing.B, n int, now time.Time) *postgres.Store {
	s := pgtest.Open(b)
	for first := 0; first < n; first += 5000 {
		msgs := make([]*courier.Message, min(5000, n-first))
		for i := range msgs {
			msgs[i] = benchMessage(fmt.Sprintf("m-%d", first+i), "bench", now)
		}
		if _, err := s.Ingest(context.Background(), msgs); err != nil {
			b.Fatal(err)
		}
	}
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
		dsn, schema := pgtest.Schema(b)
		var nodes [2]*postgres.Store
		for i := range nodes {
			s, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			nodes[i] = s
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			// A booking the other node overtook is tried again at once.
			for booked := false; !booked; {
				var err error
				if _, booked, err = nodes[i%2].BookStart(ctx, "paced", time.Microsecond, time.Microsecond, time.Now()); err != nil {
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

// BenchmarkDeliveredWAL measures what PostgreSQL writes to its log per
// delivered message: claims of 100 and their delivered outcomes, as
// BenchmarkApply's "delivery" writes them. It reports the log's bytes
// (from the insert position, so on a server of its own) and, where the
// pg_walinspect extension is installed, its records, the bytes of full
// page images apart, and the records of each kind (heap, btree, ...). A
// checkpoint first, if allowed, so that every run starts with the same
// pages to image.
func BenchmarkDeliveredWAL(b *testing.B) {
	ctx := context.Background()
	now := time.Now()
	s := queuedStore(b, b.N*100, now)
	conn, err := pgx.Connect(ctx, pgtest.DSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	conn.Exec(ctx, `CHECKPOINT`) // not allowed to every role
	var start string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&start); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	storetest.BenchApply(b, s, now, true, wallTime, "ns/outcome")
	b.StopTimer()
	msgs := float64(b.N * 100)
	var bytes float64
	var end string
	if err := conn.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text, pg_current_wal_flush_lsn() - $1::text::pg_lsn`, start).Scan(&end, &bytes); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(bytes/msgs, "wal-B/msg")
	rows, err := conn.Query(ctx, `SELECT "resource_manager/record_type", count, record_size, fpi_size FROM pg_get_wal_stats($1::text::pg_lsn, $2::text::pg_lsn, true)
		WHERE count > 0`, start, end)
	if err != nil {
		b.Log("no records counted:", err)
		return // no pg_walinspect
	}
	defer rows.Close()
	var records, fpi float64
	for rows.Next() {
		var rm string
		var n, size, fpiSize int64
		if err := rows.Scan(&rm, &n, &size, &fpiSize); err != nil {
			b.Fatal(err)
		}
		records, fpi = records+float64(n), fpi+float64(fpiSize)
		b.ReportMetric(float64(n)/msgs, "rec-"+rm+"/msg")
	}
	if rows.Err() == nil {
		b.ReportMetric(records/msgs, "wal-rec/msg")
		b.ReportMetric(fpi/msgs, "fpi-B/msg")
	}
}
