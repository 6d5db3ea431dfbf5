package http

// The bound on the connections of all pools (Options.MaxConns) adds no
// lock to an attempt: one that finds an idle connection only moves its
// pool to the front of Transport.recent, under the mutex clientFor holds
// anyway; only a dial counts, and makes room, under that mutex.

// maxDefaultMaxConns caps the default of MaxConns. Go raises the soft
// open-file limit to the hard one at start, which can be a million; past
// a few thousand, kept-alive connections buy little when the engine runs
// attempts in the hundreds.
const maxDefaultMaxConns = 4096

// defaultMaxConns is the default of MaxConns, from the process's open-file
// limit as it is now.
func defaultMaxConns() int { return maxConnsFor(openFileLimit()) }

// maxConnsFor is the default of MaxConns under a soft open-file limit: half
// of it, leaving the rest to the listeners, the API's clients, the store
// and the logs; DefaultMaxConns when the limit is unknown.
func maxConnsFor(soft uint64, known bool) int {
	if !known {
		return DefaultMaxConns
	}
	return int(max(1, min(soft/2, maxDefaultMaxConns)))
}

// touch marks c as the most recently used pool, t.mu held.
func (t *Transport) touch(c *client) {
	if c.recent == nil {
		c.recent = t.recent.PushFront(c)
		return
	}
	t.recent.MoveToFront(c.recent)
}

// forget takes c out of the pools whose idle connections may be closed to
// make room, t.mu held.
func (t *Transport) forget(c *client) {
	if c.recent != nil {
		t.recent.Remove(c.recent)
		c.recent = nil
	}
}

// count counts a connection c is about to open. When that would pass
// MaxConns, it first closes the idle connections of the least recently
// used other pools until there is room or none is left to close; either
// way the connection is counted and the dial goes ahead.
func (t *Transport) count(c *client) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if c.users > 0 {
		// A dial is a use, and puts back a pool that a walk took out while
		// it was empty, so that the connection it opens can be closed.
		t.touch(c)
	}
	bound := int64(t.opts.MaxConns)
	for e := t.recent.Back(); e != nil && t.open.Load() >= bound; {
		other := e.Value.(*client)
		e = e.Prev()
		if other == c {
			continue
		}
		if other.open.Load() > 0 {
			other.fast.CloseIdleConnections()
		}
		if other.open.Load() == 0 {
			// Nothing left to close: out of the walk until its next use,
			// so that a walk passes only pools with connections in use.
			t.forget(other)
		}
	}
	c.open.Add(1)
	t.open.Add(1)
}

// uncount uncounts a connection of c, closed or never opened.
func (c *client) uncount() {
	c.open.Add(-1)
	c.total.Add(-1)
}
