// Package api is courier's HTTP API (docs/design.md §7) and a Go client for it.
package api

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
)

// Contract limits of the ingest API.
const (
	// MaxBatchItems bounds the messages of one batch request.
	MaxBatchItems = 10000
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
	// ReadyFunc, if set, tells why this node should take no traffic
	// although its store answers (the engine's Ready, a clock it cannot
	// vouch for); nil error: ready, with what notes it gives (a clock
	// that is off, and corrected).
	ReadyFunc func() (notes []string, err error)
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
	// StatsFunc, if set, answers GET /v1/stats (metrics.Metrics.StatsFunc)
	// with a tenant's statistics, or the server's for courier.AllTenants;
	// without it the live states are counted in the store on each request.
	StatsFunc func(ctx context.Context, tenant string) (courier.Stats, error)
	// Metrics, if set, serves GET /metrics to operator keys.
	Metrics http.Handler
	// Receivers, if set, are the receive locations of this node, for
	// GET /v1/receivers and their stop and start.
	Receivers courier.Receivers
	// Resolver, if set, answers GET /v1/lookup (courier lookup).
	Resolver courier.Resolver
	// Objects, if set, shows the topology's objects and, when the store
	// holds them, changes them (docs/design.md §15); without it those paths
	// answer 503.
	Objects Objects
	// SigningKeys, if set, are courier's signing keys: their public halves
	// served at GET /v1/signing-keys, made and retired by the server's
	// admin keys.
	SigningKeys SigningKeys
	// HealthSwitchedFunc, if set, is told of every endpoint switch, with
	// the health before and after and who switched, before the switch is
	// answered (the engine's HealthSwitched: from then on its node starts
	// no attempt on an endpoint that is off; it records the event).
	HealthSwitchedFunc func(endpoint string, before, after courier.EndpointHealth, who string)
	// IngestTokens holds the tenants' ingest buckets (Quotas.IngestRate):
	// the store's shared limits where nodes share a store; nil keeps them
	// in this process.
	IngestTokens courier.IngestTokens
	// ThrottledFunc, if set, tells whether fair share holds a tenant back
	// on this node now, and why (engine.Engine.FairShares).
	ThrottledFunc func(tenant string) (bool, string)
	// Admission bounds the ingest requests in flight on this node; its
	// zero value bounds nothing.
	Admission Admission
	// BlockedFunc, if set, says why this node's SSRF guard would refuse
	// every connection to an endpoint ("" when it would not): an endpoint
	// written with such a URL is taken, with a warning (see endpointWarnings).
	BlockedFunc func(ctx context.Context, e *courier.Endpoint) string
	// AuthFunc, if set, tells how an endpoint authenticates and what this
	// node knows of its token (the http transport's AuthState).
	AuthFunc func(e *courier.Endpoint) courier.AuthState
	// TestSendFunc, if set, sends the test message of
	// POST /v1/endpoints/{name}/test with the endpoint's transport;
	// without it that answers 503.
	TestSendFunc func(ctx context.Context, d courier.Delivery) courier.Result
}

// BulkRunner works through bulk operations (engine.Bulk is one): Run starts
// or finds the operation and waits for it until ctx ends; Begin starts or
// finds it and returns it as it stands. The runner counts the messages it
// acts on (engine.NewBulk's acted), so that they are counted once, however
// often an operation's request is repeated.
type BulkRunner interface {
	Run(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error)
	Begin(ctx context.Context, op courier.BulkOp) (courier.BulkOp, error)
}

// QuotaObserver is an Observer that is also told of each request refused
// by one of its tenant's quotas (metrics.Metrics is one), by the quota's
// name (courier.QuotaMaxQueued and the others).
type QuotaObserver interface {
	Refused(tenant, quota string)
}

// HealthObserver is an Observer that is also told when an operator's switch
// changed an endpoint's health (metrics.Metrics is one), so that what it
// reports follows the switch at once rather than at its next count.
type HealthObserver interface {
	HealthChanged(endpoint string, before, after courier.EndpointHealth)
}

// Server serves the API. It is an http.Handler.
type Server struct {
	// opts are the options with their defaults filled in; the topology
	// and the keys in force are kept apart, as reloads replace them.
	opts     Options
	topology atomic.Pointer[courier.Topology]
	keys     atomic.Pointer[keyring]
	limits   limiter
	// admission counts the ingest requests in flight (admission.go).
	admission admission
	mux       *http.ServeMux
	// patterns are the route table's, in its order: what the OpenAPI
	// description must cover (checked by a test).
	patterns []string
	// switches gathers concurrent endpoint switches into one write.
	switches switchBatch
	// refusals holds each tenant's latest refusal by its quotas (tenant.go).
	refusals sync.Map
}

// NewServer returns a Server for the options.
func NewServer(o Options) *Server {
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	o.Clock = courier.ClockOrSystem(o.Clock)
	o.Logger = courier.LoggerOrDiscard(o.Logger)
	if o.MaxPayload <= 0 {
		o.MaxPayload = courier.DefaultMaxPayload
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = courier.DefaultMaxBatchBytes
	}
	if o.DueFunc == nil {
		o.DueFunc = func([]string) {}
	}
	if o.ScheduledFunc == nil {
		o.ScheduledFunc = func(string, time.Time) {}
	}
	if o.HealthSwitchedFunc == nil {
		o.HealthSwitchedFunc = func(string, courier.EndpointHealth, courier.EndpointHealth, string) {}
	}
	if o.ActivityFunc == nil {
		o.ActivityFunc = func(string) courier.EndpointActivity { return courier.EndpointActivity{} }
	}
	if o.AuthFunc == nil {
		o.AuthFunc = func(*courier.Endpoint) courier.AuthState { return courier.AuthState{} }
	}
	if o.Topology == nil {
		o.Topology = &courier.Topology{}
	}
	if o.IngestTokens == nil {
		o.IngestTokens = &courier.TokenBuckets{}
	}
	s := &Server{mux: http.NewServeMux()}
	s.admission.limits, s.admission.now = o.Admission, o.Clock.Now
	s.topology.Store(o.Topology)
	s.SetKeys(o.Keys)
	o.Topology, o.Keys = nil, nil
	s.opts = o

	lookupParams := []string{"route", "recipient", "type"}
	for _, rt := range []struct {
		pattern string
		access  access
		params  []string // the query parameters it takes; any other is refused
		handler http.HandlerFunc
	}{
		{"PUT /v1/messages/{id}", accessIngest, nil, s.handlePut},
		{"POST /v1/messages", accessIngest, nil, s.handlePost},
		{"POST /v1/messages/batch", accessIngest, nil, s.handleBatch},
		{"GET /v1/messages", accessRead, filterParams, s.handleList},
		{"GET /v1/messages/{id}", accessRead, []string{"payload"}, s.handleGet},
		{"GET /v1/messages/{id}/attempts", accessRead, nil, s.handleAttempts},
		{"GET /v1/messages/{id}/payload", accessRead, nil, s.handlePayload},
		{"POST /v1/messages/{id}/resubmit", accessOperate, nil, s.handleResubmit},
		{"POST /v1/messages/{id}/discard", accessOperate, nil, s.handleDiscard},
		{"POST /v1/messages/{id}/erase", accessOperate, nil, s.handleErase},
		{"GET /v1/types", accessRead, nil, s.handleTypes},
		{"POST /v1/subscriptions/{name}/replay", accessOperate, nil, s.handleReplay},
		{"POST /v1/messages/{id}/resend", accessOperate, nil, s.handleResend},
		{"POST /v1/messages/{id}/deliveries/{subscription}/resend", accessOperate, nil, s.handleResend},
		{"GET /v1/messages/{id}/deliveries/{subscription}", accessRead, []string{"payload"}, s.handleDelivery},
		{"GET /v1/messages/{id}/deliveries/{subscription}/attempts", accessRead, nil, s.handleAttempts},
		{"POST /v1/messages/{id}/deliveries/{subscription}/resubmit", accessOperate, nil, s.handleResubmit},
		{"POST /v1/messages/{id}/deliveries/{subscription}/discard", accessOperate, nil, s.handleDiscard},
		{"POST /v1/messages/resubmit", accessOperate, nil, s.handleBulk(courier.ActionResubmit)},
		{"POST /v1/messages/discard", accessOperate, nil, s.handleBulk(courier.ActionDiscard)},
		{"GET /v1/operations/{id}", accessOperate, nil, s.handleOperation},
		{"GET /v1/endpoints", accessOperate, nil, s.handleEndpoints},
		{"GET /v1/endpoints/{name}", accessOperate, nil, s.handleEndpoint},
		{"POST /v1/endpoints/off", accessOperate, nil, s.handleSwitchFilter(false)},
		{"POST /v1/endpoints/on", accessOperate, nil, s.handleSwitchFilter(true)},
		{"POST /v1/endpoints/{name}/off", accessOperate, nil, s.handleSwitch(false)},
		{"POST /v1/endpoints/{name}/on", accessOperate, nil, s.handleSwitch(true)},
		{"POST /v1/endpoints/{name}/test", accessOperate, nil, s.handleTestEndpoint},
		{"GET /v1/lookup", accessOperate, lookupParams, s.handleLookup},
		{"GET /v1/receivers", accessOperate, nil, s.handleReceivers},
		{"POST /v1/receivers/{name}/stop", accessOperate, nil, s.handleReceiverSwitch(false)},
		{"POST /v1/receivers/{name}/start", accessOperate, nil, s.handleReceiverSwitch(true)},
		{"POST /v1/reload", accessAdmin, nil, s.handleReload},
		{"GET /v1/topology", accessOperate, nil, s.handleTopology},
		{"PUT /v1/topology", accessAdmin, []string{"prune", "dry_run"}, s.handleApply},
		{"POST /v1/topology/rotate-secrets", accessAdmin, nil, s.handleRotateSecrets},
		{"PUT /v1/endpoints/{name}", accessAdmin, nil, s.handlePutObject(courier.KindEndpoint)},
		{"DELETE /v1/endpoints/{name}", accessAdmin, nil, s.handleDeleteObject(courier.KindEndpoint)},
		{"GET /v1/routes/{name}", accessOperate, nil, s.handleObject(courier.KindRoute)},
		{"PUT /v1/routes/{name}", accessAdmin, nil, s.handlePutObject(courier.KindRoute)},
		{"DELETE /v1/routes/{name}", accessAdmin, nil, s.handleDeleteObject(courier.KindRoute)},
		{"GET /v1/policies", accessOperate, nil, s.handleObjects(courier.KindPolicy)},
		{"GET /v1/policies/{name}", accessOperate, nil, s.handleObject(courier.KindPolicy)},
		{"PUT /v1/policies/{name}", accessAdmin, nil, s.handlePutObject(courier.KindPolicy)},
		{"DELETE /v1/policies/{name}", accessAdmin, nil, s.handleDeleteObject(courier.KindPolicy)},
		{"GET /v1/subscriptions", accessOperate, nil, s.handleObjects(courier.KindSubscription)},
		{"GET /v1/subscriptions/{name}", accessOperate, nil, s.handleObject(courier.KindSubscription)},
		{"PUT /v1/subscriptions/{name}", accessAdmin, nil, s.handlePutObject(courier.KindSubscription)},
		{"DELETE /v1/subscriptions/{name}", accessAdmin, nil, s.handleDeleteObject(courier.KindSubscription)},
		{"GET /v1/audit", accessOperate, auditParams, s.handleAudit},
		{"GET /v1/events", accessOperate, eventParams, s.handleEvents},
		{"GET /v1/keys", accessAdmin, nil, s.handleObjects(courier.KindKey)},
		{"GET /v1/keys/{name}", accessAdmin, nil, s.handleObject(courier.KindKey)},
		{"PUT /v1/keys/{name}", accessAdmin, nil, s.handlePutObject(courier.KindKey)},
		{"DELETE /v1/keys/{name}", accessAdmin, nil, s.handleDeleteObject(courier.KindKey)},
		{"GET /v1/stats", accessOperate, nil, s.handleStats},
		{"GET /v1/tenants", accessRead, nil, s.handleTenants},
		{"GET /v1/tenants/{tenant}", accessRead, nil, s.handleTenant},
		{"PUT /v1/tenants/{tenant}", accessAdmin, nil, s.handlePutTenant},
		{"DELETE /v1/tenants/{tenant}", accessAdmin, nil, s.handleDeleteTenant},
		{"GET /v1/routes", accessOperate, nil, s.handleRoutes},
		{"GET /metrics", accessOperate, anyQuery, s.handleMetrics(o.Metrics)},
		{"GET /healthz", accessPublic, anyQuery, s.handleHealthz},
		{"GET /readyz", accessPublic, anyQuery, s.handleReadyz},
		{"GET /v1/claims/{id}", accessPublic, claimParams, s.handleClaim},
		{"GET /v1/claims/{id}/{subscription}", accessPublic, claimParams, s.handleClaim},
		{"HEAD /v1/claims/{id}", accessPublic, claimParams, s.handleClaim},
		{"HEAD /v1/claims/{id}/{subscription}", accessPublic, claimParams, s.handleClaim},
		{"GET /v1/signing-keys", accessPublic, nil, s.handleSigningKeys},
		{"POST /v1/signing-keys/rotate", accessAdmin, nil, s.handleRotateSigningKey},
		{"DELETE /v1/signing-keys/{id}", accessAdmin, nil, s.handleRetireSigningKey},
		{"GET /v1/openapi.json", accessPublic, nil, s.handleOpenAPIJSON},
		{"GET /v1/openapi.yaml", accessPublic, nil, s.handleOpenAPIYAML},
	} {
		h := s.guard(rt.access, rt.params, rt.handler)
		if defaultTenantOnly[rt.pattern] {
			h = s.defaultTenantOnly(h)
		}
		s.mux.Handle(rt.pattern, h)
		s.patterns = append(s.patterns, rt.pattern)
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

func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	if s.opts.ReloadFunc == nil {
		s.writeError(w, r, courier.Errorf(courier.CodeNotConfigured, "this server has no configuration file to reload"))
		return
	}
	if err := s.opts.ReloadFunc(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.opts.Logger.Info("configuration reloaded through the API", "by", actor(r))
	writeJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
}

// guard lets a request through to h when its key may do a and its query
// names only params, each once.
func (s *Server) guard(a access, params []string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := authorize(r, a)
		if err == nil {
			err = checkQuery(r, params)
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		h(w, r)
	})
}

// publicPaths answer without a key: probes of load balancers and
// orchestrators carry none, and the OpenAPI description tells only what
// the API is (no data, no configuration), which client generators fetch
// before they have a key; the public signing keys are for receivers,
// which hold no key of courier's.
var publicPaths = map[string]bool{"/healthz": true, "/readyz": true, "/v1/openapi.json": true, "/v1/openapi.yaml": true,
	"/v1/signing-keys": true}

// claimsPrefix begins the paths of claim-check URLs, which answer without a
// key too: the receivers that fetch them have none, and each URL carries
// its own signature, checked before anything is read.
const claimsPrefix = "/v1/claims/"

// isPublic reports whether a path answers without a key.
func isPublic(path string) bool { return publicPaths[path] || strings.HasPrefix(path, claimsPrefix) }

// ServeHTTP authenticates and routes a request. With keys configured, every
// request but the probes needs a valid key, before anything else about it
// is looked at: an unknown path is 401 too, so that a caller without a key
// learns nothing of the API. Without keys, every request but the probes must
// name a loopback host, and one that changes something must not come from a
// page of another origin (403). Paths and methods the API does not have get
// the error body too, not the mux's plain text.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !isPublic(r.URL.Path) {
		var k *Key
		if kr := s.keys.Load(); kr != nil {
			var err error
			if k, err = kr.authenticate(r); err != nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="courier"`)
				s.writeError(w, r, err)
				return
			}
			r = withKey(r, k)
		} else if err := checkLocalCaller(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		sc := keyScope(k)
		if tenant, rest, ok := tenantPath(r.URL.Path); ok {
			var err error
			if sc, err = s.enter(sc, tenant); err != nil {
				s.writeError(w, r, err)
				return
			}
			r = withPath(r, rest)
		}
		r = withScope(r, sc)
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

// action starts the record of an operator action made by this request.
func (s *Server) action(r *http.Request) courier.Action {
	return courier.Action{At: s.opts.Clock.Now(), Who: actor(r)}
}
