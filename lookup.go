package courier

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Lookup is how a route finds the endpoint of a message's recipient: a
// registry queried by URL, its answers kept for a while.
type Lookup struct {
	// URL is the registry's address with {recipient} and {type} in it,
	// each replaced by the message's, query-escaped.
	URL     string
	Timeout time.Duration
	// CacheTTL is how long an answer is kept, NegativeTTL how long a
	// "not registered" is.
	CacheTTL    time.Duration
	NegativeTTL time.Duration
}

// RequestTimeout bounds one request to the registry: the lookup's
// timeout, or DefaultLookupTimeout when it has none.
func (l *Lookup) RequestTimeout() time.Duration {
	if l == nil || l.Timeout <= 0 {
		return DefaultLookupTimeout
	}
	return l.Timeout
}

// Defaults of a route's lookup.
const (
	DefaultLookupTimeout     = 10 * time.Second
	DefaultLookupCacheTTL    = 5 * time.Minute
	DefaultLookupNegativeTTL = time.Minute
)

// MaxRecipientLen bounds a recipient, as an id is bounded.
const MaxRecipientLen = 256

// ValidRecipient reports whether s may be a recipient: 1 to 256
// characters, none of them a space or a control character.
func ValidRecipient(s string) bool {
	if s == "" || len(s) > MaxRecipientLen {
		return false
	}
	for _, c := range s {
		if c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// LookupURL is the registry URL that resolves a recipient for a message
// type.
func (l *Lookup) LookupURL(recipient, msgType string) string {
	return strings.NewReplacer("{recipient}", url.QueryEscape(recipient), "{type}", url.QueryEscape(msgType)).Replace(l.URL)
}

// Resolution is what a registry answered for a recipient and a type.
type Resolution struct {
	URL string `json:"url"`
	// Certificate is the PEM certificate the receiver must present; empty
	// when the registry gives none.
	Certificate string    `json:"certificate,omitempty"`
	ExpiresAt   time.Time `json:"expires_at,omitzero"`
}

// ErrNotRegistered is the error of a lookup whose recipient the registry
// does not know for that type: a permanent failure of the message.
var ErrNotRegistered = errors.New("not registered")

// Resolver finds the endpoint of a message's recipient on a lookup route,
// with its own cache. Errors other than ErrNotRegistered mean the registry
// could not be asked or answered nonsense: the message is tried again.
type Resolver interface {
	Resolve(ctx context.Context, r *Route, recipient, msgType string) (Resolution, error)
	// Invalidate forgets the answer for a recipient, after a delivery to
	// it failed: the next attempt asks the registry again.
	Invalidate(r *Route, recipient, msgType string)
}

// ResolvedEndpointPrefix starts the name of every resolved endpoint.
const ResolvedEndpointPrefix = "lookup:"

// ResolvedEndpoint is the endpoint a resolution stands for: the route's
// template with the resolved URL and certificate. It is named after the
// URL, so that every recipient served at one access point shares its
// health and its limits.
func ResolvedEndpoint(r *Route, res Resolution) *Endpoint {
	var e *Endpoint
	if r.EndpointTemplate != nil {
		c := *r.EndpointTemplate
		e = &c
	} else {
		e = NewEndpoint("", TransportHTTP)
	}
	e.Name = ResolvedEndpointPrefix + RedactURL(res.URL)
	e.Transport = TransportHTTP
	if s, ok := e.Settings.(ResolvableSettings); ok {
		e.Settings = s.Resolve(res.URL, res.Certificate)
	}
	return e
}

// ResolvableSettings are the settings of a lookup route's template (an
// http endpoint's): Resolve returns a copy that delivers to url and, when
// certificate is given, trusts that certificate alone; the template is
// left as it is.
type ResolvableSettings interface {
	Settings
	Resolve(url, certificate string) Settings
}

// LookupFailed is the result of an attempt whose recipient could not be
// resolved: not registered is permanent (class rejected); anything else is
// class lookup, retried, and no endpoint's health is touched.
func LookupFailed(recipient, msgType string, err error) Result {
	if errors.Is(err, ErrNotRegistered) {
		return Result{Class: ClassRejected, Error: fmt.Sprintf("recipient %s is not registered for document type %s in the registry", recipient, msgType)}
	}
	return Result{Class: ClassLookup, Error: fmt.Sprintf("could not look up recipient %s: %v", recipient, err)}
}

// LookupStats counts what a Resolver's cache did: answers from the cache,
// requests to the registry, and of those the failed and the not found.
type LookupStats struct {
	Hits, Misses, Failures, NotRegistered int64
}

// LookupCache is a Resolver that can tell what it holds, for people asking
// what courier would resolve (courier lookup).
type LookupCache interface {
	Resolver
	// Cached reports whether an answer for the recipient is kept, until
	// when, and whether that answer is "not registered".
	Cached(r *Route, recipient, msgType string) (cached bool, until time.Time, notRegistered bool)
	Stats() LookupStats
}

// Forgettable reports whether a store may drop the health of an endpoint
// instead of keeping it: a resolved endpoint (there may be thousands) that
// is active with nothing counted is what no record means, and every claim
// round reads every record.
func (h EndpointHealth) Forgettable() bool {
	return strings.HasPrefix(h.Endpoint, ResolvedEndpointPrefix) && h.Clean()
}
