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
	if err := s.opts.Store.Ping(ctx); err != nil {
		s.writeError(w, r, courier.Unavailable("the store", err))
		return
	}
	if s.opts.ReadyFunc != nil {
		if err := s.opts.ReadyFunc(); err != nil {
			s.writeError(w, r, courier.Errorf(courier.CodeUnavailable, "%s", err))
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
