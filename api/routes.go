package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/courier-gw/courier/transport"

	courier "github.com/courier-gw/courier"
)

// Config is GET /v1/routes: the routes, endpoints and policies in force, as
// loaded, with secrets redacted (courier.Endpoint.Redacted).
type Config struct {
	Routes    []RouteConfig    `json:"routes"`
	Endpoints []EndpointConfig `json:"endpoints"`
	Policies  []PolicyConfig   `json:"policies"`
}

// RouteConfig is a route as configured.
type RouteConfig struct {
	Name             string                   `json:"name"`
	Endpoints        []string                 `json:"endpoints"`
	Strategy         courier.Strategy         `json:"strategy"`
	Weights          map[string]int           `json:"weights,omitempty"`
	OrderedOnFailure courier.OrderedOnFailure `json:"ordered_on_failure,omitempty"`
}

// EndpointConfig is an endpoint as configured, its transport's settings
// under the transport's name.
type EndpointConfig struct {
	Name                    string               `json:"name"`
	Transport               courier.Transport    `json:"transport"`
	Timeout                 string               `json:"timeout"`
	MaxConcurrency          int                  `json:"max_concurrency"`            // with concurrency_auto, the ceiling
	ConcurrencyAuto         bool                 `json:"concurrency_auto,omitempty"` // max_concurrency: auto
	MinInterval             string               `json:"min_interval,omitempty"`
	Rate                    string               `json:"rate,omitempty"`
	TimeoutOn               []courier.ErrorClass `json:"timeout_on"`
	SuspendOn               []courier.ErrorClass `json:"suspend_on"`
	Permanent               []courier.ErrorClass `json:"permanent,omitempty"`
	RetriesBeforeSuspension int                  `json:"retries_before_suspension"`
	Suspension              BackoffConfig        `json:"suspension"`
	// Settings are the transport's settings as its package shows them
	// (courier.TransportKind.Wire), under the transport's name.
	Settings   any               `json:"-"`
	ClaimCheck *ClaimCheckConfig `json:"claim_check,omitempty"`
}

// MarshalJSON writes the endpoint with its settings under the transport's
// name ("http": {...}), before claim_check.
func (v EndpointConfig) MarshalJSON() ([]byte, error) {
	type plain EndpointConfig // without this method
	cc := v.ClaimCheck
	v.ClaimCheck = nil
	b, err := json.Marshal(plain(v))
	if err != nil || (v.Settings == nil && cc == nil) {
		return b, err
	}
	b = b[:len(b)-1] // the closing brace
	if v.Settings != nil {
		s, err := json.Marshal(v.Settings)
		if err != nil {
			return nil, err
		}
		name, _ := json.Marshal(string(v.Transport))
		b = append(append(append(append(b, ','), name...), ':'), s...)
	}
	if cc != nil {
		c, err := json.Marshal(cc)
		if err != nil {
			return nil, err
		}
		b = append(append(b, `,"claim_check":`...), c...)
	}
	return append(b, '}'), nil
}

// ClaimCheckConfig is an endpoint's claim check: payloads of more than
// Above bytes go as a notice whose URL is valid for TTL.
type ClaimCheckConfig struct {
	Above int64  `json:"above"`
	TTL   string `json:"ttl"`
}

// BackoffConfig is a growing delay as configured.
type BackoffConfig struct {
	Initial string  `json:"initial"`
	Factor  float64 `json:"factor"`
	Max     string  `json:"max"`
	Jitter  float64 `json:"jitter,omitempty"`
}

// PolicyConfig is a policy as configured.
type PolicyConfig struct {
	Name        string              `json:"name"`
	Backoff     *BackoffConfig      `json:"backoff,omitempty"`
	Schedule    []string            `json:"schedule,omitempty"`
	MaxAttempts int                 `json:"max_attempts,omitempty"`
	MaxAge      string              `json:"max_age,omitempty"`
	Priority    int                 `json:"priority"`
	Escalate    []EscalationConfig  `json:"escalate,omitempty"`
	Fallback    *FallbackConfig     `json:"fallback,omitempty"`
	OnExhausted courier.OnExhausted `json:"on_exhausted,omitempty"`
}

// EscalationConfig is one escalation of a policy.
type EscalationConfig struct {
	After  string `json:"after"`
	Notify string `json:"notify"`
}

// FallbackConfig is the fallback of a policy; After is empty for "when
// the policy is exhausted".
type FallbackConfig struct {
	After string `json:"after,omitempty"`
	Route string `json:"route"`
}

func (s *Server) handleRoutes(w http.ResponseWriter, r *http.Request) {
	sc := scopeOf(r)
	out := toConfig(s.topology.Load())
	out.Routes = slices.DeleteFunc(out.Routes, func(v RouteConfig) bool { return !sc.owns(v.Name) })
	out.Endpoints = slices.DeleteFunc(out.Endpoints, func(v EndpointConfig) bool { return !sc.owns(v.Name) })
	out.Policies = slices.DeleteFunc(out.Policies, func(v PolicyConfig) bool { return !sc.owns(v.Name) })
	for i := range out.Routes {
		v := &out.Routes[i]
		v.Name, v.Endpoints = sc.showName(v.Name), sc.showNames(v.Endpoints)
		if len(v.Weights) > 0 {
			weights := make(map[string]int, len(v.Weights))
			for ep, n := range v.Weights {
				weights[sc.showName(ep)] = n
			}
			v.Weights = weights
		}
	}
	for i := range out.Endpoints {
		out.Endpoints[i].Name = sc.showName(out.Endpoints[i].Name)
	}
	for i := range out.Policies {
		p := &out.Policies[i]
		p.Name = sc.showName(p.Name)
		for j := range p.Escalate {
			p.Escalate[j].Notify = sc.showName(p.Escalate[j].Notify)
		}
		if p.Fallback != nil {
			p.Fallback.Route = sc.showName(p.Fallback.Route)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// toConfig shows a topology, sorted by name, every endpoint redacted.
func toConfig(t *courier.Topology) Config {
	out := Config{Routes: []RouteConfig{}, Endpoints: []EndpointConfig{}, Policies: []PolicyConfig{}}
	for _, r := range t.Routes {
		out.Routes = append(out.Routes, RouteConfig{Name: r.Name, Endpoints: r.Endpoints, Strategy: r.Strategy,
			Weights: r.Weights, OrderedOnFailure: r.OrderedOnFailure})
	}
	for _, e := range t.Endpoints {
		out.Endpoints = append(out.Endpoints, toEndpointConfig(e.Redacted()))
	}
	for _, p := range t.Policies {
		out.Policies = append(out.Policies, toPolicyConfig(p))
	}
	slices.SortFunc(out.Routes, func(a, b RouteConfig) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Endpoints, func(a, b EndpointConfig) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(out.Policies, func(a, b PolicyConfig) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// toEndpointConfig shows an endpoint that has been redacted already.
func toEndpointConfig(e *courier.Endpoint) EndpointConfig {
	v := EndpointConfig{Name: e.Name, Transport: e.Transport, Timeout: e.Timeout.String(), MaxConcurrency: e.MaxConcurrency,
		ConcurrencyAuto: e.AutoConcurrency,
		TimeoutOn:       e.TimeoutOn, SuspendOn: e.SuspendOn, Permanent: e.PermanentClasses,
		RetriesBeforeSuspension: e.RetriesBeforeSuspension, Suspension: toBackoff(e.Suspension)}
	if e.MinInterval > 0 {
		v.MinInterval = e.MinInterval.String()
	}
	if !e.Rate.Unlimited() {
		v.Rate = e.Rate.String()
	}
	if c := e.ClaimCheck; c != nil {
		v.ClaimCheck = &ClaimCheckConfig{Above: c.Above, TTL: c.TTL.String()}
	}
	if k, ok := transport.Kind(e.Transport); ok && e.Settings != nil {
		v.Settings = k.Wire(e.Settings)
	}
	return v
}

func toBackoff(b courier.Backoff) BackoffConfig {
	return BackoffConfig{Initial: b.Initial.String(), Factor: b.Factor, Max: b.Max.String(), Jitter: b.Jitter}
}

func toPolicyConfig(p *courier.Policy) PolicyConfig {
	v := PolicyConfig{Name: p.Name, MaxAttempts: p.MaxAttempts, Priority: p.Priority, OnExhausted: p.OnExhausted}
	if len(p.Schedule) > 0 {
		for _, d := range p.Schedule {
			v.Schedule = append(v.Schedule, d.String())
		}
	} else {
		b := toBackoff(p.Backoff)
		v.Backoff = &b
	}
	if p.MaxAge > 0 {
		v.MaxAge = p.MaxAge.String()
	}
	for _, e := range p.Escalate {
		v.Escalate = append(v.Escalate, EscalationConfig{After: e.After.String(), Notify: e.Notify})
	}
	if p.Fallback != nil {
		v.Fallback = &FallbackConfig{Route: p.Fallback.Route}
		if p.Fallback.After > 0 {
			v.Fallback.After = p.Fallback.After.String()
		}
	}
	return v
}
