package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/cpustat"
)

// floorResult is what the two parts of a delivery cost each alone, in the
// same run as the drain it follows (bench deliver --floor): sending, with
// the same HTTP transport to the same receiver but without the engine or
// a store; and the store's part, claims and delivered outcomes of 100
// messages at a time, with the same store but without sending. Their sum
// is the least a delivered message can cost on this machine with this
// store; what courier spent in the drain above it is the engine's own.
type floorResult struct {
	Sends             int     `json:"sends"`
	SendsPerSec       float64 `json:"sends_per_sec"`
	SendCPUus         float64 `json:"send_cpu_us"`          // courier's CPU per send
	SendReceiverCPUus float64 `json:"send_receiver_cpu_us"` // the receiver's CPU per send
	// StoreMessages were claimed and written delivered, StoreBatch at a
	// time.
	StoreMessages int     `json:"store_messages"`
	StoreBatch    int     `json:"store_batch"`
	StorePerSec   float64 `json:"store_per_sec"`
	StoreCPUus    float64 `json:"store_cpu_us"` // courier's CPU per message
	// StoreDatabaseCPUus is PostgreSQL's CPU per message, when the
	// database runs on this machine.
	StoreDatabaseCPUus float64 `json:"store_database_cpu_us,omitempty"`
}

// floorBatch is how many messages the store's part claims, and then writes
// delivered, at a time: about what a busy engine's claims and outcomes hold
// (a drain of one endpoint claims some 50 to 90 at once and writes some 70
// to 200 outcomes at once); the store's cost per message falls as its
// batches grow.
const floorBatch = 100

// floor measures the parts of a delivery alone: b.messages sends to ep
// from b.workers goroutines, then b.messages messages queued on ep's route
// (route) claimed and written delivered, floorBatch at a time.
func (b benchDeliver) floor(ctx context.Context, store courier.Store, tr courier.Sender, ep *courier.Endpoint, route string,
	rcv benchReceiver, payload []byte) (*floorResult, error) {
	res := &floorResult{Sends: b.messages, StoreMessages: b.messages, StoreBatch: floorBatch}
	if err := b.floorSends(ctx, tr, ep, route, rcv, payload, res); err != nil {
		return nil, fmt.Errorf("floor of sending: %w", err)
	}
	if err := b.floorStore(ctx, store, ep, route, payload, res); err != nil {
		return nil, fmt.Errorf("floor of the store: %w", err)
	}
	return res, nil
}

// floorSends sends b.messages attempts of one message of route to ep
// through tr, as many at once as the drain's workers, and counts what each
// cost this process and the receiver.
func (b benchDeliver) floorSends(ctx context.Context, tr courier.Sender, ep *courier.Endpoint, route string, rcv benchReceiver, payload []byte, res *floorResult) error {
	if err := rcv.Reset(ctx, int64(b.messages), 0); err != nil {
		return err
	}
	before, err := rcv.Stats(ctx, false)
	if err != nil {
		return err
	}
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	cpu, start := cpustat.Process(), time.Now()
	for w := 0; w < min(b.workers, b.messages); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := &courier.Message{ID: fmt.Sprintf("floor-send-%d", w), Type: "bench", Route: route, ContentType: "application/json",
				Payload: payload, TotalAttempts: 1, CreatedAt: start}
			for next.Add(1) <= int64(b.messages) && ctx.Err() == nil {
				if r := tr.Send(ctx, courier.Delivery{Message: m, Endpoint: ep, Attempt: 1}); !r.Delivered() {
					failed.Store(fmt.Errorf("a send was not delivered: %s", r.Error))
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed, spent := time.Since(start), cpustat.Process()-cpu
	if err, _ := failed.Load().(error); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	after, err := rcv.Stats(ctx, false)
	if err != nil {
		return err
	}
	if got := after.Count - before.Count; got != int64(b.messages) {
		return fmt.Errorf("the receiver counted %d sends, want %d", got, b.messages)
	}
	n := float64(b.messages)
	res.SendsPerSec = n / elapsed.Seconds()
	res.SendCPUus = float64(spent.Microseconds()) / n
	res.SendReceiverCPUus = float64(after.CPUus-before.CPUus) / n
	return nil
}

// floorStore queues b.messages on route, then claims them floorBatch at a
// time and writes each batch delivered, as the engine's completer would
// after sends that all succeeded, counting what that cost this process
// (and PostgreSQL's).
func (b benchDeliver) floorStore(ctx context.Context, store courier.Store, ep *courier.Endpoint, route string, payload []byte, res *floorResult) error {
	if err := fillBacklog(ctx, store, "floor", b.messages, func(int) int { return 0 }, payload); err != nil {
		return err
	}
	policy := courier.DefaultPolicy()
	done := 0
	cpu, start := cpustat.Process(), time.Now()
	db, dbKnown := b.databaseCPU(ctx)
	for done < b.messages {
		now := time.Now()
		claimed, err := store.ClaimDue(ctx, courier.Claim{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "bench-floor",
			Routes: []courier.RouteQuota{{Route: route, Limit: floorBatch}}})
		if err != nil {
			return err
		}
		if len(claimed) == 0 {
			return fmt.Errorf("%d of %d messages claimed, then none was due", done, b.messages)
		}
		changes := make([]courier.Change, len(claimed))
		for i, m := range claimed {
			started := time.Now()
			next, _ := courier.AfterAttempt(m, policy, ep, courier.Result{Status: 204}, started, 0)
			changes[i] = courier.Change{Message: next, From: courier.StateInflight, Token: m.TotalAttempts, Prior: m,
				Attempt: &courier.Attempt{MessageID: m.ID, Subscription: m.Subscription, N: m.TotalAttempts, Endpoint: ep.Name,
					Route: m.Route, StartedAt: started, Outcome: courier.OutcomeDelivered, Status: 204}}
		}
		applied, err := store.Apply(ctx, changes)
		if err != nil {
			return err
		}
		for i, ok := range applied {
			if !ok {
				return fmt.Errorf("the outcome of %s did not apply", claimed[i].ID)
			}
		}
		done += len(claimed)
	}
	elapsed, spent := time.Since(start), cpustat.Process()-cpu
	n := float64(done)
	res.StorePerSec = n / elapsed.Seconds()
	res.StoreCPUus = float64(spent.Microseconds()) / n
	if dbAfter, still := b.databaseCPU(ctx); dbKnown && still {
		res.StoreDatabaseCPUus = float64(dbAfter.Since(db).Microseconds()) / n
	}
	return nil
}

// printFloor prints the floor after the drain's figures, and what courier
// spent per delivered message above it.
func printFloor(g *globals, res *deliverResult, f *floorResult) {
	fmt.Fprintf(g.stdout, "  alone, sending: %.0f sends/s, CPU per send: courier %.1f µs, receiver %.1f µs\n",
		f.SendsPerSec, f.SendCPUus, f.SendReceiverCPUus)
	fmt.Fprintf(g.stdout, "  alone, the store (claims and outcomes of %d): %.0f msgs/s, CPU per message: courier %.1f µs",
		f.StoreBatch, f.StorePerSec, f.StoreCPUus)
	if f.StoreDatabaseCPUus > 0 {
		fmt.Fprintf(g.stdout, ", PostgreSQL %.1f µs", f.StoreDatabaseCPUus)
	}
	fmt.Fprintln(g.stdout)
	sum := f.SendCPUus + f.StoreCPUus
	fmt.Fprintf(g.stdout, "  courier above the floor: %.1f µs per delivered message (%.1f in the drain, %.1f sending and the store alone)\n",
		res.CourierCPUus-sum, res.CourierCPUus, sum)
	if f.StoreDatabaseCPUus > 0 && res.DatabaseCPUus > 0 {
		fmt.Fprintf(g.stdout, "  PostgreSQL above the floor: %.1f µs per delivered message (%.1f in the drain, %.1f alone)\n",
			res.DatabaseCPUus-f.StoreDatabaseCPUus, res.DatabaseCPUus, f.StoreDatabaseCPUus)
	}
}
