package engine

import (
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
)

// authWatch remembers the endpoints whose last attempt on this node could
// not obtain its credentials (class auth), so that the failure is told as
// an event once, when it starts, and not at every attempt. Tokens are
// obtained and kept per node, and so is this.
type authWatch struct {
	mu      sync.Mutex
	failing map[string]bool
}

// noteAuth takes in the outcome of an attempt on endpoint name: the first
// failure of class auth after an attempt that had its credentials (or
// none before) records endpoint.auth_failing; any other outcome shows the
// credentials were obtained.
func (e *Engine) noteAuth(name string, r courier.Result, now time.Time) {
	failing := r.Class == courier.ClassAuth
	e.auth.mu.Lock()
	was := e.auth.failing[name]
	switch {
	case failing && !was:
		if e.auth.failing == nil {
			e.auth.failing = map[string]bool{}
		}
		e.auth.failing[name] = true
	case !failing && was:
		delete(e.auth.failing, name)
	}
	e.auth.mu.Unlock()
	if failing && !was {
		e.logger.Warn("endpoint cannot obtain its credentials; its health is untouched", "endpoint", name, "err", r.Error)
		e.Event(courier.AuthEvent(name, r.Error, now))
	}
}
