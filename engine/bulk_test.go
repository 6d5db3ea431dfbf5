package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
)

// ingestSuspended stores n messages, s-0000 on, suspended as exhausted: what
// a bulk operation acts on.
func ingestSuspended(t *testing.T, store courier.Store, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		m := &courier.Message{ID: fmt.Sprintf("s-%04d", i), Type: "invoice", Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		m.State, m.Reason = courier.StateSuspended, courier.ReasonExhausted
		if _, err := store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
}

// An operation recorded but not finished (the server stopped mid-way) is
// finished by the next start, and each message is done exactly once.
func TestBulkResumesAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.db")
	store := mustOpenSQLite(t, path)
	ctx := context.Background()
	ingestSuspended(t, store, 1234)
	op := courier.BulkOp{ID: "op-1", Kind: courier.ActionResubmit, Who: "ops", CreatedAt: time.Now()}
	if _, err := store.StartBulk(ctx, op); err != nil {
		t.Fatal(err)
	}
	if got, err := store.RunBulk(ctx, "op-1", 500, time.Now()); err != nil || got.Count != 500 {
		t.Fatalf("first batch before the stop: %+v %v", got, err)
	}
	store.Close() // the server stops here

	store = mustOpenSQLite(t, path)
	defer store.Close()
	woken := 0
	var mu sync.Mutex
	acted := map[courier.ActionKind]int{}
	b := engine.NewBulk(store, nil, nil, func() { woken++ }, func(kind courier.ActionKind, n int) {
		mu.Lock()
		defer mu.Unlock()
		acted[kind] += n
	})
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := store.Bulk(ctx, "op-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.Done {
			if got.Count != 1234 {
				t.Fatalf("resumed operation counted %d, want 1234", got.Count)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after resume: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s-0000", "s-0499", "s-0500", "s-1233"} {
		m, _ := store.Message(ctx, id)
		actions, _ := store.Actions(ctx, id)
		if m.State != courier.StateQueued || m.ResubmitCount != 1 || len(actions) != 1 {
			t.Errorf("%s: %s, resubmitted %d times, %d actions; want once", id, m.State, m.ResubmitCount, len(actions))
		}
	}
	if woken == 0 {
		t.Error("the engine was not woken for the resubmitted messages")
	}
	// The batch done before the stop was not this runner's to count.
	mu.Lock()
	defer mu.Unlock()
	if acted[courier.ActionResubmit] != 1234-500 || len(acted) != 1 {
		t.Errorf("told of %v, want the 734 resubmits done after the restart", acted)
	}
}

// TestBulkTellsOnce: the messages of an operation are told once, as its
// batches are done, whether its request is repeated or not.
func TestBulkTellsOnce(t *testing.T) {
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	defer store.Close()
	ctx := context.Background()
	ingestSuspended(t, store, 1100)
	var mu sync.Mutex
	var told []int
	b := engine.NewBulk(store, nil, nil, nil, func(kind courier.ActionKind, n int) {
		mu.Lock()
		defer mu.Unlock()
		if kind != courier.ActionDiscard {
			t.Errorf("told of a %s", kind)
		}
		told = append(told, n)
	})
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(ctx)
	op := courier.BulkOp{ID: "op-1", Kind: courier.ActionDiscard, Who: "ops", CreatedAt: time.Now()}
	for range 3 {
		done, err := b.Run(ctx, op)
		if err != nil || !done.Done || done.Count != 1100 {
			t.Fatalf("run: %+v %v", done, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(told) != "[500 500 100]" {
		t.Errorf("told %v, want each batch once: [500 500 100]", told)
	}
}

// A stop ends a running operation after its batch, whether it was begun
// before Start or after it, and a caller waiting in Run gets the operation
// as it stands: a request waiting for it does not hold a shutdown up.
func TestBulkStopAnswersRunAsItStands(t *testing.T) {
	const n = 10000 // twenty batches
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	defer store.Close()
	msgs := make([]*courier.Message, n)
	for i := range msgs {
		m := &courier.Message{ID: fmt.Sprintf("s-%05d", i), Type: "invoice", Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		m.State, m.Reason = courier.StateSuspended, courier.ReasonExhausted
		msgs[i] = m
	}
	if _, err := store.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	b := engine.NewBulk(store, nil, nil, nil, nil)
	ran := make(chan courier.BulkOp, 1)
	go func() {
		op, err := b.Run(context.Background(), courier.BulkOp{ID: "op-1", Kind: courier.ActionDiscard, Who: "ops", CreatedAt: time.Now()})
		if err != nil {
			t.Error(err)
		}
		ran <- op
	}()
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	select {
	case op := <-ran:
		if op.Done || op.Count >= n {
			t.Errorf("Run after the stop: %+v, want the operation as it stood, not done", op)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run still waits after the stop")
	}
}

// An operation asked for after a stop (a request that came in while the
// server shut down) is recorded, starts no work, answers at once as it
// stands, and is done at the next start.
func TestBulkRunAfterStopWaitsForStart(t *testing.T) {
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	defer store.Close()
	ctx := context.Background()
	ingestSuspended(t, store, 30)
	b := engine.NewBulk(store, nil, nil, nil, nil)
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	op, err := b.Run(ctx, courier.BulkOp{ID: "op-1", Kind: courier.ActionDiscard, Who: "ops", CreatedAt: time.Now()})
	if err != nil || op.Done || op.Count != 0 {
		t.Fatalf("Run after the stop: %+v, %v; want the operation recorded and not begun", op, err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := store.Bulk(ctx, "op-1")
		if err == nil && got.Done {
			if got.Count != 30 {
				t.Fatalf("done with %d messages, want 30", got.Count)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not done after the next start: %+v, %v", got, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
