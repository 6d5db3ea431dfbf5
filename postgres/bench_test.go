package postgres_test

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/storetest"
	"github.com/jackc/pgx/v5"
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
	s := queued(b, b.N*100, now)
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
	storetest.BenchApplyOn(b, s, now, true, wallTime, "ns/outcome")
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
