package api

import (
	"net/http"
	"slices"
	"strings"

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
	HTTP                    *HTTPConfig          `json:"http,omitempty"`
	SMTP                    *SMTPConfig          `json:"smtp,omitempty"`
	File                    *FileConfig          `json:"file,omitempty"`
	AMQP                    *AMQPConfig          `json:"amqp,omitempty"`
	NATS                    *NATSConfig          `json:"nats,omitempty"`
	ClaimCheck              *ClaimCheckConfig    `json:"claim_check,omitempty"`
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

// HTTPConfig are an http endpoint's settings; secrets are REDACTED.
type HTTPConfig struct {
	URL             string   `json:"url"`
	Method          string   `json:"method,omitempty"`
	Secrets         []string `json:"secrets,omitempty"`
	FollowRedirects bool     `json:"follow_redirects,omitempty"`
	AllowNetworks   []string `json:"allow_networks,omitempty"`
	TLSCert         string   `json:"tls_cert,omitempty"`
	TLSKey          string   `json:"tls_key,omitempty"`
	TLSCA           string   `json:"tls_ca,omitempty"`
}

// SMTPConfig are an smtp endpoint's settings; the password is REDACTED.
type SMTPConfig struct {
	Addr     string   `json:"addr"`
	From     string   `json:"from"`
	To       []string `json:"to"`
	Username string   `json:"username,omitempty"`
	Password string   `json:"password,omitempty"`
	StartTLS string   `json:"starttls,omitempty"`
}

// FileConfig are a file endpoint's settings.
type FileConfig struct {
	Dir  string `json:"dir"`
	Name string `json:"name,omitempty"`
}

// AMQPConfig are an amqp endpoint's settings.
type AMQPConfig struct {
	URL        string `json:"url"`
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
}

// NATSConfig are a nats endpoint's settings.
type NATSConfig struct {
	URL     string `json:"url"`
	Subject string `json:"subject"`
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
	switch e.Transport {
	case courier.TransportHTTP:
		h := e.HTTP
		v.HTTP = &HTTPConfig{URL: h.URL, Method: h.Method, Secrets: h.Secrets, FollowRedirects: h.FollowRedirects,
			AllowNetworks: h.AllowNetworks, TLSCert: h.TLS.Cert, TLSKey: h.TLS.Key, TLSCA: h.TLS.CA}
	case courier.TransportSMTP:
		m := e.SMTP
		v.SMTP = &SMTPConfig{Addr: m.Addr, From: m.From, To: m.To, Username: m.Username, Password: m.Password, StartTLS: m.StartTLS}
	case courier.TransportFile:
		v.File = &FileConfig{Dir: e.File.Dir, Name: e.File.Name}
	case courier.TransportAMQP:
		v.AMQP = &AMQPConfig{URL: e.AMQP.URL, Exchange: e.AMQP.Exchange, RoutingKey: e.AMQP.RoutingKey}
	case courier.TransportNATS:
		v.NATS = &NATSConfig{URL: e.NATS.URL, Subject: e.NATS.Subject}
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
