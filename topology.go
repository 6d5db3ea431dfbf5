package courier

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Transport names how an endpoint delivers. Each is a package under
// transport/ that brings its endpoints' Settings (a TransportKind).
type Transport string

// The names of the transports courier ships. The domain has rules about
// two (notices go to smtp or http endpoints, a lookup route resolves http
// endpoints); a transport added later needs no name here, its package
// declares it.
const (
	TransportHTTP Transport = "http"
	TransportSMTP Transport = "smtp"
	TransportFile Transport = "file"
	TransportAMQP Transport = "amqp"
	TransportNATS Transport = "nats"
)

// Backoff is a growing delay: initial × factor^n, capped at max, with an
// optional jitter fraction applied to each value (never compounded).
type Backoff struct {
	Initial time.Duration
	Factor  float64
	Max     time.Duration
	Jitter  float64
}

// Rate is a token-bucket rate: N tokens per Per. The zero Rate is unlimited.
type Rate struct {
	N   int
	Per time.Duration
}

// Unlimited reports whether r sets no limit.
func (r Rate) Unlimited() bool { return r.N <= 0 || r.Per <= 0 }

// PerSecond returns r in events per second: 0 for an unlimited rate.
func (r Rate) PerSecond() float64 {
	if r.Unlimited() {
		return 0
	}
	return float64(r.N) / r.Per.Seconds()
}

// String formats r as it is written in configuration ("100/s").
func (r Rate) String() string {
	if r.Unlimited() {
		return "unlimited"
	}
	for unit, d := range rateUnits {
		if d == r.Per {
			return fmt.Sprintf("%d/%s", r.N, unit)
		}
	}
	return fmt.Sprintf("%d/%s", r.N, r.Per)
}

var rateUnits = map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}

// ParseRate parses "N/s", "N/m", "N/h" or "N/<Go duration>" ("10/500ms").
func ParseRate(s string) (Rate, error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("rate %q: want N/s, N/m, N/h or N/<duration>", s)
	}
	count, err := strconv.Atoi(strings.TrimSpace(n))
	if err != nil || count <= 0 {
		return Rate{}, fmt.Errorf("rate %q: the count must be a positive whole number", s)
	}
	per = strings.TrimSpace(per)
	d, ok := rateUnits[per]
	if !ok {
		d, err = time.ParseDuration(per)
		if err != nil || d <= 0 {
			return Rate{}, fmt.Errorf("rate %q: the period must be s, m, h or a positive duration", s)
		}
	}
	return Rate{N: count, Per: d}, nil
}

// Endpoint is one concrete target on one transport, with its own health
// rules and politeness limits.
type Endpoint struct {
	Name           string
	Transport      Transport
	Timeout        time.Duration
	MaxConcurrency int
	// AutoConcurrency (max_concurrency: auto) lets the engine adapt the
	// attempts in flight to the receiver (AdaptiveLimit); MaxConcurrency is
	// then the most it may reach (max_concurrency_ceiling).
	AutoConcurrency         bool
	MinInterval             time.Duration
	Rate                    Rate
	TimeoutOn               []ErrorClass
	SuspendOn               []ErrorClass
	PermanentClasses        []ErrorClass // nil: the default permanent classes
	RetriesBeforeSuspension int
	Suspension              Backoff

	// Settings are those of the transport (its package's type); nil
	// until they are read.
	Settings Settings

	// ClaimCheck, when set, hands the receiver a notice with a signed URL
	// instead of a payload larger than its Above; nil sends every payload.
	ClaimCheck *ClaimCheck
}

// Strategy says how a route spreads messages over its endpoints.
type Strategy string

// The route strategies.
const (
	StrategySingle     Strategy = "single"
	StrategyFailover   Strategy = "failover"
	StrategyRoundRobin Strategy = "round_robin"
	StrategyWeighted   Strategy = "weighted"
)

// Strategies lists every strategy.
var Strategies = []Strategy{StrategySingle, StrategyFailover, StrategyRoundRobin, StrategyWeighted}

// OrderedOnFailure says what a suspended head of an ordering key does to the
// messages behind it.
type OrderedOnFailure string

// The ordered_on_failure choices.
const (
	OrderedBlock OrderedOnFailure = "block"
	OrderedSkip  OrderedOnFailure = "skip"
)

// Route is a named destination: endpoints and a strategy.
type Route struct {
	Name             string
	Endpoints        []string
	Strategy         Strategy
	Weights          map[string]int // for StrategyWeighted; missing endpoints weigh 1
	OrderedOnFailure OrderedOnFailure
	// Workflow makes the route a workflow (docs/design.md §13): it has no endpoints
	// of its own, its messages go through the steps' implicit routes.
	Workflow *Workflow
	// Lookup makes the route resolve each message's endpoint from its
	// recipient through a registry (docs/design.md §13); it has no endpoints of its
	// own, and EndpointTemplate gives the settings of the resolved ones.
	Lookup           *Lookup
	EndpointTemplate *Endpoint
	// Redrive resubmits the route's suspended messages when one of its
	// endpoints recovers (redrive:); nil when the route does not.
	Redrive *Redrive
}

// Policy says how often and how long messages of a type are retried, and what
// happens when that runs out.
type Policy struct {
	Name        string
	Backoff     Backoff
	Schedule    []time.Duration // when set, replaces Backoff: one delay per retry
	MaxAttempts int
	MaxAge      time.Duration
	Priority    int
	Escalate    []Escalation
	Fallback    *Fallback
	OnExhausted OnExhausted
}

// Escalation sends a notice to an endpoint once a message is After old.
type Escalation struct {
	After  time.Duration
	Notify string
}

// Fallback hands a message to another route after a time, or when the policy
// is exhausted (After == 0).
type Fallback struct {
	After time.Duration
	Route string
}

// OnExhausted is what happens to a message whose policy ran out and that has
// no fallback left.
type OnExhausted string

// The on_exhausted choices.
const (
	ExhaustedSuspend OnExhausted = "suspend"
	ExhaustedDiscard OnExhausted = "discard"
)

// DefaultPolicyName names the policy of types that have none of their own.
const DefaultPolicyName = "default"

// Topology is the loaded configuration of delivery: endpoints, routes and
// policies by name. It is replaced whole on reload, never changed in place.
type Topology struct {
	Endpoints map[string]*Endpoint
	Routes    map[string]*Route
	Policies  map[string]*Policy
	// Subscriptions give published messages their deliveries (docs/design.md §14).
	Subscriptions map[string]*Subscription
	// Tenants are the parties that own the objects, by name (docs/design.md
	// §20); the default tenant is here when configured, and is implied
	// with no quotas and weight 1 when not.
	Tenants map[string]*Tenant

	// implicit holds the workflows' implicit routes by name once Prepare
	// made them; until then Route makes one on each call.
	implicit map[string]*Route
	// routesOf holds the routes of each endpoint, sorted, once Prepare
	// made it; until then RoutesOf looks through every route.
	routesOf map[string][]string
}

// Prepare makes the implicit routes of the workflows (their steps and
// compensations) once, so that looking one up parses no name. Notice
// routes, one per endpoint, are made when asked for: notices are rare,
// and making ten thousand routes on every change of the topology is not.
// Call it when the topology is complete and before it is shared; a
// topology is not changed after that (a change makes a new one).
func (t *Topology) Prepare() {
	implicit := map[string]*Route{}
	for _, w := range t.Routes {
		if w.Workflow == nil {
			continue
		}
		for k, s := range w.Workflow.Steps {
			for _, r := range []string{StepRoute(w.Name, k+1), UndoRoute(w.Name, k+1)} {
				if s.Compensate == "" && r == UndoRoute(w.Name, k+1) {
					continue
				}
				if route := t.makeImplicit(r); route != nil {
					implicit[r] = route
				}
			}
		}
	}
	t.implicit = implicit
	routesOf := map[string][]string{}
	for name, r := range t.Routes {
		for _, ep := range r.Endpoints {
			routesOf[ep] = append(routesOf[ep], name)
		}
	}
	for ep, names := range routesOf {
		slices.Sort(names)
		routesOf[ep] = slices.Compact(names)
	}
	t.routesOf = routesOf
}

// RoutesOf returns the names of the routes that use an endpoint, sorted.
// With ten thousand routes, looking through them all for each endpoint
// switched or listed costs more than the switch itself: Prepare indexes
// them once.
func (t *Topology) RoutesOf(endpoint string) []string {
	if t.routesOf != nil {
		return t.routesOf[endpoint]
	}
	var out []string
	for name, r := range t.Routes {
		if slices.Contains(r.Endpoints, endpoint) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// Policy returns the policy of a message type: its own, else its tenant's
// default (the policy named default of the type's tenant), else the
// built-in default. A tenant never falls back on another's policy.
func (t *Topology) Policy(msgType string) *Policy {
	if p, ok := t.Policies[msgType]; ok {
		return p
	}
	if p, ok := t.Policies[Qualify(TenantOf(msgType), DefaultPolicyName)]; ok {
		return p
	}
	return DefaultPolicy()
}

// DefaultPolicy returns the built-in default policy (docs/design.md §5).
func DefaultPolicy() *Policy {
	return &Policy{
		Name:        DefaultPolicyName,
		Backoff:     Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour, Jitter: 0.2},
		MaxAttempts: 12,
		MaxAge:      48 * time.Hour,
		OnExhausted: ExhaustedSuspend,
	}
}

// DefaultTimeout is the attempt timeout of an endpoint that sets none
// (docs/design.md §4); the transports and the engine fall back on it for an
// endpoint made without NewEndpoint.
const DefaultTimeout = 30 * time.Second

// NewEndpoint returns an endpoint with the defaults of docs/design.md §4: a 30 s
// timeout, 16 attempts at once, the default timeout_on and suspend_on lists,
// 3 retries before suspension and suspensions of 30 s doubling up to 1 h.
func NewEndpoint(name string, t Transport) *Endpoint {
	return &Endpoint{
		Name:                    name,
		Transport:               t,
		Timeout:                 DefaultTimeout,
		MaxConcurrency:          16,
		TimeoutOn:               []ErrorClass{ClassTimeout, ClassConnectTimeout, ClassConnectionClosed, ClassHTTP5xx},
		SuspendOn:               []ErrorClass{ClassDNS, ClassConnectRefused, ClassTLS, ClassHTTP429},
		RetriesBeforeSuspension: 3,
		Suspension:              Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour},
	}
}
