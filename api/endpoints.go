package api

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/courier-gw/courier/transport"

	courier "github.com/courier-gw/courier"
)

// healthOf returns the stored health of every endpoint, by name.
func (s *Server) healthOf(ctx context.Context) (map[string]courier.EndpointHealth, error) {
	all, err := s.opts.Store.Health(ctx)
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
	sc := scopeOf(r)
	out := EndpointList{Endpoints: []Endpoint{}}
	for _, e := range t.Endpoints {
		if !sc.owns(e.Name) {
			continue
		}
		v, err := s.endpointView(r.Context(), t, e, health[e.Name])
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		sc.showEndpoint(&v)
		out.Endpoints = append(out.Endpoints, v)
	}
	slices.SortFunc(out.Endpoints, func(a, b Endpoint) int { return strings.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// endpointOf returns the endpoint the request's path names, in the
// caller's tenant, its name, and the topology it is in. Another tenant's
// endpoint is not found, as one that does not exist is.
func (s *Server) endpointOf(r *http.Request) (*courier.Endpoint, string, *courier.Topology, error) {
	sc := scopeOf(r)
	name := sc.name(r.PathValue("name"))
	t := s.topology.Load()
	if e := t.Endpoints[name]; e != nil && sc.owns(name) {
		return e, name, t, nil
	}
	return nil, name, t, courier.Errorf(courier.CodeNotFound, "endpoint %q is not configured", name)
}

func (s *Server) handleEndpoint(w http.ResponseWriter, r *http.Request) {
	sc := scopeOf(r)
	e, name, t, err := s.endpointOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	health, err := s.healthOf(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	actions, err := s.actionViews(r.Context(), name, courier.KindEndpoint)
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
	if s.opts.Objects != nil {
		if o, ok := s.opts.Objects.Object(courier.KindEndpoint, name); ok {
			v.Spec, v.Version, v.UpdatedAt, v.UpdatedBy = o.Spec, o.Version, timePtr(o.UpdatedAt), o.UpdatedBy
			setETag(w, o.Version)
		}
	}
	sc.showEndpoint(&v)
	writeJSON(w, http.StatusOK, v)
}

// endpointView is an endpoint with its health, its queue (the queued
// messages of the routes that use it) and this node's activity.
func (s *Server) endpointView(ctx context.Context, t *courier.Topology, e *courier.Endpoint, h courier.EndpointHealth) (Endpoint, error) {
	v := toEndpoint(e, h)
	queued, err := s.opts.Store.CountQueued(ctx, t.RoutesOf(e.Name))
	if err != nil {
		return v, err
	}
	a := s.opts.ActivityFunc(e.Name)
	v.Queued, v.InFlight, v.LastHour = queued, a.InFlight, a.LastHour
	v.Auth = s.authView(e)
	if a.ConcurrencyLimit > 0 {
		v.ConcurrencyLimit = a.ConcurrencyLimit
	}
	if v.LastHour == nil {
		v.LastHour = map[string]int{}
	}
	return v, nil
}

// handleSwitch switches an endpoint off (its messages are held) or on
// again, and records who did.
func (s *Server) handleSwitch(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sc := scopeOf(r)
		e, name, _, err := s.endpointOf(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		a := s.action(r)
		a.Kind = switchKind(on)
		next := func(h courier.EndpointHealth) (courier.EndpointHealth, bool) { return h.SwitchedOff(a.At), true }
		if on {
			next = func(h courier.EndpointHealth) (courier.EndpointHealth, bool) { return h.SwitchedOn(a.At), true }
		}
		c, err := s.switches.do(r.Context(), s.opts.Store, courier.HealthSwitch{Endpoint: name, Next: next, Action: &a})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.switched(r, on, []courier.HealthChange{c}, a.Who)
		s.opts.Logger.Info("endpoint switched "+verb(on), "endpoint", name, "by", a.Who)
		v, err := s.endpointView(r.Context(), s.topology.Load(), e, c.After)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		sc.showEndpoint(&v)
		writeJSON(w, http.StatusOK, v)
	}
}

// handleSwitchFilter switches every endpoint a filter selects off or on,
// in one store transaction, and records for each who switched it by which
// filter.
func (s *Server) handleSwitchFilter(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req SwitchRequest
		if err := s.decodeSmall(w, r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
		sc := scopeOf(r)
		f := req.Filter.filter()
		if err := checkEndpointFilter(f); err != nil {
			s.writeError(w, r, err)
			return
		}
		health, err := s.healthOf(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		t := s.topology.Load()
		a := s.action(r)
		a.Kind, a.Detail = switchKind(on), "by filter "+f.String()
		var switches []courier.HealthSwitch
		if f.NamePrefix != "" {
			f.NamePrefix = sc.name(f.NamePrefix)
		}
		for _, name := range slices.Sorted(maps.Keys(t.Endpoints)) {
			e := t.Endpoints[name]
			if !sc.owns(name) || !f.Matches(e, health[name]) {
				continue
			}
			switches = append(switches, courier.HealthSwitch{Endpoint: name, Action: &a,
				Next: func(h courier.EndpointHealth) (courier.EndpointHealth, bool) {
					// As it is when the switch is written: another node may
					// have changed it since it was read for the filter.
					switch {
					case !f.Matches(e, h):
						return h, false
					case on:
						return h.SwitchedOn(a.At), !h.Clean()
					default:
						return h.SwitchedOff(a.At), h.State != courier.HealthOff
					}
				}})
		}
		out := SwitchResult{Filter: req.Filter, State: courier.HealthOff, Endpoints: []string{}}
		if on {
			out.State = courier.HealthActive
		}
		if len(switches) > 0 {
			changes, err := s.opts.Store.SwitchHealth(r.Context(), switches)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			changes = slices.DeleteFunc(changes, func(c courier.HealthChange) bool { return !c.Changed })
			s.switched(r, on, changes, a.Who)
			for _, c := range changes {
				out.Endpoints = append(out.Endpoints, sc.showName(c.Endpoint))
			}
		}
		out.Count = len(out.Endpoints)
		s.opts.Logger.Info("endpoints switched "+verb(on)+" by filter", "filter", f.String(), "count", out.Count, "by", a.Who)
		writeJSON(w, http.StatusOK, out)
	}
}

// switched tells the observer and the engine of the switches written: the
// engine before the answer, so that from then on this node starts no
// attempt on an endpoint switched off; and, for a switch on, that the
// endpoints' routes may have held messages due now.
func (s *Server) switched(r *http.Request, on bool, changes []courier.HealthChange, who string) {
	if len(changes) == 0 {
		return
	}
	s.opts.Observer.Acted(switchKind(on), len(changes))
	ho, _ := s.opts.Observer.(HealthObserver)
	t := s.topology.Load()
	var due []string
	for _, c := range changes {
		if ho != nil {
			ho.HealthChanged(c.Endpoint, c.Before, c.After)
		}
		s.opts.HealthSwitchedFunc(c.Endpoint, c.Before, c.After, who)
		if on {
			due = append(due, t.RoutesOf(c.Endpoint)...)
		}
	}
	if len(due) > 0 {
		slices.Sort(due)
		s.opts.DueFunc(slices.Compact(due))
	}
}

func switchKind(on bool) courier.ActionKind {
	if on {
		return courier.ActionEndpointOn
	}
	return courier.ActionEndpointOff
}

func verb(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// checkEndpointFilter refuses a filter that selects every endpoint or
// names what does not exist.
func checkEndpointFilter(f courier.EndpointFilter) error {
	switch {
	case f.Empty():
		return courier.Errorf(courier.CodeInvalidArgument, "the filter selects every endpoint: give at least one of name_prefix, transport, host and state")
	case f.Transport != "" && !slices.Contains(transport.Names(), f.Transport):
		return courier.Errorf(courier.CodeInvalidArgument, "filter.transport %q is not a transport (%s)", f.Transport, joinTransports())
	case f.State != "" && !slices.Contains([]courier.HealthState{courier.HealthActive, courier.HealthTimeout, courier.HealthSuspended, courier.HealthOff}, f.State):
		return courier.Errorf(courier.CodeInvalidArgument, "filter.state %q is not an endpoint state (active, timeout, suspended, off)", f.State)
	}
	return nil
}

func joinTransports() string {
	var names []string
	for _, t := range transport.Names() {
		names = append(names, string(t))
	}
	return strings.Join(names, ", ")
}

// SwitchRequest switches the endpoints its filter selects
// (POST /v1/endpoints/off and /on).
type SwitchRequest struct {
	Filter EndpointFilter `json:"filter"`
}

// EndpointFilter selects endpoints: every field given must match, and at
// least one must be given.
type EndpointFilter struct {
	NamePrefix string              `json:"name_prefix,omitempty"`
	Transport  courier.Transport   `json:"transport,omitempty"`
	Host       string              `json:"host,omitempty"` // of the endpoint's URL or SMTP server, with or without the port
	State      courier.HealthState `json:"state,omitempty"`
}

func (f EndpointFilter) filter() courier.EndpointFilter {
	return courier.EndpointFilter{NamePrefix: f.NamePrefix, Transport: f.Transport, Host: f.Host, State: f.State}
}

// SwitchResult is what a switch by filter did: the endpoints it switched
// (those already as asked are left out), and the state they are in now.
type SwitchResult struct {
	Filter    EndpointFilter      `json:"filter"`
	State     courier.HealthState `json:"state"`
	Count     int                 `json:"count"`
	Endpoints []string            `json:"endpoints"`
}

// switchBatch writes the switches of concurrent requests together, in one
// store transaction: while one transaction is written, the switches asked
// for meanwhile gather for the next. Thirty-two operators (or scripts)
// switching at once cost a transaction or two, not thirty-two.
type switchBatch struct {
	mu      sync.Mutex
	waiting []*switchCall
	writing bool
}

// switchCall is one request's switch, waiting for its batch.
type switchCall struct {
	sw     courier.HealthSwitch
	change courier.HealthChange
	err    error
	done   chan struct{}
}

// batchTimeout bounds the write of one batch, which outlives the request
// that started it.
const batchTimeout = 30 * time.Second

// do writes sw with the others waiting, and returns what it did.
func (b *switchBatch) do(ctx context.Context, store courier.Store, sw courier.HealthSwitch) (courier.HealthChange, error) {
	c := &switchCall{sw: sw, done: make(chan struct{})}
	b.mu.Lock()
	b.waiting = append(b.waiting, c)
	if !b.writing {
		b.writing = true
		go b.write(store)
	}
	b.mu.Unlock()
	select {
	case <-c.done:
		return c.change, c.err
	case <-ctx.Done():
		// The switch may still be written, as any write whose answer is
		// not waited for.
		return courier.HealthChange{}, courier.Unavailable("the store", ctx.Err())
	}
}

// write writes batches until none is waiting.
func (b *switchBatch) write(store courier.Store) {
	for {
		b.mu.Lock()
		batch := b.waiting
		b.waiting = nil
		if len(batch) == 0 {
			b.writing = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		switches := make([]courier.HealthSwitch, len(batch))
		for i, c := range batch {
			switches[i] = c.sw
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		changes, err := store.SwitchHealth(ctx, switches)
		cancel()
		for i, c := range batch {
			if err == nil {
				c.change = changes[i]
			}
			c.err = err
			close(c.done)
		}
	}
}
