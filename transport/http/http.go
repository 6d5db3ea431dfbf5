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
	"net/http/httptrace"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/certfile"
)

// Defaults of Options.
const (
	DefaultUserAgent       = "courier/1"
	DefaultTimeout         = 30 * time.Second // the attempt timeout of an endpoint that sets none
	DefaultConnectTimeout  = 10 * time.Second // the most a connect and TLS handshake may take
	DefaultMaxIdleConns    = 16               // idle connections kept per endpoint (DESIGN §4 max_concurrency default)
	DefaultIdleConnTimeout = 60 * time.Second
	DefaultMaxDrain        = 64 << 10 // bytes read past the excerpt so a connection can be reused
	DefaultMaxLookupPools  = 4096     // pools of resolved endpoints kept at once
)

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

	// MaxIdleConns bounds the kept-alive connections per endpoint; the
	// default follows the endpoint's MaxConcurrency, else 16.
	MaxIdleConns    int
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
	return o
}

// Transport sends deliveries to HTTP endpoints. It keeps one connection pool
// per endpoint so that attempts reuse kept-alive connections; it is safe for
// concurrent use.
type Transport struct {
	opts Options
	log  *slog.Logger

	mu      sync.Mutex
	clients map[string]*client // by endpoint name
	lookups *list.List         // names of the resolved endpoints in clients, most recently used first
	allow   []netip.Prefix     // the global allowlist in force
}

var _ courier.Sender = (*Transport)(nil)

// New returns a Transport with o's unset fields at their defaults.
func New(o Options) *Transport {
	o = o.withDefaults()
	return &Transport{opts: o, log: o.Logger, clients: make(map[string]*client), lookups: list.New(), allow: o.AllowNetworks}
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
	for name, c := range t.clients {
		c.transport.CloseIdleConnections()
		delete(t.clients, name)
	}
	t.lookups.Init()
}

// client is the connection pool of one endpoint, valid for as long as the
// settings in its key stay the same.
type client struct {
	key       clientKey
	transport *http.Transport
	http      *http.Client
	lookup    *list.Element // the place of a resolved endpoint in Transport.lookups; nil for others
}

// clientKey is what of an endpoint's settings shapes its pool: a reloaded
// endpoint that changes any of it gets a fresh pool.
type clientKey struct {
	origin         string // scheme://host:port of the endpoint URL
	connectTimeout time.Duration
	maxIdle        int
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
	maxIdle := t.opts.MaxIdleConns
	if maxIdle <= 0 {
		maxIdle = e.MaxConcurrency
	}
	if maxIdle <= 0 {
		maxIdle = DefaultMaxIdleConns
	}
	key := clientKey{
		origin:         u.Scheme + "://" + u.Host,
		connectTimeout: min(t.opts.ConnectTimeout, timeout),
		maxIdle:        maxIdle,
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
	old, ok := t.clients[e.Name]
	if ok && old.key == key {
		if old.lookup != nil {
			t.lookups.MoveToFront(old.lookup)
		}
		return old, nil
	}
	tlsConfig, err := t.endpointTLS(e.HTTP.TLS, e.HTTP.PinnedCertificate)
	if err != nil {
		return nil, err
	}
	if ok {
		t.drop(e.Name, old)
	}
	c := t.newClient(key, allow, tlsConfig)
	t.clients[e.Name] = c
	if strings.HasPrefix(e.Name, courier.ResolvedEndpointPrefix) {
		c.lookup = t.lookups.PushFront(e.Name)
		if t.lookups.Len() > t.opts.MaxLookupPools {
			last := t.lookups.Back().Value.(string)
			t.drop(last, t.clients[last])
		}
	}
	t.log.Debug("http transport: new connection pool", "endpoint", e.Name, "origin", key.origin,
		"connect_timeout", key.connectTimeout, "max_idle", key.maxIdle, "allow_networks", key.allow)
	return c, nil
}

// drop forgets the pool of an endpoint, t.mu held. In-flight attempts keep
// their connections; the idle ones go now and the rest lapse after
// IdleConnTimeout.
func (t *Transport) drop(name string, c *client) {
	c.transport.CloseIdleConnections()
	if c.lookup != nil {
		t.lookups.Remove(c.lookup)
	}
	delete(t.clients, name)
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
	d := &dialer{
		net: net.Dialer{Resolver: t.opts.Resolver, KeepAlive: 30 * time.Second,
			Control: guard{allow: allow}.check},
		connectTimeout: key.connectTimeout,
		tls:            tlsConfig,
	}
	tr := &http.Transport{
		// Deliveries go straight to the receiver: an environment proxy would
		// bypass the endpoint's network rules and blur the error classes.
		// (Were a proxy ever set, the guard would judge the proxy's address,
		// as it judges every connection this dialer opens.)
		Proxy:          nil,
		DialContext:    d.dial,
		DialTLSContext: d.dialTLS,
		// HTTP/1.1 only: every receiver speaks it, and its failures map
		// cleanly onto the error classes. A non-nil empty map keeps
		// net/http from setting up HTTP/2.
		TLSNextProto:           map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConns:           key.maxIdle,
		MaxIdleConnsPerHost:    key.maxIdle,
		IdleConnTimeout:        t.opts.IdleConnTimeout,
		DisableCompression:     true, // the receiver gets exactly the headers of §8
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &client{
		key:       key,
		transport: tr,
		http: &http.Client{
			Transport: tr,
			// Send follows redirects itself, when the endpoint allows, so that
			// the method, body and signature survive them.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
}

// errAttemptTimeout is the cause of an attempt's context when the endpoint's
// timeout ran out, as opposed to the caller cancelling.
var errAttemptTimeout = errors.New("endpoint timeout")

// Send makes one attempt to deliver d.Message to d.Endpoint. It never
// returns an error: every failure is a Result with a class.
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
	body, fail := requestBody(d)
	if fail != nil {
		return *fail
	}
	now := t.opts.Clock.Now()
	header, fail := t.header(d, body, now)
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
	actx, cancel := context.WithTimeoutCause(ctx, timeout, errAttemptTimeout)
	defer cancel()

	for hops := 0; ; hops++ {
		resp, tr, err := t.roundTrip(actx, c, method, target, header, body)
		if err != nil {
			class, msg := classify(err, tr.state(actx, ctx, timeout, target.Host))
			return courier.Result{Class: class, Error: msg}
		}
		next, ok := redirectTarget(resp, target)
		if ok && e.HTTP.FollowRedirects {
			if hops == maxRedirects {
				res := t.result(actx, ctx, resp, tr, timeout, target.Host, keep)
				res.Class = courier.ClassProtocol
				res.Error = fmt.Sprintf("stopped after %d redirects", maxRedirects)
				return res
			}
			if target.Scheme == "https" && next.Scheme == "http" {
				res := t.result(actx, ctx, resp, tr, timeout, target.Host, keep)
				res.Class = courier.ClassProtocol
				res.Error = fmt.Sprintf("redirect from https to %s refused", redactURL(next))
				return res
			}
			t.discard(resp)
			if resp.StatusCode == http.StatusSeeOther {
				// 303 says the request was taken and the answer is elsewhere:
				// fetch it as RFC 9110 asks.
				method, body = http.MethodGet, nil
			}
			if next.Host != target.Host {
				header = crossOriginHeader(header)
			}
			target = next
			continue
		}
		return t.result(actx, ctx, resp, tr, timeout, target.Host, keep)
	}
}

// roundTrip sends one request and returns the response with its header
// read. When a kept-alive connection turns out to be closed by the receiver
// before any answer came, it sends again on another connection: the
// receiver most likely never saw the request, and webhook-id lets it drop
// a duplicate if it did.
func (t *Transport) roundTrip(ctx context.Context, c *client, method string, u *url.URL, h http.Header, body []byte) (*http.Response, *trace, error) {
	for try := 0; ; try++ {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		tr := &trace{}
		req, err := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, tr.hooks()), method, u.String(), rd)
		if err != nil {
			return nil, tr, err
		}
		req.Header = h
		resp, err := c.http.Do(req)
		if err == nil {
			return resp, tr, nil
		}
		if try < staleRetries && ctx.Err() == nil && tr.reused.Load() && !tr.firstByte.Load() && closedEarly(err) {
			continue
		}
		return nil, tr, err
	}
}

// result reads the start of the response, closes it and turns the status
// into a Result. Of a 2xx it keeps the first keep bytes in Result.Body.
func (t *Transport) result(actx, parent context.Context, resp *http.Response, tr *trace, timeout time.Duration, host string, keep int) courier.Result {
	code := resp.StatusCode
	if code < 200 || code > 599 {
		// A 101 hands over the connection and an unknown status promises
		// nothing about a body: neither is read.
		resp.Body.Close()
		return courier.Result{Class: courier.ClassProtocol, Status: code, Error: fmt.Sprintf("unexpected HTTP status %d", code)}
	}
	ok := code >= 200 && code <= 299
	if !ok {
		keep = 0
	}
	excerpt, kept, bodyErr := readBody(resp.Body, resp.Header.Get("Content-Type"), keep, t.opts.MaxDrain)
	resp.Body.Close()

	res := courier.Result{Status: code, Response: excerpt}
	switch {
	case ok:
		if bodyErr != nil {
			// A 2xx whose body broke off is no complete answer: the
			// message goes again and the receiver deduplicates.
			res.Class, res.Error = classify(bodyErr, tr.state(actx, parent, timeout, host))
			return res
		}
		res.Body = string(kept)
		return res
	case code >= 300 && code <= 399:
		res.Class = courier.ClassProtocol
		if loc := resp.Header.Get("Location"); loc != "" {
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
		if d, ok := ParseRetryAfter(resp.Header.Get("Retry-After"), t.opts.Clock.Now()); ok {
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

// discard reads a little of a response that is not kept, so its connection
// can go back to the pool, and closes it.
func (t *Transport) discard(resp *http.Response) {
	io.CopyN(io.Discard, resp.Body, t.opts.MaxDrain)
	resp.Body.Close()
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
func redirectTarget(resp *http.Response, base *url.URL) (*url.URL, bool) {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
	default:
		return nil, false
	}
	loc := resp.Header.Get("Location")
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
func crossOriginHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
		out.Del(k)
	}
	return out
}

// trace records how far one request got, for the classification of its
// failure. Dials run on their own goroutine and may report after the
// request gave up, hence the atomics.
type trace struct {
	dnsStarted, dnsDone atomic.Bool
	gotConn, reused     atomic.Bool
	firstByte           atomic.Bool
}

func (tr *trace) hooks() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) { tr.dnsStarted.Store(true) },
		DNSDone:  func(httptrace.DNSDoneInfo) { tr.dnsDone.Store(true) },
		GotConn: func(info httptrace.GotConnInfo) {
			tr.reused.Store(info.Reused)
			tr.gotConn.Store(true)
		},
		GotFirstResponseByte: func() { tr.firstByte.Store(true) },
	}
}

// state snapshots tr and the contexts for classify.
func (tr *trace) state(actx, parent context.Context, timeout time.Duration, host string) attemptState {
	return attemptState{
		host:          host,
		timeout:       timeout,
		timedOut:      actx.Err() != nil && (context.Cause(actx) == errAttemptTimeout || parent.Err() == context.DeadlineExceeded),
		canceled:      actx.Err() != nil && parent.Err() == context.Canceled,
		resolving:     tr.dnsStarted.Load() && !tr.dnsDone.Load(),
		connected:     tr.gotConn.Load(),
		answerStarted: tr.firstByte.Load(),
	}
}

// dialer opens the connections of one endpoint's pool within the connect
// timeout, and marks its errors so that classify can tell a failed connect
// or handshake from a failure later on. net/http runs dials detached from
// the request's context, so the timeout here is what bounds them.
type dialer struct {
	net            net.Dialer
	connectTimeout time.Duration
	tls            *tls.Config
}

// errConnectTimeout is the cause of a dial's context when the connect
// timeout ran out.
var errConnectTimeout = errors.New("connect timeout")

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.connectTimeout, errConnectTimeout)
	defer cancel()
	return d.dialTCP(ctx, network, addr)
}

func (d *dialer) dialTCP(ctx context.Context, network, addr string) (net.Conn, error) {
	conn, err := d.net.DialContext(ctx, network, addr)
	if err != nil {
		return nil, &connectError{addr: addr, err: err, timedOut: context.Cause(ctx) == errConnectTimeout, limit: d.connectTimeout}
	}
	return conn, nil
}

func (d *dialer) dialTLS(ctx context.Context, network, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.connectTimeout, errConnectTimeout)
	defer cancel()
	conn, err := d.dialTCP(ctx, network, addr)
	if err != nil {
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
		return nil, &handshakeError{addr: addr, err: err, timedOut: context.Cause(ctx) == errConnectTimeout, limit: d.connectTimeout}
	}
	return tc, nil
}

// connectError is a failed TCP connect (including the name lookup).
type connectError struct {
	addr     string
	err      error
	timedOut bool
	limit    time.Duration
}

func (e *connectError) Error() string { return "connect to " + e.addr + ": " + e.err.Error() }
func (e *connectError) Unwrap() error { return e.err }

// handshakeError is a failed TLS handshake on a connected socket.
type handshakeError struct {
	addr     string
	err      error
	timedOut bool
	limit    time.Duration
}

func (e *handshakeError) Error() string { return "TLS handshake with " + e.addr + ": " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }
