// Package http delivers messages to HTTP endpoints as DESIGN §8 describes:
// one request per attempt, signed per the Standard Webhooks spec, with every
// failure mapped onto exactly one of courier's error classes (DESIGN §3).
//
// The package is named after what it speaks; callers import it under an
// alias (httptransport "github.com/courier-gw/courier/transport/http").
package http

import (
	"bytes"
	"container/list"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	"github.com/courier-gw/courier/internal/certfile"
	"github.com/valyala/fasthttp"
)

// Defaults of Options.
const (
	DefaultUserAgent       = "courier/1"
	DefaultTimeout         = 30 * time.Second // the attempt timeout of an endpoint that sets none
	DefaultConnectTimeout  = 10 * time.Second // the most a connect and TLS handshake may take
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
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.UserAgent == "" {
		o.UserAgent = DefaultUserAgent
	}
	if o.Clock == nil {
		o.Clock = courier.SystemClock{}
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
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
	recent    *list.List            // pools that may hold connections, most recently used first

	open atomic.Int64 // connections of all pools open or being opened
}

// binding is the pool an endpoint uses, for as long as the settings in its
// key stay the same.
type binding struct {
	key    clientKey
	c      *client
	lookup *list.Element // the place of a resolved endpoint in Transport.lookups; nil for others
}

var _ courier.Sender = (*Transport)(nil)

// New returns a Transport with o's unset fields at their defaults.
func New(o Options) *Transport {
	o = o.withDefaults()
	return &Transport{opts: o, log: o.Logger, endpoints: map[string]*binding{}, pools: map[clientKey]*client{},
		lookups: list.New(), allow: o.AllowNetworks, recent: list.New()}
}

// SetAllowNetworks replaces the global allowlist, as on reload; the pools
// of endpoints are rebuilt at their next attempt.
func (t *Transport) SetAllowNetworks(allow []netip.Prefix) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.allow = slices.Clone(allow)
}

// Close drops every idle connection. Attempts still running finish; the
// Transport stays usable, so Close fits both shutdown and tests.
func (t *Transport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for key, c := range t.pools {
		c.fast.CloseIdleConnections()
		c.users, c.recent = 0, nil
		delete(t.pools, key)
	}
	clear(t.endpoints)
	t.lookups.Init()
	t.recent.Init()
}

// client is one connection pool, and how many endpoints use it.
type client struct {
	key    clientKey
	fast   *fasthttp.Client
	users  int           // t.mu held
	recent *list.Element // its place in Transport.recent, t.mu held; nil when out of it

	open  atomic.Int64  // its connections open or being opened
	total *atomic.Int64 // Transport.open
}

// clientKey is what of an endpoint's settings shapes its pool: endpoints
// alike in all of it share one, and a reloaded endpoint that changes any of
// it gets another.
type clientKey struct {
	origin         string // scheme://host:port of the endpoint URL
	connectTimeout time.Duration
	allow          string // the networks the guard lets through, comma-separated
	tls            courier.HTTPTLS
	// pin is the PEM certificate the receiver must present: a registry
	// that gives another for the same URL must not find the connections
	// it verified.
	pin string
}

// clientFor returns the pool of e, building it on first use or when the
// endpoint's settings changed.
func (t *Transport) clientFor(e *courier.Endpoint, u *url.URL, timeout time.Duration) (*client, error) {
	key := clientKey{
		origin:         u.Scheme + "://" + u.Host,
		connectTimeout: min(t.opts.ConnectTimeout, timeout),
		tls:            e.HTTP.TLS,
		pin:            e.HTTP.PinnedCertificate,
	}

	t.mu.Lock()
	defer t.mu.Unlock()
	allow := append(slices.Clone(t.allow), parseNetworks(e.HTTP.AllowNetworks)...)
	names := make([]string, len(allow))
	for i, p := range allow {
		names[i] = p.String()
	}
	key.allow = strings.Join(names, ",")
	b := t.endpoints[e.Name]
	if b != nil && b.key == key {
		if b.lookup != nil {
			t.lookups.MoveToFront(b.lookup)
		}
		t.touch(b.c)
		return b.c, nil
	}
	c := t.pools[key]
	if c == nil {
		tlsConfig, err := t.endpointTLS(e.HTTP.TLS, e.HTTP.PinnedCertificate)
		if err != nil {
			return nil, err
		}
		c = t.newClient(key, allow, tlsConfig)
		t.pools[key] = c
		t.log.Debug("http transport: new connection pool", "endpoint", e.Name, "origin", key.origin,
			"connect_timeout", key.connectTimeout, "allow_networks", key.allow)
	}
	if b != nil {
		t.drop(e.Name, b)
	}
	c.users++
	t.touch(c)
	b = &binding{key: key, c: c}
	t.endpoints[e.Name] = b
	if strings.HasPrefix(e.Name, courier.ResolvedEndpointPrefix) {
		b.lookup = t.lookups.PushFront(e.Name)
		if t.lookups.Len() > t.opts.MaxLookupPools {
			last := t.lookups.Back().Value.(string)
			t.drop(last, t.endpoints[last])
		}
	}
	return c, nil
}

// drop forgets which pool an endpoint uses, t.mu held; a pool that no
// endpoint uses any more goes. In-flight attempts keep their connections;
// the idle ones go now and the rest lapse after IdleConnTimeout.
func (t *Transport) drop(name string, b *binding) {
	if b.lookup != nil {
		t.lookups.Remove(b.lookup)
	}
	delete(t.endpoints, name)
	if b.c.users--; b.c.users <= 0 {
		b.c.fast.CloseIdleConnections()
		delete(t.pools, b.key)
		t.forget(b.c)
	}
}

// endpointTLS returns the TLS settings of an endpoint: the base settings
// with the endpoint's client certificate and CA bundle, read from their
// files when its pool is built (a reload that changes a path reads anew),
// and its pinned certificate, if any.
func (t *Transport) endpointTLS(files courier.HTTPTLS, pin string) (*tls.Config, error) {
	cfg := t.opts.TLSConfig.Clone()
	if files.Cert != "" {
		cert, err := certfile.LoadKeyPair(files.Cert, files.Key)
		if err != nil {
			return nil, fmt.Errorf("cannot load the client certificate %s with its key: %s", files.Cert, fileProblem(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if files.CA != "" {
		pem, err := certfile.Read(files.CA)
		if err != nil {
			return nil, fmt.Errorf("cannot read the CA bundle: %s", fileProblem(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the CA bundle %s holds no PEM certificate", files.CA)
		}
		cfg.RootCAs = pool
	}
	if pin != "" {
		if err := pinCertificate(cfg, pin); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}

// fileProblem says what is wrong with a certificate or key file without the
// library's detail, which for a key could echo what it read.
func fileProblem(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Path + ": " + pe.Err.Error()
	}
	if strings.Contains(err.Error(), "private key does not match") {
		return "the private key does not match the certificate"
	}
	return "not a PEM certificate and its PEM private key"
}

func (t *Transport) newClient(key clientKey, allow []netip.Prefix, tlsConfig *tls.Config) *client {
	c := &client{key: key, total: &t.open}
	d := &dialer{
		net: net.Dialer{Resolver: t.opts.Resolver, KeepAlive: 30 * time.Second,
			Control: guard{allow: allow}.check},
		connectTimeout: key.connectTimeout,
		tls:            tlsConfig,
		t:              t,
		pool:           c,
	}
	// fasthttp rather than net/http's client: an attempt costs a fraction
	// of the CPU (no goroutines of its own per connection, pooled requests
	// and responses), which on a busy node is most of the delivery's cost.
	// Deliveries go straight to the receiver over HTTP/1.1: no environment
	// proxy (it would bypass the endpoint's network rules and blur the
	// error classes), no HTTP/2, no compression.
	c.fast = &fasthttp.Client{
		// The header of §8 names the User-Agent; names go as written and
		// paths as configured.
		NoDefaultUserAgentHeader:      true,
		DisableHeaderNamesNormalizing: true,
		DisablePathNormalizing:        true,
		// The engine bounds the attempts on an endpoint; connections beyond
		// that are never refused here, and the idle ones lapse.
		MaxConnsPerHost:     1 << 20,
		MaxIdleConnDuration: t.opts.IdleConnTimeout,
		// The response head must fit the read buffer (a longer one is a
		// protocol error); servers hold theirs to 8 or 16 KiB as well.
		ReadBufferSize: maxResponseHead,
		// The body is read as it comes: the excerpt, what a workflow keeps,
		// then a bounded drain.
		StreamResponseBody: true,
		// Send retries a stale connection itself (see client.do).
		MaxIdemponentCallAttempts: 1,
		ConfigureClient: func(hc *fasthttp.HostClient) error {
			hc.Transport = roundTripper{}
			hc.DialTimeout = d.dial
			if hc.IsTLS {
				hc.DialTimeout = d.dialTLS
			}
			return nil
		},
	}
	return c
}

// Send makes one attempt to deliver d.Message to d.Endpoint. It never
// returns an error: every failure is a Result with a class. The endpoint's
// timeout bounds the attempt, and so does ctx's deadline; a ctx canceled
// before the request goes out stops it, but one under way runs to its
// outcome or its timeout, so that what the receiver did is known.
func (t *Transport) Send(ctx context.Context, d courier.Delivery) courier.Result {
	m, e := d.Message, d.Endpoint
	if m == nil || e == nil {
		return courier.Result{Class: courier.ClassTransport, Error: "delivery without a message or an endpoint"}
	}
	target, err := url.Parse(e.HTTP.URL)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") || target.Host == "" {
		return courier.Result{Class: courier.ClassTransport,
			Error: fmt.Sprintf("endpoint %s: %q is not an absolute http or https URL", e.Name, e.HTTP.URL)}
	}
	method := strings.ToUpper(e.HTTP.Method)
	if method == "" {
		method = http.MethodPost
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = t.opts.DefaultTimeout
	}
	if e.HTTP.PinnedCertificate != "" && target.Scheme != "https" {
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
	body, fail := requestBody(d, steps)
	if fail != nil {
		return *fail
	}
	now := t.opts.Clock.Now()
	header, fail := t.header(d, body, steps, now)
	if fail != nil {
		return *fail
	}
	// A step's answer is kept for the later steps of its workflow; other
	// deliveries read no more than the excerpt and the drain.
	keep := 0
	if d.Step != nil {
		keep = courier.MaxStepResponse
	}

	c, err := t.clientFor(e, target, timeout)
	if err != nil {
		return courier.Result{Class: courier.ClassTLS, Error: fmt.Sprintf("endpoint %s: %v", e.Name, err)}
	}
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
		err := c.do(req, resp, method, target, header, body, deadline)
		if err != nil {
			class, msg := classify(err, attemptState{host: target.Host, timeout: timeout})
			return courier.Result{Class: class, Error: msg}
		}
		next, ok := redirectTarget(resp, target)
		if ok && e.HTTP.FollowRedirects {
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
				method, body = http.MethodGet, nil
			}
			if next.Host != target.Host {
				header = crossOriginHeader(header)
			}
			target = next
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
// without counting that as a retry.
func (c *client) do(req *fasthttp.Request, resp *fasthttp.Response, method string, u *url.URL, h []headerField, body []byte, deadline time.Time) error {
	c.build(req, method, u, h, body)
	for stale := 0; ; {
		start := time.Now()
		// Reset, so that a response without a local address says the try
		// had no connection: the client gives up before dialling once the
		// deadline has passed.
		resp.Reset()
		err := c.fast.DoDeadline(req, resp, deadline)
		if err == nil {
			return nil
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
func (c *client) build(req *fasthttp.Request, method string, u *url.URL, h []headerField, body []byte) {
	req.Header.DisableNormalizing()
	req.SetRequestURI(u.String())
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

// dialer opens the connections of one endpoint's pool within the connect
// timeout (and what is left of the attempt's), and marks its errors so that
// classify can tell a failed connect or handshake from a failure later on.
type dialer struct {
	net            net.Dialer
	connectTimeout time.Duration
	tls            *tls.Config
	t              *Transport // counts the connections against MaxConns
	pool           *client    // the pool the connections are for
}

// connState is what one connection of a pool met: when it was opened, the
// last error a read on it returned, and whether the answer it carried lets
// it carry another request. The HTTP client reports a failed first read of
// a response as a bare EOF; the error itself (a reset, a TLS alert of a
// receiver that refused the client certificate) is kept here.
type connState struct {
	openedAt time.Time
	tcp      net.Conn // closed when the connection is retired
	pool     *client  // where the connection is counted; nil when it is not
	released atomic.Bool

	mu      sync.Mutex
	judged  sync.Cond // signalled when an answer is judged
	readErr error
	sent    bool // a request went out and no answer has begun
	held    bool // an answer began and is not judged yet
	retired bool // an answer ended the connection's use for HTTP
}

func newConnState(tcp net.Conn, pool *client) *connState {
	st := &connState{openedAt: time.Now(), tcp: tcp, pool: pool}
	st.judged.L = &st.mu
	return st
}

// errRetired is what a request meets on a retired connection.
var errRetired = errors.New("connection retired after its last answer")

// read passes on what a read of the connection returned, noting its error.
// The first bytes after a request hold the connection until their answer
// is judged: the client pools a connection whose answer has no body before
// the transport sees that answer.
func (st *connState) read(n int, err error) (int, error) {
	st.mu.Lock()
	if n > 0 && st.sent {
		st.sent, st.held = false, true
	}
	if err != nil {
		st.readErr = err
	}
	st.mu.Unlock()
	return n, err
}

// write passes p to write once the last answer is judged, unless that
// answer retired the connection.
func (st *connState) write(p []byte, write func([]byte) (int, error)) (int, error) {
	st.mu.Lock()
	for st.held {
		st.judged.Wait()
	}
	if st.retired {
		st.mu.Unlock()
		return 0, errRetired
	}
	st.sent = true
	st.mu.Unlock()
	return write(p)
}

// judge releases the connection after an answer: to the next request when
// reuse holds, otherwise to none, closing it.
func (st *connState) judge(reuse bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.held = false
	if !reuse && !st.retired {
		st.retired = true
		st.tcp.Close()
		st.release()
	}
	st.judged.Broadcast()
}

// release uncounts the connection, once however often it is closed.
func (st *connState) release() {
	if st.pool != nil && st.released.CompareAndSwap(false, true) {
		st.pool.uncount()
	}
}

func (st *connState) isRetired() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.retired
}

func (st *connState) lastReadErr() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.readErr
}

// stateOf finds the state of the connection a response came on, by the
// local address the client noted of it.
func stateOf(addr net.Addr) *connState {
	if a, ok := addr.(connAddr); ok {
		return a.st
	}
	return nil
}

// connAddr is a connection's local address, leading back to its state.
type connAddr struct {
	net.Addr
	st *connState
}

// trackedConn is a connection the dialer opened, TCP or TLS over TCP: the
// client reads and writes HTTP through it, so its state sees every answer
// and every error.
type trackedConn struct {
	net.Conn
	st *connState
}

func (c *trackedConn) LocalAddr() net.Addr { return connAddr{c.Conn.LocalAddr(), c.st} }

func (c *trackedConn) Read(p []byte) (int, error) { return c.st.read(c.Conn.Read(p)) }

func (c *trackedConn) Write(p []byte) (int, error) { return c.st.write(p, c.Conn.Write) }

func (c *trackedConn) Close() error {
	defer c.st.release()
	return c.Conn.Close()
}

// trackedTLSConn keeps the Handshake method by which the client knows a
// connection is TLS already.
type trackedTLSConn struct {
	trackedConn
	tls *tls.Conn
}

func (c *trackedTLSConn) Handshake() error { return c.tls.Handshake() }

// roundTripper is the client's own, and judges each answer's connection
// before another request may go out on it. An answer outside 200..599
// ends the connection: a 101 hands it to another protocol, and an unknown
// status promises nothing about what follows. Retiring is needed for a 1xx
// above all: the client pooled its connection already, as the answer has
// no body; one whose body streams closes with the body.
type roundTripper struct{}

func (roundTripper) RoundTrip(hc *fasthttp.HostClient, req *fasthttp.Request, resp *fasthttp.Response) (bool, error) {
	retry, err := fasthttp.DefaultTransport.RoundTrip(hc, req, resp)
	if err != nil {
		return retry, err // the client closed the connection
	}
	if st := stateOf(resp.LocalAddr()); st != nil {
		code := resp.StatusCode()
		reuse := code >= 200 && code <= 599
		if !reuse {
			resp.SetConnectionClose()
		}
		st.judge(reuse)
	}
	return retry, nil
}

// errConnectTimeout is the cause of a dial's context when the connect
// timeout ran out.
var errConnectTimeout = errors.New("connect timeout")

// dial opens a TCP connection; left is what remains of the attempt.
func (d *dialer) dial(addr string, left time.Duration) (net.Conn, error) {
	d.t.count(d.pool)
	ctx, cancel, limit := d.context(left)
	defer cancel()
	conn, err := d.dialTCP(ctx, addr, limit)
	if err != nil {
		d.pool.uncount()
		return nil, err
	}
	return &trackedConn{Conn: conn, st: newConnState(conn, d.pool)}, nil
}

// context bounds a connect and handshake by the connect timeout and by
// what is left of the attempt; limit is the bound it applied.
func (d *dialer) context(left time.Duration) (ctx context.Context, cancel context.CancelFunc, limit time.Duration) {
	limit = d.connectTimeout
	if left > 0 {
		limit = min(limit, left)
	}
	ctx, cancel = context.WithTimeoutCause(context.Background(), limit, errConnectTimeout)
	return ctx, cancel, limit
}

// dialTCP connects to addr. limit is the context's bound, for the message.
func (d *dialer) dialTCP(ctx context.Context, addr string, limit time.Duration) (net.Conn, error) {
	conn, err := d.net.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, &connectError{addr: addr, err: err, timedOut: context.Cause(ctx) == errConnectTimeout, limit: limit}
	}
	return conn, nil
}

// dialTLS opens a TCP connection and makes the TLS handshake on it; the
// pool takes a handshaken connection as it is.
func (d *dialer) dialTLS(addr string, left time.Duration) (net.Conn, error) {
	d.t.count(d.pool)
	ctx, cancel, limit := d.context(left)
	defer cancel()
	conn, err := d.dialTCP(ctx, addr, limit)
	if err != nil {
		d.pool.uncount()
		return nil, err
	}
	cfg := d.tls.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"http/1.1"}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		d.pool.uncount()
		return nil, &handshakeError{addr: addr, err: err, timedOut: context.Cause(ctx) == errConnectTimeout, limit: limit}
	}
	st := newConnState(conn, d.pool)
	return &trackedTLSConn{trackedConn: trackedConn{Conn: tc, st: st}, tls: tc}, nil
}

// isTimeout reports whether err says the attempt's time ran out.
func isTimeout(err error) bool {
	if errors.Is(err, fasthttp.ErrTimeout) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// connectError is a failed TCP connect (including the name lookup).
type connectError struct {
	addr     string
	err      error
	timedOut bool
	limit    time.Duration // the time it had: the connect timeout or what was left of the attempt
}

func (e *connectError) Error() string { return "connect to " + e.addr + ": " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// handshakeError is a failed TLS handshake on a connected socket.
type handshakeError struct {
	addr     string
	err      error
	timedOut bool
	limit    time.Duration // the time it had: the connect timeout or what was left of the attempt
}

func (e *handshakeError) Error() string { return "TLS handshake with " + e.addr + ": " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }
