package api

import (
	"fmt"
	"net/http"

	courier "github.com/courier-gw/courier"
	"github.com/google/uuid"
)

// handleBulk starts (or finds) a bulk operation and answers when it is done;
// if the caller goes away first, it goes on.
func (s *Server) handleBulk(kind courier.ActionKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		op, ok := readOperation(s, w, r, "bulk operations", func(req *BulkRequest) (courier.BulkOp, error) {
			return s.bulkOp(kind, req, r)
		})
		if !ok {
			return
		}
		done, err := s.opts.Bulk.Run(r.Context(), op)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		// The messages are counted by the runner as its batches are applied,
		// not here: a request may be repeated, or end before the operation
		// does.
		v := toOperation(done)
		scopeOf(r).showOperation(&v)
		writeJSON(w, http.StatusOK, v)
	}
}

// bulkOp checks a bulk request and makes the operation of it.
// readOperation reads the request of a bulk operation (or a replay) and
// makes the operation from it with build; what names such operations for
// a server that runs none. It returns false once an error is answered.
func readOperation[Req any](s *Server, w http.ResponseWriter, r *http.Request, what string, build func(*Req) (courier.BulkOp, error)) (courier.BulkOp, bool) {
	var req Req
	var op courier.BulkOp
	err := s.decodeSmall(w, r, &req)
	if err == nil {
		op, err = build(&req)
	}
	if err == nil && s.opts.Bulk == nil {
		err = courier.Errorf(courier.CodeNotConfigured, "%s are not available on this server", what)
	}
	if err != nil {
		s.writeError(w, r, err)
		return op, false
	}
	return op, true
}

// operationID is the id of a bulk operation: the one its request gives, so
// that a repeat of the request finds the operation, or a new UUIDv7.
func operationID(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	u, err := uuid.NewV7()
	if err != nil {
		return "", fmt.Errorf("new operation id: %w", err)
	}
	return u.String(), nil
}

func (s *Server) bulkOp(kind courier.ActionKind, req *BulkRequest, r *http.Request) (courier.BulkOp, error) {
	sc := scopeOf(r)
	f := sc.filter(req.Filter.MessageFilter())
	route := sc.nameIf(req.Route)
	routeErr := s.checkResubmitRoute(r, route) // nil without a route
	switch {
	case f.State != "" && !f.State.Valid():
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "filter.state %q is not a state", f.State)
	case kind == courier.ActionResubmit && f.State != "" && f.State != courier.StateSuspended:
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "only suspended messages can be resubmitted, not %s ones", f.State)
	case kind == courier.ActionDiscard && f.State != "" && f.State != courier.StateSuspended && f.State != courier.StateQueued:
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "only queued or suspended messages can be discarded, not %s ones", f.State)
	case f.Reason != "" && !f.Reason.Valid():
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "filter.reason %q is not a suspension reason", f.Reason)
	case req.Route != "" && kind != courier.ActionResubmit:
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "route applies only to a resubmit")
	case routeErr != nil:
		return courier.BulkOp{}, routeErr
	case req.OperationID != "" && !courier.ValidID(req.OperationID):
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "operation_id %q is not valid", req.OperationID)
	}
	id, err := operationID(req.OperationID)
	if err != nil {
		return courier.BulkOp{}, err
	}
	return courier.BulkOp{ID: sc.id(id), Kind: kind, Filter: f, Route: route, Who: actor(r), CreatedAt: s.opts.Clock.Now()}, nil
}

func (s *Server) handleOperation(w http.ResponseWriter, r *http.Request) {
	sc := scopeOf(r)
	op, err := s.opts.Store.Bulk(r.Context(), sc.id(r.PathValue("id")))
	if err == nil && op.Kind == courier.ActionEraseTenant && !sc.system {
		// The erasure of a tenant is the system's, whatever its id.
		err = courier.Errorf(courier.CodeNotFound, "operation %q not found", r.PathValue("id"))
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := toOperation(op)
	sc.showOperation(&v)
	writeJSON(w, http.StatusOK, v)
}
