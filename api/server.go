// Package api is courier's HTTP API (DESIGN §7) and a Go client for it.
package api

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	json "github.com/goccy/go-json"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/google/uuid"
)

// Contract limits of the ingest API.
const (
	// MaxBatchItems bounds the messages of one batch request.
	MaxBatchItems = 10000
	// DefaultMaxPayload and DefaultMaxBatchBytes apply when Options leave them 0.
	DefaultMaxPayload    = 1 << 20
	DefaultMaxBatchBytes = 32 << 20
)

// Options configure a Server.
type Options struct {
	Store         courier.Store
	Topology      *courier.Topology
	Clock         courier.Clock
	Logger        *slog.Logger
	MaxPayload    int64
	MaxBatchBytes int64
	// DueFunc, if set, is called with the routes of messages that are due
	// at once after they were stored (ingested, resubmitted, or let go by a
	// discard of the message ahead of them in their key), so that the
	// delivery engine claims them; with no routes when it cannot name them
	// (an endpoint switched on). Messages scheduled for later go to
	// ScheduledFunc.
	DueFunc func(routes []string)
	// ScheduledFunc, if set, is called with the route of a message stored
	// to come due later (deliver_after) and that time, so that the engine
	// claims it then rather than when its poll next finds it.
	ScheduledFunc func(route string, at time.Time)
	// Bulk runs bulk resubmits and discards; without it they answer 503.
	Bulk BulkRunner
	// ActivityFunc, if set, tells an endpoint's attempts under way and
	// recent outcomes on this node (the engine's Activity).
	ActivityFunc func(endpoint string) courier.EndpointActivity
	// Keys are the API keys. With none, every caller may do everything,
	// which is why courier then listens on loopback only.
	Keys []Key
	// ReloadFunc, if set, reloads the configuration for POST /v1/reload
	// (admin keys only); without it that answers 503.
	ReloadFunc func(ctx context.Context) error
	// Observer, if set, is told of ingested messages and operator actions
	// (metrics.Metrics is one), and of the health an endpoint switch leaves
	// when it is a HealthObserver. The messages of bulk operations are not
	// told here: Bulk tells them as its batches are done (engine.NewBulk
	// takes the Observer's Acted).
	Observer Observer
	// StatsFunc, if set, answers GET /v1/stats (metrics.Metrics.StatsFunc);
	// without it the live states are counted in the store on each request.
	StatsFunc func(ctx context.Context) (courier.Stats, error)
	// Metrics, if set, serves GET /metrics to operator keys.
	Metrics http.Handler
	// Receivers, if set, are the receive locations of this node, for
	// GET /v1/receivers and their stop and start.
	Receivers courier.Receivers
	// Resolver, if set, answers GET /v1/lookup (courier lookup).
	Resolver courier.Resolver
}

// BulkRunner works through bulk operations (engine.Bulk is one): Run starts
// or finds the operation and waits for it until ctx ends. The runner counts
// the messages it acts on (engine.NewBulk's acted), so that they are
// counted once, however often an operation's request is repeated.
type BulkRunner interface {
	Run(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error)
}

// HealthObserver is an Observer that is also told when an operator's switch
// changed an endpoint's health (metrics.Metrics is one), so that what it
// reports follows the switch at once rather than at its next count.
type HealthObserver interface {
	HealthChanged(endpoint string, before, after courier.EndpointHealth)
}

// Server serves the API. It is an http.Handler.
type Server struct {
	store         courier.Store
	topology      atomic.Pointer[courier.Topology]
	clock         courier.Clock
	logger        *slog.Logger
	maxPayload    int64
	maxBatchBytes int64
	due           func(routes []string)
	scheduled     func(route string, at time.Time)
	bulk          BulkRunner
	activity      func(endpoint string) courier.EndpointActivity
	reload        func(ctx context.Context) error
	keys          atomic.Pointer[keyring]
	limits        limiter
	mux           *http.ServeMux
	observer      Observer
	stats         func(ctx context.Context) (courier.Stats, error)
	receivers     courier.Receivers
	resolver      courier.Resolver
}

// NewServer returns a Server for the options.
func NewServer(o Options) *Server {
	s := &Server{
		store:         o.Store,
		clock:         o.Clock,
		logger:        o.Logger,
		maxPayload:    o.MaxPayload,
		maxBatchBytes: o.MaxBatchBytes,
		due:           o.DueFunc,
		scheduled:     o.ScheduledFunc,
		bulk:          o.Bulk,
		activity:      o.ActivityFunc,
		reload:        o.ReloadFunc,
		mux:           http.NewServeMux(),
		observer:      o.Observer,
		stats:         o.StatsFunc,
		receivers:     o.Receivers,
		resolver:      o.Resolver,
	}
	if s.observer == nil {
		s.observer = nopObserver{}
	}
	s.SetKeys(o.Keys)
	if s.clock == nil {
		s.clock = courier.SystemClock{}
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.maxPayload <= 0 {
		s.maxPayload = DefaultMaxPayload
	}
	if s.maxBatchBytes <= 0 {
		s.maxBatchBytes = DefaultMaxBatchBytes
	}
	if s.due == nil {
		s.due = func([]string) {}
	}
	if s.scheduled == nil {
		s.scheduled = func(string, time.Time) {}
	}
	if s.activity == nil {
		s.activity = func(string) courier.EndpointActivity { return courier.EndpointActivity{} }
	}
	t := o.Topology
	if t == nil {
		t = &courier.Topology{}
	}
	s.topology.Store(t)

	for _, rt := range []struct {
		pattern string
		access  access
		handler http.HandlerFunc
	}{
		{"PUT /v1/messages/{id}", accessIngest, s.handlePut},
		{"POST /v1/messages", accessIngest, s.handlePost},
		{"POST /v1/messages/batch", accessIngest, s.handleBatch},
		{"GET /v1/messages", accessRead, s.handleList},
		{"GET /v1/messages/{id}", accessRead, s.handleGet},
		{"GET /v1/messages/{id}/attempts", accessRead, s.handleAttempts},
		{"POST /v1/messages/{id}/resubmit", accessOperate, s.handleResubmit},
		{"POST /v1/messages/{id}/discard", accessOperate, s.handleDiscard},
		{"POST /v1/messages/resubmit", accessOperate, s.handleBulk(courier.ActionResubmit)},
		{"POST /v1/messages/discard", accessOperate, s.handleBulk(courier.ActionDiscard)},
		{"GET /v1/operations/{id}", accessOperate, s.handleOperation},
		{"GET /v1/endpoints", accessOperate, s.handleEndpoints},
		{"GET /v1/endpoints/{name}", accessOperate, s.handleEndpoint},
		{"POST /v1/endpoints/{name}/off", accessOperate, s.handleSwitch(false)},
		{"POST /v1/endpoints/{name}/on", accessOperate, s.handleSwitch(true)},
		{"GET /v1/lookup", accessOperate, s.handleLookup},
		{"GET /v1/receivers", accessOperate, s.handleReceivers},
		{"POST /v1/receivers/{name}/stop", accessOperate, s.handleReceiverSwitch(false)},
		{"POST /v1/receivers/{name}/start", accessOperate, s.handleReceiverSwitch(true)},
		{"POST /v1/reload", accessAdmin, s.handleReload},
		{"GET /v1/stats", accessOperate, s.handleStats},
		{"GET /v1/routes", accessOperate, s.handleRoutes},
		{"GET /metrics", accessOperate, s.handleMetrics(o.Metrics)},
		{"GET /healthz", accessPublic, s.handleHealthz},
		{"GET /readyz", accessPublic, s.handleReadyz},
	} {
		s.mux.Handle(rt.pattern, s.guard(rt.access, rt.handler))
	}
	return s
}

// SetTopology replaces the routes, endpoints and policies, as on reload.
func (s *Server) SetTopology(t *courier.Topology) { s.topology.Store(t) }

// SetKeys replaces the API keys, as on reload. With none, the API asks for
// no key.
func (s *Server) SetKeys(keys []Key) {
	if len(keys) == 0 {
		s.keys.Store(nil)
		return
	}
	s.keys.Store(&keyring{keys: slices.Clone(keys)})
}

// guard lets a request through to h when its key may do a.
func (s *Server) guard(a access, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := authorize(r, a); err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r)
	})
}

// publicPaths answer without a key: probes of load balancers and
// orchestrators carry none.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true}

// ServeHTTP authenticates and routes a request. With keys configured, every
// request but the probes needs a valid key, before anything else about it
// is looked at: an unknown path is 401 too, so that a caller without a key
// learns nothing of the API. Without keys, every request but the probes must
// name a loopback host, and one that changes something must not come from a
// page of another origin (403). Paths and methods the API does not have get
// the error body too, not the mux's plain text.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !publicPaths[r.URL.Path] {
		if kr := s.keys.Load(); kr != nil {
			k, err := kr.authenticate(r)
			if err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="courier"`)
				s.writeError(w, r, err)
				return
			}
			r = withKey(r, k)
		} else if err := checkLocalCaller(r); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		rec := &statusRecorder{header: http.Header{}}
		s.mux.ServeHTTP(rec, r)
		if rec.status == http.StatusMethodNotAllowed {
			w.Header().Set("Allow", rec.header.Get("Allow"))
			writeJSON(w, http.StatusMethodNotAllowed, ErrorBody{Error: ErrorInfo{
				Code: courier.CodeInvalidArgument, Message: fmt.Sprintf("method %s is not allowed here", r.Method)}})
			return
		}
		s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "no such path: %s", r.URL.Path))
		return
	}
	s.mux.ServeHTTP(w, r)
}

// statusRecorder catches the status the mux would answer an unmatched
// request with.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(status int)      { r.status = status }

// malformedError marks a request that could not be read at all (400), as
// opposed to a well-formed one with invalid values (422).
type malformedError struct{ err *courier.Error }

func (e malformedError) Error() string { return e.err.Error() }
func (e malformedError) Unwrap() error { return e.err }

func malformed(format string, args ...any) error {
	return malformedError{courier.Errorf(courier.CodeInvalidArgument, format, args...)}
}

// StatusOf maps an error to its HTTP status: the one place where codes
// become statuses (the dashboard shows errors with them too).
func StatusOf(err error) int {
	switch courier.ErrorCode(err) {
	case courier.CodeInvalidArgument:
		if errors.As(err, new(malformedError)) {
			return http.StatusBadRequest
		}
		return http.StatusUnprocessableEntity
	case courier.CodeNotFound:
		return http.StatusNotFound
	case courier.CodeConflict:
		return http.StatusConflict
	case courier.CodeUnauthenticated:
		return http.StatusUnauthorized
	case courier.CodePermissionDenied:
		return http.StatusForbidden
	case courier.CodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case courier.CodeRateLimited:
		return http.StatusTooManyRequests
	case courier.CodeUnavailable:
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

func errorInfo(err error) *ErrorInfo {
	return &ErrorInfo{Code: courier.ErrorCode(err), Message: courier.ErrorMessage(err)}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		// The caller went away; nobody reads this answer. A write it asked
		// for may still have been committed: repeating it with the same id
		// is answered 200.
		s.logger.Debug("request abandoned by the caller", "method", r.Method, "path", r.URL.Path)
		return
	}
	status := StatusOf(err)
	if status >= 500 {
		s.logger.Error("request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	if v := retryAfter(err); v != "" {
		w.Header().Set("Retry-After", v)
	} else if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, ErrorBody{Error: *errorInfo(err)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// readBody reads a request body of at most limit bytes.
func readBody(r *http.Request, w http.ResponseWriter, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, courier.Errorf(courier.CodePayloadTooLarge, "request body is larger than %d bytes", limit)
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength) + bytes.MinRead) // one allocation for the usual case
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	body := buf.Bytes()
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, courier.Errorf(courier.CodePayloadTooLarge, "request body is larger than %d bytes", limit)
	}
	if err != nil {
		return nil, malformed("reading the request body: %v", err)
	}
	return body, nil
}

// singleLimit bounds the body of a one-message ingest: the payload may be
// base64 (4/3 larger) or escaped JSON, plus the other fields.
func (s *Server) singleLimit() int64 { return s.maxPayload*2 + 64<<10 }

func (s *Server) handlePut(w http.ResponseWriter, r *http.Request) {
	s.ingestOne(w, r, r.PathValue("id"))
}

func (s *Server) handlePost(w http.ResponseWriter, r *http.Request) {
	s.ingestOne(w, r, "")
}

func (s *Server) ingestOne(w http.ResponseWriter, r *http.Request, pathID string) {
	k := keyOf(r)
	now := s.clock.Now()
	if err := s.limits.take(k, now, 1); err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(r, w, s.singleLimit())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	m, err := s.decodeMessage(body, pathID, now)
	if err == nil {
		err = s.admit(r.Context(), k, m)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.store.Ingest(r.Context(), []*courier.Message{m})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if res[0].Status == courier.IngestExists && res[0].Message.Sender != m.Sender {
		res[0].Status = courier.IngestConflict // another key's message: not to be shown
	}
	switch res[0].Status {
	case courier.IngestCreated:
		s.observer.Ingested(m)
		if m.NextAttemptAt.After(now) {
			s.scheduled(m.Route, m.NextAttemptAt)
		} else {
			s.due([]string{m.Route})
		}
		w.Header().Set("Location", "/v1/messages/"+m.ID)
		// As a read would show it: due, or waiting for its key.
		v := toMessage(m, s.topology.Load(), false)
		v.WaitingFor = s.waitingFor(r, m)
		writeJSON(w, http.StatusCreated, v)
	case courier.IngestExists:
		writeJSON(w, http.StatusOK, toMessage(res[0].Message, s.topology.Load(), false))
	default:
		s.writeError(w, r, conflictError(m.ID))
	}
}

// admit checks what the sending key may do with a decoded message and marks
// the message as the key's. The suspended cap is checked here, after the
// cheap checks, as it costs a query.
func (s *Server) admit(ctx context.Context, k *Key, m *courier.Message) error {
	if k == nil {
		return nil
	}
	if err := checkRoute(k, m.Route); err != nil {
		return err
	}
	m.Sender = k.Name
	return s.checkSuspended(ctx, k)
}

func conflictError(id string) error {
	return courier.Errorf(courier.CodeConflict, "message %q exists with other content", id)
}

// decodeMessage reads one ingest body and returns the message ready for
// Store.Ingest, or the error to answer.
func (s *Server) decodeMessage(body []byte, pathID string, now time.Time) (*courier.Message, error) {
	var req IngestRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, malformed("the body is not a valid ingest request: %v", jsonError(err))
	}
	if dec.More() {
		return nil, malformed("the body has data after the JSON object")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, malformed("the body has data after the JSON object")
	}
	return s.requestToMessage(&req, pathID, now)
}

func (s *Server) requestToMessage(req *IngestRequest, pathID string, now time.Time) (*courier.Message, error) {
	hasJSON := len(req.Payload) > 0 && string(req.Payload) != "null"
	hasB64 := req.PayloadBase64 != nil
	if hasJSON == hasB64 {
		return nil, malformed("give exactly one of payload and payload_base64")
	}
	m := &courier.Message{
		ID:          req.ID,
		Type:        req.Type,
		Route:       req.Route,
		ContentType: req.ContentType,
		Headers:     req.Headers,
		OrderingKey: req.OrderingKey,
		Recipient:   req.Recipient,
	}
	if pathID != "" {
		if req.ID != "" && req.ID != pathID {
			return nil, courier.Errorf(courier.CodeInvalidArgument, "the id in the body (%q) differs from the id in the path (%q)", req.ID, pathID)
		}
		m.ID = pathID
	}
	if hasJSON {
		m.Payload = []byte(req.Payload)
		if m.ContentType == "" {
			m.ContentType = "application/json"
		}
	} else {
		p, err := base64.StdEncoding.DecodeString(*req.PayloadBase64)
		if err != nil {
			return nil, malformed("payload_base64 is not valid base64: %v", err)
		}
		m.Payload = p
		if m.ContentType == "" {
			m.ContentType = "application/octet-stream"
		}
	}
	if int64(len(m.Payload)) > s.maxPayload {
		return nil, courier.Errorf(courier.CodePayloadTooLarge, "the payload is %d bytes; the limit is %d", len(m.Payload), s.maxPayload)
	}
	if _, _, err := mime.ParseMediaType(m.ContentType); err != nil {
		return nil, courier.Errorf(courier.CodeInvalidArgument, "content_type %q is not a valid media type", m.ContentType)
	}
	if req.Priority != nil {
		m.Priority = *req.Priority
	}
	if req.DeliverAfter != nil {
		m.DeliverAfter = *req.DeliverAfter
	}
	if req.ExpiresAt != nil {
		m.ExpiresAt = *req.ExpiresAt
		if !m.ExpiresAt.After(now) {
			return nil, courier.Errorf(courier.CodeInvalidArgument, "expires_at %s is in the past", m.ExpiresAt.Format(time.RFC3339))
		}
	}
	t := s.topology.Load()
	if err := t.Validate(m); err != nil {
		return nil, err
	}
	if m.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("new message id: %w", err)
		}
		m.ID = id.String()
	}
	courier.Accept(m, t.Policy(m.Type), req.Priority != nil, now)
	t.StartWorkflow(m)
	return m, nil
}

// jsonError turns a decoding error into a message for the sender.
func jsonError(err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return fmt.Sprintf("malformed JSON at byte %d: %v", syntax.Offset, syntax)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %q must be %s, not a JSON %s", typ.Field, typ.Type, typ.Value)
	case errors.Is(err, io.EOF):
		return "the body is empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	default:
		return err.Error()
	}
}

func (s *Server) handleBatch(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r, w, s.maxBatchBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req BatchRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		s.writeError(w, r, malformed("the body is not a valid batch request: %v", jsonError(err)))
		return
	}
	if req.Messages == nil {
		s.writeError(w, r, malformed(`the body needs a "messages" list`))
		return
	}
	if len(req.Messages) > MaxBatchItems {
		s.writeError(w, r, courier.Errorf(courier.CodePayloadTooLarge, "a batch holds at most %d messages, not %d", MaxBatchItems, len(req.Messages)))
		return
	}
	k := keyOf(r)
	now := s.clock.Now()
	if err := s.limits.take(k, now, len(req.Messages)); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkSuspended(r.Context(), k); err != nil {
		s.writeError(w, r, err)
		return
	}
	results := make([]BatchResult, len(req.Messages))
	var msgs []*courier.Message
	var index []int // index[i] is the position of msgs[i] in the batch
	for i, raw := range req.Messages {
		m, err := s.decodeMessage(raw, "", now)
		if err == nil && k != nil {
			if err = checkRoute(k, m.Route); err == nil {
				m.Sender = k.Name
			}
		}
		if err != nil {
			if courier.ErrorCode(err) == courier.CodeInternal {
				s.writeError(w, r, err)
				return
			}
			results[i] = BatchResult{ID: itemID(raw), Status: StatusOf(err), Error: errorInfo(err)}
			continue
		}
		msgs = append(msgs, m)
		index = append(index, i)
	}
	if len(msgs) > 0 {
		res, err := s.store.Ingest(r.Context(), msgs)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		var due []string
		later := map[string]time.Time{} // the earliest of each route's messages due later
		for j, ir := range res {
			i := index[j]
			switch ir.Status {
			case courier.IngestCreated:
				s.observer.Ingested(msgs[j])
				results[i] = BatchResult{ID: msgs[j].ID, Status: http.StatusCreated}
				r, at := msgs[j].Route, msgs[j].NextAttemptAt
				switch {
				case !at.After(now):
					if !slices.Contains(due, r) {
						due = append(due, r)
					}
				case later[r].IsZero() || at.Before(later[r]):
					later[r] = at
				}
			case courier.IngestExists:
				if ir.Message.Sender != msgs[j].Sender {
					err := conflictError(msgs[j].ID)
					results[i] = BatchResult{ID: msgs[j].ID, Status: StatusOf(err), Error: errorInfo(err)}
					break
				}
				results[i] = BatchResult{ID: msgs[j].ID, Status: http.StatusOK}
			default:
				err := conflictError(msgs[j].ID)
				results[i] = BatchResult{ID: msgs[j].ID, Status: StatusOf(err), Error: errorInfo(err)}
			}
		}
		if len(due) > 0 {
			s.due(due)
		}
		for r, at := range later {
			s.scheduled(r, at)
		}
	}
	writeJSON(w, http.StatusOK, BatchResponse{Results: results})
}

// itemID recovers the id of a batch item that failed to decode, so that its
// result can name it.
func itemID(raw json.RawMessage) string {
	var v struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(raw, &v) == nil && courier.ValidID(v.ID) {
		return v.ID
	}
	return ""
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	m, err := s.ownMessage(r, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v := toMessage(m, s.topology.Load(), true)
	switch r.URL.Query().Get("payload") {
	case "":
	case "base64":
		// The bytes as stored, whatever they hold: a JSON payload as a JSON
		// value is encoded anew (compacted, with <, > and & escaped), which
		// a preview or a byte count must not take for the payload.
		v.Payload, v.PayloadBase64 = nil, base64.StdEncoding.EncodeToString(m.Payload)
	default:
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "payload=%q: the only form to ask for is base64", r.URL.Query().Get("payload")))
		return
	}
	if v.Actions, err = s.actionViews(r.Context(), m.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	v.WaitingFor = s.waitingFor(r, m)
	writeJSON(w, http.StatusOK, v)
}

// waitingFor returns what a waiting message's key waits for, if the caller
// may see it: a best effort, as the holder may change at any moment.
func (s *Server) waitingFor(r *http.Request, m *courier.Message) *KeyHolder {
	if !m.Waiting() {
		return nil
	}
	h, err := s.store.KeyHolder(r.Context(), m.Route, m.OrderingKey)
	if err != nil || !ownsMessage(r, h) {
		return nil
	}
	return &KeyHolder{ID: h.ID, State: h.State, Reason: h.Reason, LastError: h.LastError}
}

// ownMessage returns a message the request may see. Another key's message
// is not found, exactly as a missing one, so that a sender cannot probe for
// the ids of others.
func (s *Server) ownMessage(r *http.Request, id string) (*courier.Message, error) {
	m, err := s.store.Message(r.Context(), id)
	if err != nil {
		return nil, err
	}
	if !ownsMessage(r, m) {
		return nil, courier.Errorf(courier.CodeNotFound, "message %q not found", id)
	}
	return m, nil
}

func (s *Server) handleAttempts(w http.ResponseWriter, r *http.Request) {
	if k := keyOf(r); k != nil && k.Role == courier.RoleSender {
		if _, err := s.ownMessage(r, r.PathValue("id")); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	attempts, err := s.store.Attempts(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := AttemptList{Attempts: make([]Attempt, len(attempts))}
	for i, a := range attempts {
		out.Attempts[i] = toAttempt(a)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	f, err := parseFilter(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if k := keyOf(r); k != nil && k.Role == courier.RoleSender {
		if f.Sender != "" && f.Sender != k.Name {
			s.writeError(w, r, courier.Errorf(courier.CodePermissionDenied, "key %q may list only its own messages", k.Name))
			return
		}
		f.Sender = k.Name
	}
	page, err := s.store.Messages(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := MessageList{Messages: make([]Message, len(page.Messages)), NextCursor: page.Next}
	t := s.topology.Load()
	for i, m := range page.Messages {
		out.Messages[i] = toMessage(m, t, false)
	}
	writeJSON(w, http.StatusOK, out)
}

// parseFilter reads the query of a listing.
func parseFilter(r *http.Request) (courier.MessageFilter, error) {
	q := r.URL.Query()
	for key := range q {
		switch key {
		case "state", "type", "route", "endpoint", "reason", "sender", "limit", "cursor", "created_after", "created_before":
		default:
			return courier.MessageFilter{}, courier.Errorf(courier.CodeInvalidArgument, "unknown query parameter %q", key)
		}
	}
	f := courier.MessageFilter{
		State:    courier.State(q.Get("state")),
		Type:     q.Get("type"),
		Route:    q.Get("route"),
		Endpoint: q.Get("endpoint"),
		Reason:   courier.Reason(q.Get("reason")),
		Sender:   q.Get("sender"),
		Cursor:   q.Get("cursor"),
	}
	if f.State != "" && !f.State.Valid() {
		return f, courier.Errorf(courier.CodeInvalidArgument, "state %q is not one of queued, inflight, delivered, suspended, discarded", f.State)
	}
	if f.Reason != "" && !f.Reason.Valid() {
		return f, courier.Errorf(courier.CodeInvalidArgument, "reason %q is not a suspension reason", f.Reason)
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > courier.MaxListLimit {
			return f, courier.Errorf(courier.CodeInvalidArgument, "limit must be a whole number from 1 to %d", courier.MaxListLimit)
		}
		f.Limit = n
	}
	for _, tf := range []struct {
		key string
		dst *time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}} {
		if v := q.Get(tf.key); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return f, courier.Errorf(courier.CodeInvalidArgument, "%s must be an RFC 3339 time", tf.key)
			}
			*tf.dst = t
		}
	}
	return f, nil
}

func (s *Server) handleResubmit(w http.ResponseWriter, r *http.Request) {
	var req ResubmitRequest
	if err := s.decodeSmall(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.checkResubmitRoute(req.Route); err != nil {
		s.writeError(w, r, err)
		return
	}
	m, err := s.store.Resubmit(r.Context(), r.PathValue("id"), req.Route, s.action(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logger.Info("message resubmitted", "id", m.ID, "route", m.Route, "by", actor(r))
	s.observer.Acted(courier.ActionResubmit, 1)
	s.due([]string{m.Route})
	writeJSON(w, http.StatusOK, toMessage(m, s.topology.Load(), false))
}

// checkResubmitRoute checks the route a resubmit sends messages to: one
// that is configured and not a workflow route (messages enter a workflow
// at ingest, at its first step).
func (s *Server) checkResubmitRoute(route string) error {
	if route == "" {
		return nil
	}
	rt := s.topology.Load().Routes[route]
	switch {
	case rt == nil:
		return courier.Errorf(courier.CodeInvalidArgument, "route %q is not configured", route)
	case rt.Workflow != nil:
		return courier.Errorf(courier.CodeInvalidArgument, "route %q is a workflow route: messages enter it when they are sent, at its first step", route)
	}
	return nil
}

func (s *Server) handleDiscard(w http.ResponseWriter, r *http.Request) {
	m, err := s.store.Discard(r.Context(), r.PathValue("id"), s.action(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logger.Info("message discarded", "id", m.ID, "route", m.Route, "by", actor(r))
	s.observer.Acted(courier.ActionDiscard, 1)
	if m.OrderingKey != "" {
		s.due([]string{m.Route}) // the next message of its key may go now
	}
	writeJSON(w, http.StatusOK, toMessage(m, s.topology.Load(), false))
}

// handleBulk starts (or finds) a bulk operation and answers when it is done;
// if the caller goes away first, it goes on.
func (s *Server) handleBulk(kind courier.ActionKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req BulkRequest
		if err := s.decodeSmall(w, r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
		op, err := s.bulkOp(kind, &req, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if s.bulk == nil {
			s.writeError(w, r, courier.Errorf(courier.CodeUnavailable, "bulk operations are not available on this server"))
			return
		}
		done, err := s.bulk.Run(r.Context(), op)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		// The messages are counted by the runner as its batches are applied,
		// not here: a request may be repeated, or end before the operation
		// does.
		writeJSON(w, http.StatusOK, toOperation(done))
	}
}

// bulkOp checks a bulk request and makes the operation of it.
func (s *Server) bulkOp(kind courier.ActionKind, req *BulkRequest, r *http.Request) (courier.BulkOp, error) {
	f := req.Filter.MessageFilter()
	routeErr := s.checkResubmitRoute(req.Route) // nil without a route
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
	id := req.OperationID
	if id == "" {
		u, err := uuid.NewV7()
		if err != nil {
			return courier.BulkOp{}, fmt.Errorf("new operation id: %w", err)
		}
		id = u.String()
	}
	return courier.BulkOp{ID: id, Kind: kind, Filter: f, Route: req.Route, Who: actor(r), CreatedAt: s.clock.Now()}, nil
}

func (s *Server) handleOperation(w http.ResponseWriter, r *http.Request) {
	op, err := s.store.Bulk(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toOperation(op))
}

// healthOf returns the stored health of every endpoint, by name.
func (s *Server) healthOf(ctx context.Context) (map[string]courier.EndpointHealth, error) {
	all, err := s.store.Health(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]courier.EndpointHealth, len(all))
	for _, h := range all {
		out[h.Endpoint] = h
	}
	return out, nil
}

func (s *Server) handleEndpoints(w http.ResponseWriter, r *http.Request) {
	health, err := s.healthOf(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	t := s.topology.Load()
	out := EndpointList{Endpoints: []Endpoint{}}
	for _, e := range t.Endpoints {
		v, err := s.endpointView(r.Context(), t, e, health[e.Name])
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out.Endpoints = append(out.Endpoints, v)
	}
	slices.SortFunc(out.Endpoints, func(a, b Endpoint) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleEndpoint(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	t := s.topology.Load()
	e := t.Endpoints[name]
	if e == nil {
		s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "endpoint %q is not configured", name))
		return
	}
	health, err := s.healthOf(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	actions, err := s.actionViews(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v, err := s.endpointView(r.Context(), t, e, health[name])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	v.Actions = actions
	writeJSON(w, http.StatusOK, v)
}

// endpointView is an endpoint with its health, its queue (the queued
// messages of the routes that use it) and this node's activity.
func (s *Server) endpointView(ctx context.Context, t *courier.Topology, e *courier.Endpoint, h courier.EndpointHealth) (Endpoint, error) {
	v := toEndpoint(e, h)
	var routes []string
	for name, r := range t.Routes {
		if slices.Contains(r.Endpoints, e.Name) {
			routes = append(routes, name)
		}
	}
	queued, err := s.store.CountQueued(ctx, routes)
	if err != nil {
		return v, err
	}
	a := s.activity(e.Name)
	v.Queued, v.InFlight, v.LastHour = queued, a.InFlight, a.LastHour
	if v.LastHour == nil {
		v.LastHour = map[string]int{}
	}
	return v, nil
}

// handleSwitch switches an endpoint off (its messages are held) or on
// again, and records who did.
func (s *Server) handleSwitch(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		e := s.topology.Load().Endpoints[name]
		if e == nil {
			s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "endpoint %q is not configured", name))
			return
		}
		a := s.action(r)
		a.Subject, a.Kind = name, courier.ActionEndpointOff
		var before courier.EndpointHealth
		next := func(h courier.EndpointHealth) courier.EndpointHealth { before = h; return h.SwitchedOff(a.At) }
		if on {
			a.Kind = courier.ActionEndpointOn
			next = func(h courier.EndpointHealth) courier.EndpointHealth { before = h; return h.SwitchedOn(a.At) }
		}
		h, err := s.store.UpdateHealth(r.Context(), name, next, &a)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.logger.Info("endpoint switched "+map[bool]string{true: "on", false: "off"}[on], "endpoint", name, "by", a.Who)
		s.observer.Acted(a.Kind, 1)
		if ho, ok := s.observer.(HealthObserver); ok {
			ho.HealthChanged(name, before, h)
		}
		if on {
			s.due(nil) // its held messages may go now
		}
		v, err := s.endpointView(r.Context(), s.topology.Load(), e, h)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

// decodeSmall reads a small JSON request body strictly; an empty body is
// the zero value.
func (s *Server) decodeSmall(w http.ResponseWriter, r *http.Request, v any) error {
	body, err := readBody(r, w, 64<<10)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return malformed("the body is not valid: %v", jsonError(err))
	}
	return nil
}

// action starts the record of an operator action made by this request.
func (s *Server) action(r *http.Request) courier.Action {
	return courier.Action{At: s.clock.Now(), Who: actor(r)}
}

func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if s.reload == nil {
		s.writeError(w, r, courier.Errorf(courier.CodeUnavailable, "this server has no configuration file to reload"))
		return
	}
	if err := s.reload(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logger.Info("configuration reloaded through the API", "by", actor(r))
	writeJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
}

func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) handleReadyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.store.Ping(ctx); err != nil {
		s.writeError(w, r, courier.Unavailable("the store", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
