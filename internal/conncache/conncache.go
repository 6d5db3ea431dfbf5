// Package conncache keeps one long-lived connection per endpoint, for the
// transports that publish over a connection shared by every attempt (amqp,
// nats). Each endpoint has a lock of its own, so that dials to one endpoint
// happen one at a time and a peer that does not answer holds up its own
// endpoint only.
package conncache

import "sync"

// Cache holds connections of type C by endpoint name. It is safe for
// concurrent use.
type Cache[C comparable] struct {
	closeFunc func(C)

	mu    sync.Mutex
	slots map[string]*slot[C]
}

// slot holds the connection of one endpoint; its lock serialises dialling.
type slot[C comparable] struct {
	mu      sync.Mutex
	conn    C
	ok      bool // conn is set
	retired bool // Close has passed this slot: it keeps nothing more
}

// New returns an empty Cache that closes the connections it lets go of
// with closeFunc, which must take a connection that is closed already: one
// its caller drops may have been.
func New[C comparable](closeFunc func(C)) *Cache[C] {
	return &Cache[C]{closeFunc: closeFunc, slots: make(map[string]*slot[C])}
}

// lock returns the slot of key, made on first use, locked.
func (c *Cache[C]) lock(key string) *slot[C] {
	for {
		c.mu.Lock()
		s := c.slots[key]
		if s == nil {
			s = &slot[C]{}
			c.slots[key] = s
		}
		c.mu.Unlock()
		s.mu.Lock()
		if !s.retired {
			return s
		}
		s.mu.Unlock() // Close took it meanwhile; the map has a new one
	}
}

// take empties s and returns what it held. s must be locked.
func (s *slot[C]) take() (C, bool) {
	conn, ok := s.conn, s.ok
	var zero C
	s.conn, s.ok = zero, false
	return conn, ok
}

// Get returns the connection kept for key when fresh reports it fit for
// use. Otherwise it closes that one and keeps the one dial returns; when
// dial fails, none is kept and its error is returned. fresh and dial run
// under key's lock: concurrent calls for key wait for one dial and share
// its connection.
//
// A connection let go of here or by Drop is closed in the background: its
// close may wait for a peer that no longer answers, which must not hold up
// an attempt.
func (c *Cache[C]) Get(key string, fresh func(C) bool, dial func() (C, error)) (C, error) {
	s := c.lock(key)
	defer s.mu.Unlock()
	if s.ok {
		if fresh(s.conn) {
			return s.conn, nil
		}
		old, _ := s.take()
		go c.closeFunc(old)
	}
	conn, err := dial()
	if err != nil {
		var zero C
		return zero, err
	}
	s.conn, s.ok = conn, true
	return conn, nil
}

// Drop closes conn, which its caller found broken, and forgets it if it is
// still the connection kept for key, so that the next Get dials.
func (c *Cache[C]) Drop(key string, conn C) {
	s := c.lock(key)
	if s.ok && s.conn == conn {
		s.take()
	}
	s.mu.Unlock()
	go c.closeFunc(conn)
}

// Close closes every connection and forgets it, waiting for a dial under
// way to end and closing its connection too. It returns when every close
// has. The Cache stays usable: the next Get dials again.
func (c *Cache[C]) Close() {
	c.mu.Lock()
	slots := c.slots
	c.slots = make(map[string]*slot[C])
	c.mu.Unlock()
	for _, s := range slots {
		s.mu.Lock()
		s.retired = true
		if conn, ok := s.take(); ok {
			c.closeFunc(conn)
		}
		s.mu.Unlock()
	}
}
