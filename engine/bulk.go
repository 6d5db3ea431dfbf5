package engine

import (
	"context"
	"log/slog"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// bulkBatch is how many messages one transaction of a bulk operation takes.
const bulkBatch = 500

// Bulk works through bulk resubmits, discards, replays and the erasures of
// deleted tenants in the background, batch by batch, and resumes at start
// the ones a stop or crash interrupted.
type Bulk struct {
	store  courier.Store
	clock  courier.Clock
	logger *slog.Logger
	wake   func()
	acted  func(kind courier.ActionKind, n int)
	pace   PaceFunc

	mu      sync.Mutex
	running map[string]chan struct{} // closed when the operation is done
	ctx     context.Context          // ends at a stop: no batch is begun after it
	cancel  context.CancelFunc
	life    context.Context // ends when a stop runs out of time: the batch under way is cut off
	kill    context.CancelFunc
	wg      sync.WaitGroup
}

// PaceFunc is asked before each batch of an operation how many messages
// it may take: it may wait for room (until ctx ends), and returns a
// non-empty stop to end the operation for that reason instead.
type PaceFunc func(ctx context.Context, op courier.BulkOp) (limit int, stop string, err error)

// NewBulk returns a runner of bulk operations on store; wake is called
// after each batch of resubmits (nil: nothing to wake). acted is told,
// after each batch, how many messages it resubmitted or discarded (the
// metrics' count of operator actions; nil: no one): given here, it hears of
// the batches of operations resumed at Start too.
func NewBulk(store courier.Store, clock courier.Clock, logger *slog.Logger, wake func(), acted func(kind courier.ActionKind, n int)) *Bulk {
	clock = courier.ClockOrSystem(clock)
	logger = courier.LoggerOrDiscard(logger)
	if wake == nil {
		wake = func() {}
	}
	if acted == nil {
		acted = func(courier.ActionKind, int) {}
	}
	b := &Bulk{store: store, clock: clock, logger: logger, wake: wake, acted: acted, running: map[string]chan struct{}{},
		pace: func(context.Context, courier.BulkOp) (int, string, error) { return bulkBatch, "", nil }}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.life, b.kill = context.WithCancel(context.Background())
	return b
}

// Pace makes pace decide the batches of the operations, instead of one of
// bulkBatch messages after the other: set before Start, it decides those
// of the operations resumed there too.
func (b *Bulk) Pace(pace PaceFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pace = pace
}

// tell reports n messages acted on by a batch.
func (b *Bulk) tell(kind courier.ActionKind, n int) {
	if n > 0 {
		b.acted(kind, n)
	}
}

// Start resumes the operations not yet done. Operations end only at Stop,
// whether they were resumed here or begun by Run before or after it.
func (b *Bulk) Start(ctx context.Context) error {
	b.mu.Lock()
	if b.ctx.Err() != nil { // stopped before: a fresh start
		b.ctx, b.cancel = context.WithCancel(context.Background())
		b.life, b.kill = context.WithCancel(context.Background())
	}
	b.mu.Unlock()
	pending, err := b.store.PendingBulks(ctx)
	if err != nil {
		return err
	}
	for _, op := range pending {
		b.logger.Info("resuming a bulk operation", "operation", op.ID, "kind", op.Kind, "done_so_far", op.Count)
		b.launch(op)
	}
	return nil
}

// Stop ends the operations after their current batch, or cuts that batch
// off when ctx ends first (its transaction is rolled back); they resume at
// the next Start.
func (b *Bulk) Stop(ctx context.Context) error {
	// Cancelled under the lock, so that a launch after it sees the stop
	// and starts nothing: a worker added while the wait below runs would
	// neither be waited for nor stopped.
	b.mu.Lock()
	b.cancel()
	kill := b.kill
	b.mu.Unlock()
	done := make(chan struct{})
	go func() { b.wg.Wait(); close(done) }()
	return startstop.WaitOrCutOff(ctx, done, kill)
}

// Run records the operation (or finds it, when its id exists), makes sure it
// is being worked on, and waits until it is done or ctx ends; the operation
// goes on either way. It returns the operation as it then stands.
func (b *Bulk) Run(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error) {
	op, err := b.store.StartBulk(ctx, op)
	if err != nil || op.Done {
		return op, err
	}
	done := b.start(op)
	select {
	case <-done:
	case <-ctx.Done():
	}
	return b.store.Bulk(context.WithoutCancel(ctx), op.ID)
}

// Begin starts an operation as Run does, or finds the one with its id,
// and returns it as it stands without waiting for it: a replay, which
// runs as long as it takes, is watched by its progress.
func (b *Bulk) Begin(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error) {
	op, err := b.store.StartBulk(ctx, op)
	if err != nil || op.Done {
		return op, err
	}
	b.start(op)
	return op, nil
}

func (b *Bulk) start(op courier.BulkOp) chan struct{} {
	b.logger.Info("bulk operation started", "operation", op.ID, "kind", op.Kind, "by", op.Who, "route", op.Route)
	return b.launch(op)
}

// launch starts the worker of an operation unless one runs, and returns the
// channel closed when it is done (at once after a stop, which it starts no
// worker after). op is the operation as it was read (its
// Count, how many messages it had done).
func (b *Bulk) launch(op courier.BulkOp) chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch, ok := b.running[op.ID]; ok {
		return ch
	}
	ch := make(chan struct{})
	if b.ctx.Err() != nil {
		// Stopped: the operation is recorded and resumes at the next Start.
		close(ch)
		return ch
	}
	b.running[op.ID] = ch
	b.wg.Add(1)
	go b.work(b.ctx, b.life, op, b.pace, ch)
	return ch
}

// work runs the batches of an operation until it is done. Each batch's
// messages are told to the acted func: what the operation's count grew by
// since the last batch, at most a batch (should another node work on the
// same operation, resumed at its start, its batches are not taken as ours).
func (b *Bulk) work(ctx, life context.Context, op courier.BulkOp, pace PaceFunc, done chan struct{}) {
	id, count := op.ID, op.Count
	defer b.wg.Done()
	defer func() {
		b.mu.Lock()
		delete(b.running, id)
		b.mu.Unlock()
		close(done)
	}()
	pause := 100 * time.Millisecond
	for ctx.Err() == nil {
		// A batch under way when Stop comes is finished and told: only
		// between batches does the stop take effect, unless it runs out
		// of time.
		limit, stop, err := pace(ctx, op)
		if err == nil && stop != "" {
			if _, err = b.store.StopBulk(life, id, stop, b.clock.Now()); err == nil {
				b.logger.Info("bulk operation stopped", "operation", id, "kind", op.Kind, "count", count, "reason", stop)
				return
			}
		}
		var after courier.BulkOp
		if err == nil {
			after, err = b.store.RunBulk(life, id, min(max(limit, 1), bulkBatch), b.clock.Now())
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if courier.ErrorCode(err) == courier.CodeNotFound {
				// Removed: an operation on the messages of a tenant that
				// was erased since.
				b.logger.Info("bulk operation gone", "operation", id, "kind", op.Kind)
				return
			}
			b.logger.Warn("bulk operation batch failed; will try again", "operation", id, "err", err)
			startstop.Sleep(ctx, pause)
			pause = min(pause*2, 5*time.Second)
			continue
		}
		op = after
		b.tell(op.Kind, min(op.Count-count, bulkBatch))
		count = op.Count
		if op.Kind == courier.ActionResubmit || op.Kind == courier.ActionReplay {
			b.wake() // messages are queued now
		}
		if op.Done {
			b.logger.Info("bulk operation done", "operation", id, "kind", op.Kind, "count", op.Count)
			return
		}
	}
}
