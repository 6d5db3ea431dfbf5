package sqlite

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/storetest"
)

// BenchmarkIngest measures durable ingest straight into the store
// (storetest.BenchIngest), and of published messages.
func BenchmarkIngest(b *testing.B) {
	storetest.BenchIngest(b, func(b *testing.B) courier.Store { return openTest(b) })
	// Published messages with ten subscriptions each: ten deliveries, one
	// payload.
	b.Run("publish-1000x10", func(b *testing.B) {
		s := openTest(b)
		top := &courier.Topology{Routes: map[string]*courier.Route{}, Subscriptions: map[string]*courier.Subscription{}}
		for i := range 10 {
			route, sub := fmt.Sprintf("r%d", i), fmt.Sprintf("s%d", i)
			top.Routes[route] = &courier.Route{Name: route}
			top.Subscriptions[sub] = &courier.Subscription{Name: sub, Types: []string{"bench"}, Route: route}
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			var msgs []*courier.Message
			for j := range 1000 {
				ds, err := top.Admit(&courier.Message{ID: fmt.Sprintf("p-%d-%d", i, j), Type: "bench", Payload: storetest.BenchPayload,
					ContentType: "application/json", Headers: map[string]string{"X-Bench": "1"}}, courier.Intake{}, time.Now())
				if err != nil {
					b.Fatal(err)
				}
				msgs = append(msgs, ds...)
			}
			if _, err := s.Ingest(context.Background(), msgs); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "published/s")
	})
}

// BenchmarkClaim measures claiming 100 due messages at a time, with a small
// and a large backlog queued behind them: the cost per claim must not grow
// with the backlog.
func BenchmarkClaim(b *testing.B) {
	storetest.BenchClaim(b, []int{10000, 200000}, queued)
}

// BenchmarkClaimBesideHeldWork measures claiming 100 due messages at a time
// beside 200,000 that are not due: scheduled for later (deliver_after), or
// waiting behind the holders of 200 ordering keys (whose holders are
// claimed, and kept in flight, before the timer starts). Neither kind may
// make a claim cost more: compare with BenchmarkClaim.
func BenchmarkClaimBesideHeldWork(b *testing.B) {
	const held = 200000
	for _, kind := range []string{"scheduled", "waiting"} {
		b.Run(kind, func(b *testing.B) {
			s := openTest(b)
			ctx := context.Background()
			now := time.Now()
			storetest.IngestBench(b, s, held, "held", now, func(m *courier.Message, i int) {
				if kind == "scheduled" {
					m.DeliverAfter = now.Add(time.Hour)
				} else {
					m.OrderingKey = fmt.Sprintf("key-%d", i%200)
				}
			})
			if kind == "waiting" {
				got, err := s.ClaimDue(ctx, courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Owner: "bench",
					Routes: []courier.RouteQuota{{Route: "bench", Limit: 1000}}})
				if err != nil || len(got) != 200 {
					b.Fatalf("claimed %d holders, %v; want 200", len(got), err)
				}
			}
			storetest.IngestBench(b, s, b.N*100, "due", now, nil)
			storetest.BenchClaimDue(b, s, now)
		})
	}
}

// BenchmarkApply measures writing the outcomes of delivered attempts, 100
// in one call, as the engine's completer does (storetest.BenchApply): each
// message is updated and its attempt recorded. The cost is the process's
// CPU time per outcome.
func BenchmarkApply(b *testing.B) {
	storetest.BenchApply(b, queued, cpuTime, "cpu-ns/outcome")
}

// cpuTime is the CPU time the process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkClaimManyRoutes measures claiming 256 due messages at a time
// from 10,000 routes with messages round robin over them, each claim asking
// 256/per routes for per messages each: what a claim round costs per
// message when the messages are spread over many endpoints.
func BenchmarkClaimManyRoutes(b *testing.B) {
	const routes, batch = 10000, 256
	for _, per := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("per-route-%d", per), func(b *testing.B) {
			now := time.Now()
			s := openTest(b)
			storetest.IngestBench(b, s, routes*per*2+b.N*batch, "m", now, func(m *courier.Message, i int) { m.Route = fmt.Sprintf("r-%05d", i%routes) })
			next := 0
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				claim := courier.Claim{Now: now.Add(time.Second), LeaseUntil: now.Add(time.Hour), Owner: "bench", Max: batch}
				for range batch / per {
					claim.Routes = append(claim.Routes, courier.RouteQuota{Route: fmt.Sprintf("r-%05d", next%routes), Limit: per})
					next++
				}
				got, err := s.ClaimDue(context.Background(), claim)
				if err != nil || len(got) != batch {
					b.Fatalf("claimed %d, %v", len(got), err)
				}
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// queued opens a store in a temporary directory, closed when the
// benchmark ends, with n messages of 1 KiB queued on the route "bench".
func queued(b *testing.B, n int, now time.Time) courier.Store {
	s := openTest(b)
	storetest.IngestBench(b, s, n, "m", now, nil)
	return s
}

// BenchmarkCountLive measures the count of the live states by route that
// the metrics make every 15 s: 100,000 queued messages on 100 routes of
// 10 tenants and 20,000 suspended ones, beside 100,000 delivered ones that
// it must not read.
func BenchmarkCountLive(b *testing.B) {
	s := openTest(b)
	now := time.Now()
	ingest := func(prefix string, n int, state courier.State) {
		for start := 0; start < n; start += 1000 {
			var batch []*courier.Message
			for i := start; i < start+1000 && i < n; i++ {
				tenant := fmt.Sprintf("t%d", i%10)
				m := &courier.Message{ID: courier.QualifyID(tenant, fmt.Sprintf("%s-%d", prefix, i)), Type: "bench",
					Route: courier.Qualify(tenant, fmt.Sprintf("r%d", i%100)), Payload: []byte("{}"), ContentType: "application/json"}
				courier.Accept(m, courier.DefaultPolicy(), false, now)
				if state != courier.StateQueued {
					m.State, m.Reason, m.FinishedAt, m.NextAttemptAt, m.TimerAt = state, courier.ReasonExhausted, now, time.Time{}, time.Time{}
				}
				batch = append(batch, m)
			}
			if _, err := s.Ingest(context.Background(), batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	ingest("q", 100_000, courier.StateQueued)
	ingest("s", 20_000, courier.StateSuspended)
	ingest("d", 100_000, courier.StateDelivered)
	b.ResetTimer()
	for range b.N {
		routes, err := s.CountLive(context.Background())
		if err != nil || len(routes) != 100 {
			b.Fatalf("%d routes, %v", len(routes), err)
		}
	}
}
