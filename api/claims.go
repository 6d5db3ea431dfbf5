package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	courier "github.com/courier-gw/courier"
)

// claimParams are the query parameters of a claim-check URL.
var claimParams = []string{courier.ClaimParamEndpoint, courier.ClaimParamExpires, courier.ClaimParamDigest, courier.ClaimParamSig}

// handleClaim serves the payload of a claim-check notice to its receiver:
// GET /v1/claims/{id}, or /v1/claims/{id}/{subscription} for a delivery
// of a published message. It asks for no API key: the URL's signature is
// the authority, and it is checked before anything is looked up, so that a
// URL courier did not make learns nothing, not even whether the message
// exists. A changed or expired URL is refused with 403 (permission_denied:
// the URL grants nothing, or no longer), a message that is gone or no
// longer has the payload the URL was made for is 404. The fetch is
// recorded as an action on the message.
func (s *Server) handleClaim(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	key := courier.DeliveryKey(r.PathValue("id"), r.PathValue("subscription"))
	c, sig, err := courier.ParseClaim(key, r.URL.Query().Get)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	secret, err := s.opts.Store.Secret(ctx, courier.ClaimSecretName)
	if err != nil {
		s.writeError(w, r, fmt.Errorf("read the key that signs claim-check URLs: %w", err))
		return
	}
	if err := courier.VerifyClaim(secret, c, sig, s.opts.Clock.Now()); err != nil {
		s.writeError(w, r, err)
		return
	}
	m, err := s.opts.Store.Message(ctx, key)
	if courier.ErrorCode(err) == courier.CodeNotFound {
		err = courier.Errorf(courier.CodeNotFound, "message %s is gone: the retention purge took it", key)
	}
	if err == nil && m.Erased != nil {
		err = courier.ErasedError(m) // 410: erased on request, not served
	}
	if err == nil && m.PayloadSHA256() != c.Digest {
		// Purged and stored again under its id, with other content.
		err = courier.Errorf(courier.CodeNotFound, "message %s no longer has the payload this URL was made for", key)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	n, size, err := s.servePayload(w, r, m)
	if err != nil && n == 0 && size == 0 {
		if courier.ErrorCode(err) == courier.CodeNotFound {
			err = courier.Errorf(courier.CodeNotFound, "the payload of message %s is gone", key)
		}
		s.writeError(w, r, err)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	detail := fmt.Sprintf("%d bytes to %s", n, remoteHost(r))
	if err != nil || n != size {
		detail = fmt.Sprintf("cut off after %d of %d bytes to %s", n, size, remoteHost(r))
		s.opts.Logger.WarnContext(ctx, "a claim-check fetch was cut off", "message", key, "endpoint", c.Endpoint,
			"sent", n, "size", size, "err", err)
	}
	// Recorded whether or not the caller stayed to the end.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	a := courier.Action{At: s.opts.Clock.Now(), Who: "endpoint:" + c.Endpoint, Kind: courier.ActionClaimFetched, Subject: key, Detail: detail}
	if err := s.opts.Store.RecordAction(rctx, a); err != nil {
		s.opts.Logger.ErrorContext(ctx, "could not record a claim-check fetch", "message", key, "endpoint", c.Endpoint, "err", err)
	}
}

// remoteHost is the address a request came from, without its port.
func remoteHost(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}
