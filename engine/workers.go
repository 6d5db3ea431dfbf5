package engine

import "sync/atomic"

// workers runs attempts on goroutines that stay for the next one. An
// attempt's call chain (transport, HTTP client) grows a new goroutine's
// stack several times over; a worker that stays has grown it already.
type workers struct {
	jobs chan func()
	size atomic.Int64
	max  int64
}

func newWorkers(max int) *workers {
	return &workers{jobs: make(chan func()), max: int64(max)}
}

// run hands job to an idle worker, or to a new one while there are fewer
// than max; past that it waits for one to be free.
func (w *workers) run(job func()) {
	select {
	case w.jobs <- job:
		return
	default:
	}
	if w.size.Add(1) <= w.max {
		go w.work(job)
		return
	}
	w.size.Add(-1)
	w.jobs <- job
}

func (w *workers) work(job func()) {
	defer w.size.Add(-1)
	for ok := true; ok; job, ok = <-w.jobs {
		job()
	}
}

// stop lets the workers end once they are idle; run must not be called
// after it.
func (w *workers) stop() { close(w.jobs) }
