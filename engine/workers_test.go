package engine

import (
	"sync"
	"testing"
	"time"
)

// A job waits for a free worker once max of them are busy, and a worker
// that finished takes the next job instead of a new goroutine being made.
func TestWorkersBoundAndReuse(t *testing.T) {
	w := newWorkers(2)
	release := make(chan struct{})
	var started sync.WaitGroup
	started.Add(2)
	for i := 0; i < 2; i++ {
		w.run(func() { started.Done(); <-release })
	}
	started.Wait()

	third := make(chan struct{})
	queued := make(chan struct{})
	go func() {
		w.run(func() { close(third) })
		close(queued)
	}()
	select {
	case <-queued:
		t.Fatal("a third job was taken while both workers were busy")
	case <-time.After(50 * time.Millisecond):
	}
	if n := w.size.Load(); n != 2 {
		t.Fatalf("%d workers, want 2", n)
	}
	close(release)
	<-third
	<-queued

	// The workers are idle now: more jobs reuse them.
	var done sync.WaitGroup
	for i := 0; i < 10; i++ {
		done.Add(1)
		w.run(done.Done)
	}
	done.Wait()
	if n := w.size.Load(); n > 2 {
		t.Fatalf("%d workers after reuse, want at most 2", n)
	}

	w.stop()
	deadline := time.Now().Add(5 * time.Second)
	for w.size.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d workers still running after stop", w.size.Load())
		}
		time.Sleep(time.Millisecond)
	}
}
