package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"net/http"
	"net/url"
	"time"

	courier "github.com/courier-gw/courier"
)

// LookupAnswer is the body of GET /v1/lookup: what courier resolves for a
// recipient on a lookup route, and why.
type LookupAnswer struct {
	Route     string `json:"route"`
	Recipient string `json:"recipient"`
	Type      string `json:"type"`
	// Registry is the URL asked, query values hidden.
	Registry string `json:"registry"`
	// Cached tells whether the answer came from the cache (else the
	// registry was asked now); CachedUntil is when it will be asked again.
	Cached      bool      `json:"cached"`
	CachedUntil time.Time `json:"cached_until,omitzero"`
	// NotRegistered is set when the registry does not know the recipient
	// for the type; Error when the registry could not be asked.
	NotRegistered bool   `json:"not_registered,omitempty"`
	Error         string `json:"error,omitempty"`
	// URL, CertificateSHA256 and ExpiresAt are the resolution.
	URL               string    `json:"url,omitempty"`
	CertificateSHA256 string    `json:"certificate_sha256,omitempty"`
	ExpiresAt         time.Time `json:"expires_at,omitzero"`
	// Endpoint is the resolved endpoint, with its health.
	Endpoint *Endpoint `json:"endpoint,omitempty"`
}

// handleLookup resolves a recipient as an attempt would, through the
// resolver's cache, on a lookup route of the request's tenant (the
// resolver keeps its answers by qualified route, so one tenant's are never
// another's).
func (s *Server) handleLookup(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sc := scopeOf(r)
	route, recipient, typ := sc.name(q.Get("route")), q.Get("recipient"), q.Get("type")
	t := s.topology.Load()
	rt := t.Routes[route]
	switch {
	case rt == nil || !sc.owns(route):
		s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "route %q is not configured", sc.showName(route)))
		return
	case rt.Lookup == nil:
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "route %q does not look up its endpoints", sc.showName(route)))
		return
	case !courier.ValidRecipient(recipient):
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "recipient %q is not valid", recipient))
		return
	case !courier.ValidType(typ):
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "type %q is not valid", typ))
		return
	case s.opts.Resolver == nil:
		s.writeError(w, r, courier.Errorf(courier.CodeNotConfigured, "this server has no registry client"))
		return
	}
	a := LookupAnswer{Route: sc.showName(route), Recipient: recipient, Type: typ, Registry: courier.RedactURL(rt.Lookup.LookupURL(recipient, typ))}
	if c, ok := s.opts.Resolver.(courier.LookupCache); ok {
		a.Cached, a.CachedUntil, _ = c.Cached(rt, recipient, typ)
	}
	res, err := s.opts.Resolver.Resolve(r.Context(), rt, recipient, typ)
	switch {
	case errors.Is(err, courier.ErrNotRegistered):
		a.NotRegistered, a.Error = true, err.Error()
	case err != nil:
		a.Error = sc.showText(err.Error())
	default:
		a.URL, a.ExpiresAt = courier.RedactURL(res.URL), res.ExpiresAt
		if b, _ := pem.Decode([]byte(res.Certificate)); b != nil {
			sum := sha256.Sum256(b.Bytes)
			a.CertificateSHA256 = hex.EncodeToString(sum[:])
		}
		if c, ok := s.opts.Resolver.(courier.LookupCache); ok && !a.Cached {
			_, a.CachedUntil, _ = c.Cached(rt, recipient, typ)
		}
		ep := courier.ResolvedEndpoint(rt, res)
		health, err := s.healthOf(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		v, err := s.endpointView(r.Context(), t, ep, health[ep.Name])
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if !sc.system && len(t.Tenants) > 0 {
			// A resolved endpoint is the receiver's, shared by every
			// tenant that resolves to it: a tenant sees its health, not
			// this node's attempts on it, which count other tenants'.
			v.InFlight, v.LastHour, v.ConcurrencyLimit = 0, map[string]int{}, 0
		}
		sc.showEndpoint(&v)
		a.Endpoint = &v
	}
	writeJSON(w, http.StatusOK, a)
}

// Lookup asks the server what it resolves for a recipient on a lookup
// route.
func (c *Client) Lookup(ctx context.Context, route, recipient, msgType string) (*LookupAnswer, error) {
	q := url.Values{"route": {route}, "recipient": {recipient}, "type": {msgType}}
	return request[LookupAnswer](ctx, c, http.MethodGet, "/v1/lookup?"+q.Encode(), nil)
}
