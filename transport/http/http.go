// Package http delivers messages to HTTP endpoints as docs/design.md §8 describes:
// one request per attempt, signed per the Standard Webhooks spec, with every
// failure mapped onto exactly one of courier's error classes (docs/design.md §3). A
// payload kept as a blob streams from the store with each request.
//
// The package is named after what it speaks; callers import it under an
// alias (httptransport "github.com/courier-gw/courier/transport/http").
package http

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sendopts"
	"github.com/courier-gw/courier/tracing"
	"github.com/valyala/fasthttp"
)

// Defaults of Options.
const (
	DefaultUserAgent       = "courier/1"
	DefaultTimeout         = sendopts.DefaultTimeout        // the attempt timeout of an endpoint that sets none
	DefaultConnectTimeout  = sendopts.DefaultConnectTimeout // the most a connect and TLS handshake may take
	DefaultIdleConnTimeout = 60 * time.Second
	DefaultMaxDrain        = 64 << 10 // bytes read past the excerpt so a connection can be reused
	DefaultMaxLookupPools  = 4096     // pools of resolved endpoints kept at once
	DefaultMaxConns        = 512      // connections open at once where the open-file limit is unknown
)

// maxResponseHead bounds a response's status line and header.
const maxResponseHead = 16 << 10

// maxRedirects bounds the redirects followed by an endpoint that allows them.
const maxRedirects = 10

// staleRetries bounds how often one attempt is resent after a kept-alive
// connection turned out to be closed by the receiver.
const staleRetries = 1

// Options configure a Transport. Every field has a default.
type Options struct {
	Logger    *slog.Logger
	UserAgent string        // sent unless the message sets its own User-Agent
	Clock     courier.Clock // gives webhook-timestamp and the "now" of Retry-After dates

	// DefaultTimeout is the attempt timeout of an endpoint whose Timeout is
	// zero; ConnectTimeout caps the time for the TCP connect and TLS
	// handshake, which also never exceeds the attempt timeout.
	DefaultTimeout time.Duration
	ConnectTimeout time.Duration

	// IdleConnTimeout is how long a kept-alive connection may stay idle.
	// An endpoint holds as many connections as attempts run on it at once
	// (the engine bounds them by its max_concurrency).
	IdleConnTimeout time.Duration

	// MaxDrain bounds the response bytes read (and thrown away) after the
	// excerpt so the connection can serve the next attempt; a longer body
	// costs the connection instead.
	MaxDrain int64

	// Resolver looks up host names; nil uses the system's.
	Resolver *net.Resolver
	// TLSConfig is the base of every endpoint's TLS settings (private root
	// CAs, client certificates); nil uses the system roots. An endpoint's
	// own tls files take precedence.
	TLSConfig *tls.Config

	// AllowNetworks are the blocked networks (loopback, private,
	// link-local, ...) that every endpoint may reach nonetheless: the
	// global outbound.allow_networks. An endpoint adds its own.
	AllowNetworks []netip.Prefix

	// MaxLookupPools bounds the connection pools kept for resolved
	// endpoints ("lookup:<url>"), which come from a registry rather than
	// the configuration and so are not bounded by it: past the bound, the
	// least recently used pool goes.
	MaxLookupPools int

	// MaxConns bounds the connections open at once across all pools: each
	// pool keeps its idle connections until IdleConnTimeout, so thousands
	// of endpoints on as many receivers would otherwise run the process
	// out of file descriptors. A dial that would pass the bound first
	// closes the idle connections of the least recently used other pools;
	// when none is idle it goes ahead all the same (the engine bounds the
	// attempts in flight), so the bound is on what is kept, never a wait
	// or a refusal. The default is half the process's soft open-file
	// limit, at most 4096, or DefaultMaxConns where the limit is unknown.
	MaxConns int
}

// withDefaults returns o with every unset field set.
func (o Options) withDefaults() Options {
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	sendopts.Common{Logger: &o.Logger, Clock: &o.Clock, DefaultTimeout: &o.DefaultTimeout, ConnectTimeout: &o.ConnectTimeout}.SetDefaults()
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if o.MaxDrain <= 0 {
		o.MaxDrain = DefaultMaxDrain
	}
	if o.TLSConfig == nil {
		o.TLSConfig = &tls.Config{}
	}
	if o.MaxLookupPools <= 0 {
		o.MaxLookupPools = DefaultMaxLookupPools
	}
	if o.MaxConns <= 0 {
		o.MaxConns = defaultMaxConns()
	}
	return o
}

// Transport sends deliveries to HTTP endpoints. It keeps a connection pool
// per origin and settings (clientKey), shared by the endpoints that have
// them alike, so that attempts reuse kept-alive connections and a thousand
// endpoints on one receiver hold the connections their attempts need, not
// a thousand pools' worth. The pools together keep at most MaxConns
// connections open, closing the idle ones of the least recently used to
// make room. It is safe for concurrent use.
type Transport struct {
	opts Options
	log  *slog.Logger

	mu        sync.Mutex
	endpoints map[string]*binding   // by endpoint name
	pools     map[clientKey]*client // by settings, shared
	lookups   *list.List            // names of the resolved endpoints in endpoints, most recently used first
	allow     []netip.Prefix        // the global allowlist in force
	allowGen  uint64                // counts the changes of allow
	recent    *list.List            // pools that may hold connections, most recently used first

	open atomic.Int64 // connections of all pools open or being opened

	tokenMu sync.Mutex
	tokens  map[tokenKey]*tokenSource // OAuth2 tokens, by credentials (oauth2.go)
	// What every endpoint shares and a change of configuration or of the
	// store replaces: the keys that sign v1a (sign_ed25519.go) and the
	// default outbound proxy (proxy.go).
	signing atomic.Pointer[[]SigningKey]
	proxy   atomic.Pointer[proxyURL]
}

var _ courier.Sender = (*Transport)(nil)

// New returns a Transport with o's unset fields at their defaults.
func New(o Options) *Transport {
	o = o.withDefaults()
	return &Transport{opts: o, log: o.Logger, endpoints: map[string]*binding{}, pools: map[clientKey]*client{},
		lookups: list.New(), allow: o.AllowNetworks, recent: list.New()}
}

// attempt makes one attempt to deliver d.Message to d.Endpoint, with token
// as the OAuth2 access token of an endpoint that has one. It never
// returns an error: every failure is a Result with a class. The endpoint's
// timeout bounds the attempt, and so does ctx's deadline; a ctx canceled
// before the request goes out stops it, but one under way runs to its
// outcome or its timeout, so that what the receiver did is known.
func (t *Transport) attempt(ctx context.Context, d courier.Delivery, token string) courier.Result {
	if fail := sendopts.Unsendable(d); fail != nil {
		return *fail
	}
	e := d.Endpoint
	timeout := sendopts.Timeout(e, t.opts.DefaultTimeout)
	// An endpoint sent to before with the same settings has its URL parsed
	// and its pool found already.
	b, known := t.boundFor(e, timeout)
	target := b.target
	if !known {
		var err error
		target, err = url.Parse(settingsOf(e).URL)
		if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
			return courier.Result{Class: courier.ClassTransport,
				Error: fmt.Sprintf("endpoint %s: %q is not an absolute http or https URL", e.Name, settingsOf(e).URL)}
		}
	}
	method := strings.ToUpper(settingsOf(e).Method)
	if method == "" {
		method = http.MethodPost
	}
	if settingsOf(e).PinnedCertificate != "" && target.Scheme != "https" {
		// Plain HTTP shows no certificate: sending would skip the very
		// check the registry asked for.
		return courier.Result{Class: courier.ClassTLS,
			Error: fmt.Sprintf("endpoint %s: the registry gave a certificate to pin, but %s is not https", e.Name, redactURL(target))}
	}
	// The earlier steps' answers go both into the envelope and into the
	// headers; each is made JSON once.
	var steps stepResponses
	if d.Step != nil {
		steps = responses(d.Step)
	}
	body, fail := requestBody(ctx, d, steps, timeout)
	if fail != nil {
		return *fail
	}
	now := t.opts.Clock.Now()
	header, fail := t.header(d, body, steps, now)
	if fail != nil {
		return *fail
	}
	if tp := tracing.TraceParent(ctx); tp != "" {
		header = withTraceParent(header, tp)
	}
	header = withCredentials(header, settingsOf(e), token)
	// A step's answer is kept for the later steps of its workflow; other
	// deliveries read no more than the excerpt and the drain.
	keep := 0
	if d.Step != nil {
		keep = courier.MaxStepResponse
	}

	if !known {
		var err error
		if b, err = t.clientFor(e, target, timeout); err != nil {
			return courier.Result{Class: courier.ClassTLS, Error: fmt.Sprintf("endpoint %s: %v", e.Name, err)}
		}
	}
	c, uri := b.c, b.uri
	if ctx.Err() != nil {
		return courier.Result{Class: courier.ClassTransport, Error: "attempt canceled before the request went out"}
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}

	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	resp := fasthttp.AcquireResponse()
	defer fasthttp.ReleaseResponse(resp)
	for hops := 0; ; hops++ {
		err := c.do(req, resp, method, uri, header, body, deadline)
		if err != nil {
			if perr, ok := asPayloadError(err); ok {
				return payloadResult(perr)
			}
			class, msg := classify(err, attemptState{host: target.Host, timeout: timeout})
			return courier.Result{Class: class, Error: msg}
		}
		next, ok := redirectTarget(resp, target)
		if ok && settingsOf(e).FollowRedirects {
			if hops == maxRedirects {
				res := t.result(resp, timeout, target.Host, keep)
				res.Class = courier.ClassProtocol
				res.Error = fmt.Sprintf("stopped after %d redirects", maxRedirects)
				return res
			}
			if target.Scheme == "https" && next.Scheme == "http" {
				res := t.result(resp, timeout, target.Host, keep)
				res.Class = courier.ClassProtocol
				res.Error = fmt.Sprintf("redirect from https to %s refused", redactURL(next))
				return res
			}
			t.discard(resp)
			if resp.StatusCode() == http.StatusSeeOther {
				// 303 says the request was taken and the answer is elsewhere:
				// fetch it as RFC 9110 asks.
				method, body = http.MethodGet, bodySource{}
			}
			if next.Host != target.Host {
				header = withoutSecretHeaders(crossOriginHeader(header), settingsOf(e))
			}
			target, uri = next, next.String()
			req.Reset()
			continue
		}
		return t.result(resp, timeout, target.Host, keep)
	}
}

// errNoConnection is the error of a request whose attempt's time ran out
// before it had a connection, as a redirect hop that starts too late.
var errNoConnection = errors.New("no connection before the deadline")

// do sends one request and reads the response's head; its body is left to
// stream. When a kept-alive connection turns out to be closed by the
// receiver before any answer came, it sends again on another connection:
// the receiver most likely closed it as the request went out and never saw
// it, and webhook-id lets it drop a duplicate if it did. A connection that
// was retired (see roundTripper) carried nothing, so the request goes again
// without counting that as a retry. A blob body is opened anew for every
// try, and a failure to read it is a *payloadError.
func (c *client) do(req *fasthttp.Request, resp *fasthttp.Response, method, uri string, h []headerField, body bodySource, deadline time.Time) error {
	c.build(req, method, uri, h, body.inline)
	for stale := 0; ; {
		var blob *blobReader
		if body.blob != nil {
			var err error
			if blob, err = body.blob.open(deadline); err != nil {
				return err
			}
			// The request closes the blob once written, or when it is
			// reset or released unwritten.
			req.SetBodyStream(blob, body.blob.size)
		}
		start := time.Now()
		// Reset, so that a response without a local address says the try
		// had no connection: the client gives up before dialling once the
		// deadline has passed.
		resp.Reset()
		err := c.fast.DoDeadline(req, resp, deadline)
		if err == nil {
			return nil
		}
		if blob != nil && blob.Err() != nil {
			return &payloadError{err: blob.Err()}
		}
		st := stateOf(resp.LocalAddr())
		switch {
		case st == nil && errors.Is(err, fasthttp.ErrTimeout):
			return errNoConnection
		case st == nil:
			return err
		case st.isRetired():
			continue
		}
		if closedEarly(err) {
			if rerr := st.lastReadErr(); rerr != nil && !errors.Is(rerr, io.EOF) {
				err = rerr // what the connection really met
			}
		}
		if stale == staleRetries || !closedEarly(err) || !st.openedAt.Before(start) {
			return err
		}
		stale++
	}
}

// build writes the request. The header goes in the order header gave it.
func (c *client) build(req *fasthttp.Request, method, uri string, h []headerField, body []byte) {
	req.Header.DisableNormalizing()
	req.SetRequestURI(uri)
	req.Header.SetMethod(method)
	for _, f := range h {
		req.Header.Add(f.name, f.value)
	}
	if body != nil {
		req.SetBodyRaw(body)
	}
}

// result reads the start of the response, closes it and turns the status
// into a Result. Of a 2xx it keeps the first keep bytes in Result.Body.
func (t *Transport) result(resp *fasthttp.Response, timeout time.Duration, host string, keep int) courier.Result {
	code := resp.StatusCode()
	if code < 200 || code > 599 {
		// A 101 hands over the connection and an unknown status promises
		// nothing about a body: neither is read, and roundTripper retired
		// the connection.
		resp.CloseBodyStream()
		return courier.Result{Class: courier.ClassProtocol, Status: code, Error: fmt.Sprintf("unexpected HTTP status %d", code)}
	}
	ok := code >= 200 && code <= 299
	if !ok {
		keep = 0
	}
	excerpt, kept, bodyErr := readBody(bodyOf(resp), string(resp.Header.ContentType()), keep, t.opts.MaxDrain)
	resp.CloseBodyStream()
	if bodyErr != nil && resp.Header.ContentLength() == -1 && !closedEarly(bodyErr) && !isTimeout(bodyErr) {
		bodyErr = fmt.Errorf("bad chunked body: %w", bodyErr)
	}

	res := courier.Result{Status: code, Response: excerpt}
	switch {
	case ok:
		if bodyErr != nil {
			// A 2xx whose body broke off is no complete answer: the
			// message goes again and the receiver deduplicates.
			res.Class, res.Error = classify(bodyErr, attemptState{host: host, timeout: timeout, answerStarted: true})
			return res
		}
		res.Body = string(kept)
		return res
	case code >= 300 && code <= 399:
		res.Class = courier.ClassProtocol
		if loc := string(resp.Header.Peek("Location")); loc != "" {
			shown := clip(loc, 200)
			if u, err := url.Parse(loc); err == nil {
				shown = clip(redactURL(u), 200)
			}
			res.Error = fmt.Sprintf("redirect to %s not followed", shown)
		} else {
			res.Error = fmt.Sprintf("HTTP %d %s without a Location", code, http.StatusText(code))
		}
		return res
	case code == http.StatusTooManyRequests:
		res.Class = courier.ClassHTTP429
	case code >= 500 && code <= 599:
		res.Class = courier.ClassHTTP5xx
	default:
		res.Class = courier.ClassHTTP4xx
	}
	res.Error = statusSentence(code)
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		if d, ok := ParseRetryAfter(string(resp.Header.Peek("Retry-After")), t.opts.Clock.Now()); ok {
			res.RetryAfter = d
		}
	}
	if bodyErr != nil {
		// The status is the receiver's word and decides the class; the
		// broken body is worth saying but changes nothing.
		res.Error += " (the response body broke off)"
	}
	return res
}

// bodyOf is the response body as it streams in; a body fasthttp read
// whole (or none) is read from memory. Closing the stream before its end,
// as after an error or past the drain, closes the connection too: only a
// body read to its end leaves it for the next attempt.
func bodyOf(resp *fasthttp.Response) io.Reader {
	if r := resp.BodyStream(); r != nil {
		return r
	}
	return bytes.NewReader(resp.Body())
}

// discard reads a little of a response that is not kept, so its connection
// can go back to the pool, and closes it.
func (t *Transport) discard(resp *fasthttp.Response) {
	io.CopyN(io.Discard, bodyOf(resp), t.opts.MaxDrain)
	resp.CloseBodyStream()
}

// statusSentence says an HTTP status for people: "HTTP 503 Service Unavailable".
func statusSentence(code int) string {
	if txt := http.StatusText(code); txt != "" {
		return fmt.Sprintf("HTTP %d %s", code, txt)
	}
	return fmt.Sprintf("HTTP %d", code)
}

// redactURL writes u for an attempt's error without what may be a
// credential: the password and the query's values (tokens travel there).
func redactURL(u *url.URL) string { return courier.RedactURL(u.String()) }

// redirectTarget returns where a 3xx response points, resolved against the
// request's URL.
func redirectTarget(resp *fasthttp.Response, base *url.URL) (*url.URL, bool) {
	switch resp.StatusCode() {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil, false
	}
	loc := string(resp.Header.Peek("Location"))
	if loc == "" {
		return nil, false
	}
	next, err := base.Parse(loc)
	if err != nil || (next.Scheme != "http" && next.Scheme != "https") || next.Host == "" {
		return nil, false
	}
	return next, true
}

// crossOriginHeader returns h without the credentials that must not follow
// a redirect to another host.
func crossOriginHeader(h []headerField) []headerField {
	return slices.DeleteFunc(slices.Clone(h), func(f headerField) bool {
		return f.name == "Authorization" || f.name == "Proxy-Authorization" || f.name == "Cookie"
	})
}
