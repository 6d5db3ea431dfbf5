package api

import (
	"context"
	"net/http"
	"time"

	courier "github.com/courier-gw/courier"
)

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	// A ping that waits behind admitted ingest the store is working
	// through is slow, not failed: a flood makes a node refuse what it
	// cannot finish, not unready.
	if err := s.opts.Store.Ping(ctx); err != nil && !(ctx.Err() != nil && r.Context().Err() == nil && s.admission.busy()) {
		s.writeError(w, r, courier.Unavailable("the store", err))
		return
	}
	var notes []string
	if s.opts.ReadyFunc != nil {
		var err error
		if notes, err = s.opts.ReadyFunc(); err != nil {
			s.writeError(w, r, courier.Errorf(courier.CodeUnavailable, "%s", err))
			return
		}
	}
	writeJSON(w, http.StatusOK, readiness{Status: "ready", Notes: notes})
}

// readiness is the answer of a ready node: notes say what it works around
// (its own clock off the database's).
type readiness struct {
	Status string   `json:"status"`
	Notes  []string `json:"notes,omitempty"`
}
