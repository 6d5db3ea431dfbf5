package api

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

// handleReplay starts a replay for a subscription (docs/design.md §14) and answers
// 202 with the operation at once: it runs in the background, survives a
// restart, and its progress is at /v1/operations/{id}.
func (s *Server) handleReplay(w http.ResponseWriter, r *http.Request) {
	op, ok := readOperation(s, w, r, "replays", func(req *ReplayRequest) (courier.BulkOp, error) {
		return s.replayOp(r, req)
	})
	if !ok {
		return
	}
	op, err := s.opts.Bulk.Begin(r.Context(), op)
	if err == nil {
		err = s.auditReplay(r, op)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.opts.Logger.Info("replay started", "operation", op.ID, "subscription", op.Replay.Subscription.Name, "by", actor(r))
	v := toOperation(op)
	sc := scopeOf(r)
	sc.showOperation(&v)
	w.Header().Set("Location", sc.path("/v1/operations/"+v.ID))
	writeJSON(w, http.StatusAccepted, v)
}

// auditReplay records a replay in the audit log, as the operator action it
// is, under the subscription's name, once: a repeat of the request (the
// same operation id) finds it recorded, and one whose first try failed to
// record it records it now.
func (s *Server) auditReplay(r *http.Request, op courier.BulkOp) error {
	rp := op.Replay
	detail := fmt.Sprintf("operation %s: messages ingested from %s until %s", op.ID,
		rp.Since.Format(time.RFC3339), rp.Until.Format(time.RFC3339))
	if len(rp.Types) > 0 {
		detail += ", types " + strings.Join(rp.Types, ", ")
	}
	if rp.Again {
		detail += ", again"
	}
	done, err := s.opts.Store.Actions(r.Context(), rp.Subscription.Name)
	if err != nil {
		return err
	}
	for _, a := range done {
		if a.Kind == courier.ActionReplay && strings.HasPrefix(a.Detail, "operation "+op.ID+":") {
			return nil
		}
	}
	a := s.action(r)
	a.Kind, a.Subject, a.Detail = courier.ActionReplay, rp.Subscription.Name, detail
	return s.opts.Store.RecordAction(r.Context(), a)
}

// replayOp checks a replay request and makes the operation of it, with the
// subscription as it is now.
func (s *Server) replayOp(r *http.Request, req *ReplayRequest) (courier.BulkOp, error) {
	sc := scopeOf(r)
	name := r.PathValue("name")
	t := s.topology.Load()
	sub := t.Subscriptions[sc.name(name)]
	now := s.opts.Clock.Now()
	until := now
	if req.Until != nil {
		until = *req.Until
	}
	switch {
	case sub == nil:
		return courier.BulkOp{}, courier.Errorf(courier.CodeNotFound, "subscription %q is not configured", name)
	case t.Routes[sub.Route] != nil && t.Routes[sub.Route].Workflow != nil:
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "subscription %q delivers to workflow route %q: messages enter a workflow when they are sent, not by a replay", name, sc.showName(sub.Route))
	case req.Since == nil:
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "since is required: the replay gives deliveries of the messages ingested from then on")
	case !until.After(*req.Since):
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "until must be after since")
	case req.OperationID != "" && !courier.ValidID(req.OperationID):
		return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "operation_id %q is not valid", req.OperationID)
	}
	for _, p := range req.Types {
		if !courier.ValidTypePattern(p) {
			return courier.BulkOp{}, courier.Errorf(courier.CodeInvalidArgument, "types: %q is not a type or a prefix of types ending in .*", p)
		}
	}
	id, err := operationID(req.OperationID)
	if err != nil {
		return courier.BulkOp{}, err
	}
	replay := &courier.Replay{Subscription: *sub, Since: req.Since.UTC().Truncate(time.Microsecond),
		Until: until.UTC().Truncate(time.Microsecond), Types: sc.names(req.Types), Again: req.Again}
	return courier.BulkOp{ID: sc.id(id), Kind: courier.ActionReplay, Route: sub.Route, Who: actor(r), CreatedAt: now, Replay: replay}, nil
}

// handleResend delivers a finished message, or delivery, again.
func (s *Server) handleResend(w http.ResponseWriter, r *http.Request) {
	if err := s.decodeSmall(w, r, &struct{}{}); err != nil {
		s.writeError(w, r, err)
		return
	}
	m, err := s.opts.Store.Resend(r.Context(), pathKey(r), s.action(r))
	s.answerAction(w, r, courier.ActionResend, m, err)
}
