package api

import (
	"context"
	"net/http"
	"slices"
	"strings"

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
	if s.opts.Catalog != nil {
		if o, ok := s.opts.Catalog.Object(courier.KindEndpoint, name); ok {
			v.Spec, v.Version, v.UpdatedAt, v.UpdatedBy = o.Spec, o.Version, timePtr(o.UpdatedAt), o.UpdatedBy
			setETag(w, o.Version)
		}
	}
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
		h, err := s.opts.Store.UpdateHealth(r.Context(), name, next, &a)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.opts.Logger.Info("endpoint switched "+map[bool]string{true: "on", false: "off"}[on], "endpoint", name, "by", a.Who)
		s.opts.Observer.Acted(a.Kind, 1)
		if ho, ok := s.opts.Observer.(HealthObserver); ok {
			ho.HealthChanged(name, before, h)
		}
		// Told before the answer: from then on this node's engine starts no
		// attempt on an endpoint that is off.
		s.opts.HealthSwitchedFunc(name, before, h, a.Who)
		if routes := s.topology.Load().RoutesOf(name); on && len(routes) > 0 {
			s.opts.DueFunc(routes) // its held messages may go now
		}
		v, err := s.endpointView(r.Context(), s.topology.Load(), e, h)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}
