package api

import (
	"context"
	"net/http"
	"net/url"

	"github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// SigningKeys are courier's ed25519 keys that sign the v1a requests of
// http endpoints (topology.Keeper holds them).
type SigningKeys interface {
	// SigningKeys returns the keys in force, oldest first.
	SigningKeys() []httptransport.SigningKey
	// RotateSigningKey makes a new key, which signs beside the others
	// until they are retired.
	RotateSigningKey(ctx context.Context, who string) (httptransport.SigningKey, error)
	// RetireSigningKey removes a key: it signs no more.
	RetireSigningKey(ctx context.Context, who, id string) error
}

// SigningKeySet is the answer of GET /v1/signing-keys: the public halves
// of courier's signing keys, as a JSON Web Key Set (RFC 7517), oldest
// first. During a rotation it has both keys.
type SigningKeySet struct {
	Keys []httptransport.PublicKey `json:"keys"`
}

// RotatedKey is the answer of POST /v1/signing-keys/rotate: the new key,
// and the set it is now part of.
type RotatedKey struct {
	Key  httptransport.PublicKey   `json:"key"`
	Keys []httptransport.PublicKey `json:"keys"`
}

func (s *Server) signingKeySet() SigningKeySet {
	out := SigningKeySet{Keys: []httptransport.PublicKey{}}
	if s.opts.SigningKeys == nil {
		return out
	}
	for _, k := range s.opts.SigningKeys.SigningKeys() {
		out.Keys = append(out.Keys, k.PublicKey())
	}
	return out
}

// handleSigningKeys serves the public keys, to anyone: a receiver fetches
// them to verify v1a signatures, and holds no API key of courier's. It may
// keep them for a few minutes; a signature that no key it holds verifies
// is its cue to fetch them again.
func (s *Server) handleSigningKeys(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "public, max-age=300")
	writeJSON(w, http.StatusOK, s.signingKeySet())
}

func (s *Server) signingKeys() (SigningKeys, error) {
	if s.opts.SigningKeys == nil {
		return nil, courier.Errorf(courier.CodeNotConfigured, "this server keeps no signing keys")
	}
	return s.opts.SigningKeys, nil
}

func (s *Server) handleRotateSigningKey(w http.ResponseWriter, r *http.Request) {
	sk, err := s.signingKeys()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	k, err := sk.RotateSigningKey(r.Context(), actor(r))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.opts.Logger.Info("signing key made", "key", k.ID, "by", actor(r))
	writeJSON(w, http.StatusCreated, RotatedKey{Key: k.PublicKey(), Keys: s.signingKeySet().Keys})
}

func (s *Server) handleRetireSigningKey(w http.ResponseWriter, r *http.Request) {
	sk, err := s.signingKeys()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := sk.RetireSigningKey(r.Context(), actor(r), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.opts.Logger.Info("signing key retired", "key", id, "by", actor(r))
	writeJSON(w, http.StatusOK, s.signingKeySet())
}

// SigningKeys returns the public halves of courier's signing keys.
func (c *Client) SigningKeys(ctx context.Context) (*SigningKeySet, error) {
	return request[SigningKeySet](ctx, c, http.MethodGet, "/v1/signing-keys", nil)
}

// RotateSigningKey makes a new signing key.
func (c *Client) RotateSigningKey(ctx context.Context) (*RotatedKey, error) {
	return request[RotatedKey](ctx, c, http.MethodPost, "/v1/signing-keys/rotate", nil)
}

// RetireSigningKey removes a signing key, and returns the keys left.
func (c *Client) RetireSigningKey(ctx context.Context, id string) (*SigningKeySet, error) {
	return request[SigningKeySet](ctx, c, http.MethodDelete, "/v1/signing-keys/"+url.PathEscape(id), nil)
}
