package api

import (
	"context"
	"encoding/base64"
	"net/http"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

// handleGet shows a message: one sent to a route as itself, a published
// one with its deliveries.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id := scopeOf(r).id(r.PathValue("id"))
	ds, err := s.opts.Store.Deliveries(r.Context(), id)
	if err == nil && !ownsMessage(r, ds[0]) {
		err = hiddenNotFound(id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.fullView(r.Context(), ds)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeMessage(w, r, ds[0], v)
}

// fullView is the view of a message (a published one as its deliveries
// ds) shown on its own: with what holds it, and how many attempts it had
// in all.
func (s *Server) fullView(ctx context.Context, ds []*courier.Message) (Message, error) {
	t := s.topology.Load()
	v := toPublished(ds, t, true)
	hs := s.holder(ctx, t)
	if len(v.Deliveries) == 0 {
		return s.oneView(ctx, hs, ds[0])
	}
	total := 0
	for i, d := range ds {
		n, err := s.countAttempts(ctx, d)
		if err == nil {
			v.Deliveries[i].Held, err = hs.hold(d)
		}
		if err != nil {
			return v, err
		}
		v.Deliveries[i].AttemptsTotal, total = &n, total+n
	}
	v.AttemptsTotal = &total
	return v, nil
}

// oneView is the view of one message or delivery shown on its own.
func (s *Server) oneView(ctx context.Context, hs *holder, m *courier.Message) (Message, error) {
	v := toMessage(m, hs.t, true)
	n, err := s.countAttempts(ctx, m)
	if err == nil {
		v.Held, err = hs.hold(m)
	}
	v.AttemptsTotal = &n
	return v, err
}

// countAttempts counts every attempt of a message or delivery, across its
// rounds: what its history lists.
func (s *Server) countAttempts(ctx context.Context, m *courier.Message) (int, error) {
	attempts, err := s.opts.Store.Attempts(ctx, m.Key())
	return len(attempts), err
}

// holder tells the views of messages what holds the queued ones
// (courier.Held), reading the endpoints' health once, when the first
// queued message needs it, and who switched off an endpoint that is off.
type holder struct {
	s      *Server
	ctx    context.Context
	t      *courier.Topology
	now    time.Time
	health map[string]courier.EndpointHealth // nil until read
	by     map[string]string
}

func (s *Server) holder(ctx context.Context, t *courier.Topology) *holder {
	return &holder{s: s, ctx: ctx, t: t, now: s.opts.Clock.Now(), by: map[string]string{}}
}

// hold returns the view of what holds m, nil when nothing does.
func (h *holder) hold(m *courier.Message) (*Hold, error) {
	if m.State != courier.StateQueued {
		return nil, nil
	}
	if h.health == nil {
		health, err := h.s.healthOf(h.ctx)
		if err != nil {
			return nil, err
		}
		h.health = health
	}
	held := courier.Held(m, h.t.Route(m.Route), func(name string) courier.EndpointHealth { return h.health[name] }, h.now)
	if held == nil {
		return nil, nil
	}
	first := held.Endpoint()
	v := &Hold{Endpoint: first.Endpoint, State: first.State, Until: timePtr(first.Until), Since: timePtr(first.Since)}
	if first.State == courier.HealthOff {
		v.By = h.switchedOffBy(first.Endpoint)
	}
	for _, e := range held.Endpoints[1:] {
		v.Also = append(v.Also, e.Endpoint)
	}
	return v, nil
}

// switchedOffBy is who last switched an endpoint off, from its recorded
// actions: a best effort, empty when it cannot be read. A sender's key is
// not told the names of the operators' keys.
func (h *holder) switchedOffBy(endpoint string) string {
	if k, _ := h.ctx.Value(keyContext{}).(*Key); k != nil && k.Role == courier.RoleSender {
		return ""
	}
	if who, ok := h.by[endpoint]; ok {
		return who
	}
	actions, err := h.s.opts.Store.Actions(h.ctx, endpoint)
	who := ""
	if err == nil {
		for _, a := range actions {
			if a.Kind == courier.ActionEndpointOff && a.Object == "" {
				who = a.Who
			}
		}
	}
	h.by[endpoint] = who
	return who
}

// handleDelivery shows one delivery of a published message in full.
func (s *Server) handleDelivery(w http.ResponseWriter, r *http.Request) {
	m, err := s.ownMessage(r, pathKey(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.oneView(r.Context(), s.holder(r.Context(), s.topology.Load()), m)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeMessage(w, r, m, v)
}

// pathKey is the Key of the message or delivery a request's path names.
func pathKey(r *http.Request) string {
	return scopeOf(r).key(r.PathValue("id"), r.PathValue("subscription"))
}

// writeMessage answers with v, the full view of a message or delivery m
// (the first delivery of a published message).
func (s *Server) writeMessage(w http.ResponseWriter, r *http.Request, m *courier.Message, v Message) {
	var err error
	switch r.URL.Query().Get("payload") {
	case "":
	case "base64":
		if m.Digest != "" || m.Erased != nil {
			break // too large to show inside JSON: the view gives payload_url
		}
		// The bytes as stored, whatever they hold: a JSON payload as a JSON
		// value is encoded anew (compacted, with <, > and & escaped), which
		// a preview or a byte count must not take for the payload.
		v.Payload, v.PayloadBase64 = nil, base64.StdEncoding.EncodeToString(m.Payload)
	default:
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "payload=%q: the only form to ask for is base64", r.URL.Query().Get("payload")))
		return
	}
	if len(v.Deliveries) == 0 {
		if v.Actions, err = s.actionViews(r.Context(), m.Key(), ""); err != nil {
			s.writeError(w, r, err)
			return
		}
		v.WaitingFor = s.waitingFor(r, m)
	}
	scopeOf(r).showMessage(&v)
	writeJSON(w, http.StatusOK, v)
}

// waitingFor returns what a waiting message's key waits for, if the caller
// may see it: a best effort, as the holder may change at any moment.
func (s *Server) waitingFor(r *http.Request, m *courier.Message) *KeyHolder {
	if !m.Waiting() {
		return nil
	}
	h, err := s.opts.Store.KeyHolder(r.Context(), m.Route, m.OrderingKey)
	if err != nil || !ownsMessage(r, h) {
		return nil
	}
	return &KeyHolder{ID: h.ID, State: h.State, Reason: h.Reason, LastError: h.LastError}
}

// ownMessage returns a message or delivery (by its Key) the request may
// see. Another key's message is not found, exactly as a missing one, so
// that a sender cannot probe for the ids of others.
func (s *Server) ownMessage(r *http.Request, key string) (*courier.Message, error) {
	m, err := s.opts.Store.Message(r.Context(), key)
	if err != nil {
		return nil, s.published(r, key, err)
	}
	if !ownsMessage(r, m) {
		return nil, hiddenNotFound(key)
	}
	return m, nil
}

// hiddenNotFound is the answer for a message or delivery the caller may not
// see, worded as for one that does not exist.
func hiddenNotFound(key string) error {
	if id, sub := courier.ParseKey(key); sub != "" {
		return courier.Errorf(courier.CodeNotFound, "message %q has no delivery to subscription %q", id, sub)
	}
	return courier.Errorf(courier.CodeNotFound, "message %q not found", key)
}

// published turns the not-found of a message read or changed by its id
// into a pointer to its deliveries when it is a published message: those
// are what is read, resubmitted and discarded one by one.
func (s *Server) published(r *http.Request, key string, err error) error {
	id, sub := courier.ParseKey(key)
	if courier.ErrorCode(err) != courier.CodeNotFound || sub != "" {
		return err
	}
	ds, derr := s.opts.Store.Deliveries(r.Context(), id)
	if derr != nil || !ownsMessage(r, ds[0]) {
		return err
	}
	keys := make([]string, len(ds))
	for i, d := range ds {
		keys[i] = d.Key()
	}
	return courier.Errorf(courier.CodeConflict, "message %q is published: each subscription has its own delivery of it, read and acted on one by one: %s (in the API, /v1/messages/%s/deliveries/{subscription})",
		id, strings.Join(keys, ", "), id)
}

// handleAttempts lists every attempt of a message, or of a delivery; of a
// published message, those of all its deliveries, by subscription.
func (s *Server) handleAttempts(w http.ResponseWriter, r *http.Request) {
	keys := []string{pathKey(r)}
	if r.PathValue("subscription") == "" {
		ds, err := s.opts.Store.Deliveries(r.Context(), scopeOf(r).id(r.PathValue("id")))
		if err == nil && !ownsMessage(r, ds[0]) {
			err = hiddenNotFound(keys[0])
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		keys = keys[:0]
		for _, d := range ds {
			keys = append(keys, d.Key())
		}
	} else if _, err := s.ownMessage(r, keys[0]); err != nil {
		s.writeError(w, r, err)
		return
	}
	out := AttemptList{Attempts: []Attempt{}}
	for _, key := range keys {
		attempts, err := s.opts.Store.Attempts(r.Context(), key)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, a := range attempts {
			v := toAttempt(a)
			scopeOf(r).showAttempt(&v)
			out.Attempts = append(out.Attempts, v)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sc := scopeOf(r)
	f = sc.filter(f)
	if k := keyOf(r); k != nil && k.Role == courier.RoleSender {
		if f.Sender != "" && f.Sender != k.Name {
			s.writeError(w, r, courier.Errorf(courier.CodePermissionDenied, "key %q may list only its own messages", k.Name))
			return
		}
		f.Sender = k.Name
	}
	page, err := s.opts.Store.Messages(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := MessageList{Messages: make([]Message, len(page.Messages)), NextCursor: page.Next}
	t := s.topology.Load()
	hs := s.holder(r.Context(), t)
	for i, m := range page.Messages {
		out.Messages[i] = toMessage(m, t, false)
		if out.Messages[i].Held, err = hs.hold(m); err != nil {
			s.writeError(w, r, err)
			return
		}
		sc.showMessage(&out.Messages[i])
	}
	writeJSON(w, http.StatusOK, out)
}

// filterParams are the query parameters of a listing.
var filterParams = []string{"state", "type", "route", "endpoint", "subscription", "reason", "sender", "id_prefix", "routes", "limit", "cursor", "created_after", "created_before"}

// parseFilter reads the query of a listing, which names only filterParams.
func parseFilter(r *http.Request) (courier.MessageFilter, error) {
	q := r.URL.Query()
	f := courier.MessageFilter{
		State:        courier.State(q.Get("state")),
		Type:         q.Get("type"),
		Route:        q.Get("route"),
		Endpoint:     q.Get("endpoint"),
		Subscription: q.Get("subscription"),
		Reason:       courier.Reason(q.Get("reason")),
		Sender:       q.Get("sender"),
		IDPrefix:     q.Get("id_prefix"),
		Cursor:       q.Get("cursor"),
	}
	if routes := q.Get("routes"); routes != "" {
		// Any of them: the queue of an endpoint that several routes use.
		f.Routes = strings.Split(routes, ",")
	}
	if f.State != "" && !f.State.Valid() {
		return f, courier.Errorf(courier.CodeInvalidArgument, "state %q is not %s", f.State, courier.OneOf(courier.States))
	}
	if f.Reason != "" && !f.Reason.Valid() {
		return f, courier.Errorf(courier.CodeInvalidArgument, "reason %q is not a suspension reason: %s", f.Reason, courier.OneOf(courier.Reasons))
	}
	return f, listParams(q, &f.Limit, map[string]*time.Time{"created_after": &f.CreatedAfter, "created_before": &f.CreatedBefore})
}

func (s *Server) handleResubmit(w http.ResponseWriter, r *http.Request) {
	var req ResubmitRequest
	if err := s.decodeSmall(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	route := scopeOf(r).nameIf(req.Route)
	if err := s.checkResubmitRoute(r, route); err != nil {
		s.writeError(w, r, err)
		return
	}
	m, err := s.opts.Store.Resubmit(r.Context(), pathKey(r), route, s.action(r))
	s.answerAction(w, r, courier.ActionResubmit, m, err)
}

// answerAction answers an operator's action on the message or delivery
// the path names: m as the action left it, or the failure (a published
// message's pointing at its deliveries). The action is logged and counted,
// and m's route told when it has work now: every resubmitted or resent
// message, and the next of a discarded one's ordering key.
func (s *Server) answerAction(w http.ResponseWriter, r *http.Request, kind courier.ActionKind, m *courier.Message, err error) {
	if err != nil {
		s.writeError(w, r, s.published(r, pathKey(r), err))
		return
	}
	done := map[courier.ActionKind]string{courier.ActionResubmit: "resubmitted", courier.ActionDiscard: "discarded", courier.ActionResend: "resent"}[kind]
	s.opts.Logger.Info("message "+done, "id", m.Key(), "route", m.Route, "by", actor(r))
	s.opts.Observer.Acted(kind, 1)
	if kind != courier.ActionDiscard || m.OrderingKey != "" {
		s.opts.DueFunc([]string{m.Route})
	}
	v := toMessage(m, s.topology.Load(), false)
	scopeOf(r).showMessage(&v)
	writeJSON(w, http.StatusOK, v)
}

// checkResubmitRoute checks the route a resubmit sends messages to: one
// that is configured and not a workflow route (messages enter a workflow
// at ingest, at its first step).
func (s *Server) checkResubmitRoute(r *http.Request, route string) error {
	if route == "" {
		return nil
	}
	rt := s.topology.Load().Routes[route]
	switch {
	case rt == nil || !scopeOf(r).owns(route):
		return courier.Errorf(courier.CodeInvalidArgument, "route %q is not configured", route)
	case rt.Workflow != nil:
		return courier.Errorf(courier.CodeInvalidArgument, "route %q is a workflow route: messages enter it when they are sent, at its first step", route)
	}
	return nil
}

func (s *Server) handleDiscard(w http.ResponseWriter, r *http.Request) {
	m, err := s.opts.Store.Discard(r.Context(), pathKey(r), s.action(r))
	s.answerAction(w, r, courier.ActionDiscard, m, err)
}

// handleErase erases a message's payload on request (a data-protection
// request), for every delivery of a published one, and answers the message
// as it is left: its tombstone instead of its payload, live deliveries
// discarded. The reason comes in the body, so that what it says stays out
// of the access logs that record URLs.
func (s *Server) handleErase(w http.ResponseWriter, r *http.Request) {
	var req EraseRequest
	if err := s.decodeSmall(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(req.Reason) > maxEraseReason {
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "the reason is %d bytes; at most %d", len(req.Reason), maxEraseReason))
		return
	}
	a := s.action(r)
	a.Detail = req.Reason
	ds, err := s.opts.Store.Erase(r.Context(), scopeOf(r).id(r.PathValue("id")), a)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var due []string
	for _, d := range ds {
		if d.OrderingKey != "" {
			due = append(due, d.Route) // the next of its key may be due now
		}
	}
	if len(due) > 0 {
		s.opts.DueFunc(due)
	}
	s.opts.Logger.Info("message payload erased", "id", ds[0].ID, "by", actor(r))
	s.opts.Observer.Acted(courier.ActionErase, 1)
	v, err := s.fullView(r.Context(), ds)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeMessage(w, r, ds[0], v)
}

// maxEraseReason bounds the reason kept with an erasure.
const maxEraseReason = 1024
