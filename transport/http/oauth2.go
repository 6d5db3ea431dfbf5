package http

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sendopts"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// maxRefreshAhead is how long before its expiry a token is replaced, at
// most: a token is renewed when less than this, or half its lifetime, is
// left, so that no attempt goes out with a token about to expire on the
// way.
const maxRefreshAhead = time.Minute

// failureHold is how long a failure to obtain a token answers for the
// attempts that need one, before the token endpoint is asked again: when
// it is down, the attempts waiting for it fail at once rather than each
// asking it in turn.
const failureHold = time.Second

// Send makes one attempt to deliver d.Message to d.Endpoint (see attempt).
// An endpoint with OAuth2 client credentials first gets its token, kept
// from one attempt to the next until it nears its expiry; a token that
// cannot be obtained fails the attempt with class auth, before anything
// reaches the receiver. When the receiver answers 401, the token may have
// been revoked or the key that signed it rotated: the attempt gets a new
// token once and sends once more, and what that gets is its outcome.
func (t *Transport) Send(ctx context.Context, d courier.Delivery) courier.Result {
	if d.Message == nil || d.Endpoint == nil || settingsOf(d.Endpoint).Auth.OAuth2 == nil {
		return t.attempt(ctx, d, "")
	}
	timeout := sendopts.Timeout(d.Endpoint, t.opts.DefaultTimeout)
	src := t.tokenSource(d.Endpoint)
	tok, fail := src.get(ctx, timeout)
	if fail != nil {
		return *fail
	}
	res := t.attempt(ctx, d, tok)
	if res.Status != http.StatusUnauthorized {
		return res
	}
	src.drop(tok)
	if tok, fail = src.get(ctx, timeout); fail != nil {
		return *fail
	}
	t.log.Debug("http transport: 401 with an OAuth2 token; sending again with a new one", "endpoint", d.Endpoint.Name)
	res = t.attempt(ctx, d, tok)
	if res.Status == http.StatusUnauthorized {
		res.Error += " (with a newly obtained OAuth2 token too)"
	}
	return res
}

// AuthState tells how e authenticates and, for OAuth2, what this node
// knows of its token: they are obtained and kept per node.
func (t *Transport) AuthState(e *courier.Endpoint) courier.AuthState {
	s, ok := e.Settings.(*Settings)
	if !ok {
		return courier.AuthState{}
	}
	st := courier.AuthState{Kind: s.Auth.Kind()}
	if s.Auth.OAuth2 == nil {
		return st
	}
	t.tokenMu.Lock()
	src := t.tokens[keyOf(s.Auth.OAuth2)]
	t.tokenMu.Unlock()
	if src != nil {
		src.mu.Lock()
		if src.access != "" {
			st.TokenExpiry = src.expiry
		}
		st.LastFailure, st.LastError = src.failedAt, src.failure
		src.mu.Unlock()
	}
	return st
}

// tokenKey are the credentials a token is obtained with: endpoints that
// share them (the endpoints a lookup route resolves, with its template's)
// share the token.
type tokenKey struct {
	tokenURL, clientID, clientSecret, scopes, audience string
}

func keyOf(o *OAuth2) tokenKey {
	return tokenKey{tokenURL: o.TokenURL, clientID: o.ClientID, clientSecret: o.ClientSecret,
		scopes: strings.Join(o.Scopes, " "), audience: o.Audience}
}

// tokenSource obtains and keeps the token of one set of client
// credentials. One fetch runs at a time; the attempts that need a token
// meanwhile wait for it rather than asking the token endpoint each.
type tokenSource struct {
	cfg    clientcredentials.Config
	clock  courier.Clock
	mu     sync.Mutex // held during a fetch
	allow  string     // the networks client may reach, as built
	client *http.Client

	access   string
	expiry   time.Time // zero: the token server gave no lifetime
	ahead    time.Duration
	failedAt time.Time
	failure  string
	failing  bool // the last fetch failed
}

// tokenSource returns the token source of e's credentials, made on first
// use, its client rebuilt when the networks it may reach changed.
func (t *Transport) tokenSource(e *courier.Endpoint) *tokenSource {
	o := settingsOf(e).Auth.OAuth2
	t.mu.Lock()
	allow := append(slices.Clone(t.allow), parseNetworks(settingsOf(e).AllowNetworks)...)
	t.mu.Unlock()
	names := make([]string, len(allow))
	for i, p := range allow {
		names[i] = p.String()
	}
	allowKey := strings.Join(names, ",")

	t.tokenMu.Lock()
	defer t.tokenMu.Unlock()
	if t.tokens == nil {
		t.tokens = map[tokenKey]*tokenSource{}
	}
	key := keyOf(o)
	src := t.tokens[key]
	if src == nil {
		src = &tokenSource{clock: t.opts.Clock, cfg: clientcredentials.Config{ClientID: o.ClientID, ClientSecret: o.ClientSecret,
			TokenURL: o.TokenURL, Scopes: o.Scopes}}
		if o.Audience != "" {
			src.cfg.EndpointParams = url.Values{"audience": {o.Audience}}
		}
		t.tokens[key] = src
	}
	src.mu.Lock()
	if src.client == nil || src.allow != allowKey {
		src.allow, src.client = allowKey, t.tokenClient(allow)
	}
	src.mu.Unlock()
	return src
}

// tokenClient is the client that asks a token endpoint: through the SSRF
// guard, as every connection of an endpoint, and without any proxy of the
// environment.
func (t *Transport) tokenClient(allow []netip.Prefix) *http.Client {
	d := &net.Dialer{Resolver: t.opts.Resolver, Timeout: t.opts.ConnectTimeout, Control: guard{allow: allow}.check}
	return &http.Client{Transport: &http.Transport{
		DialContext:         d.DialContext,
		TLSClientConfig:     t.opts.TLSConfig.Clone(),
		TLSHandshakeTimeout: t.opts.ConnectTimeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     t.opts.IdleConnTimeout,
		ForceAttemptHTTP2:   true,
	}}
}

// get returns the token, obtaining a new one when none is kept or the kept
// one nears its expiry; a failure is the attempt's Result, class auth.
func (s *tokenSource) get(ctx context.Context, timeout time.Duration) (string, *courier.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	if s.access != "" && (s.expiry.IsZero() || now.Before(s.expiry.Add(-s.ahead))) {
		return s.access, nil
	}
	if s.failing && now.Sub(s.failedAt) < failureHold {
		return "", &courier.Result{Class: courier.ClassAuth, Error: "could not obtain an OAuth2 token: " + s.failure}
	}
	fctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, s.client), timeout)
	defer cancel()
	tok, err := s.cfg.Token(fctx)
	if err == nil && tok.AccessToken == "" {
		err = errors.New("the answer holds no access_token")
	}
	if err != nil {
		s.access = ""
		s.failedAt, s.failure, s.failing = now, s.problem(err), true
		return "", &courier.Result{Class: courier.ClassAuth, Error: "could not obtain an OAuth2 token: " + s.failure}
	}
	s.access, s.expiry, s.ahead, s.failing = tok.AccessToken, time.Time{}, 0, false
	if !tok.Expiry.IsZero() {
		// The library dates the expiry by the wall clock; it is kept by
		// the transport's, which decides when to renew.
		life := time.Until(tok.Expiry)
		s.expiry = now.Add(life)
		s.ahead = min(maxRefreshAhead, life/2)
	}
	return s.access, nil
}

// drop forgets the token used, unless another attempt replaced it
// already: a 401 to it says it is no longer good.
func (s *tokenSource) drop(used string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.access == used {
		s.access = ""
	}
}

// problem says why a token could not be obtained, without the client's
// secret and with the token URL redacted as any URL is.
func (s *tokenSource) problem(err error) string {
	where := "token endpoint " + courier.RedactURL(s.cfg.TokenURL)
	var msg string
	var re *oauth2.RetrieveError
	var ue *url.Error
	switch {
	case errors.As(err, &re):
		msg = fmt.Sprintf("%s answered %s", where, statusSentence(re.Response.StatusCode))
		if re.ErrorCode != "" {
			msg += ": " + re.ErrorCode
			if re.ErrorDescription != "" {
				msg += " (" + re.ErrorDescription + ")"
			}
		} else if body := strings.TrimSpace(string(re.Body)); body != "" {
			msg += ": " + body
		}
	case errors.As(err, &ue):
		msg = where + ": " + ue.Err.Error()
	default:
		msg = where + ": " + err.Error()
	}
	if s.cfg.ClientSecret != "" {
		msg = strings.ReplaceAll(msg, s.cfg.ClientSecret, courier.Redacted)
	}
	return clip(strings.Join(strings.Fields(msg), " "), 300)
}
