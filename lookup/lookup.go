// Package lookup resolves the endpoint of a message's recipient through an
// HTTP registry (docs/design.md §13), keeping the answers for a while so that a
// busy recipient costs one registry request per TTL, not one per message.
package lookup

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/certfile"
)

// DefaultMaxEntries bounds the cache of a Registry whose Options set none:
// enough for a large trading network, small enough that a flood of made-up
// recipients cannot exhaust memory.
const DefaultMaxEntries = 100_000

// Limits on what is read of a registry's answer. An answer carries a URL
// and at most a few certificates; anything larger is not a registry.
const (
	maxAnswerBytes  = 1 << 20
	maxExcerptBytes = 256
)

// Options configure a Registry. The zero value is usable.
type Options struct {
	// Client asks the registry; nil means one with connect and TLS
	// timeouts (the request timeout comes from each route's Lookup).
	Client *http.Client
	Clock  courier.Clock
	Logger *slog.Logger
	// MaxEntries bounds the cache; the oldest entry goes when it is full.
	// 0 means DefaultMaxEntries.
	MaxEntries int
}

// Registry is a courier.Resolver that asks an HTTP registry and caches
// its answers per (route, recipient, type). It is safe for concurrent use.
type Registry struct {
	client *http.Client
	clock  courier.Clock
	logger *slog.Logger
	max    int

	mu       sync.Mutex
	entries  map[key]*entry
	order    *list.List // of key, oldest first: what goes when the cache is full
	inflight map[key]*call

	hits, misses, failures, notRegistered atomic.Int64
}

var _ courier.Resolver = (*Registry)(nil)

type key struct{ route, recipient, msgType string }

// entry is a cached answer: a resolution, or "not registered".
type entry struct {
	res           courier.Resolution
	notRegistered bool
	expires       time.Time
	elem          *list.Element
}

// call is a registry request in flight; the callers of one key all wait
// for it rather than each asking the registry.
type call struct {
	done chan struct{}
	res  courier.Resolution
	err  error
}

// New returns a Registry with the given options.
func New(o Options) *Registry {
	g := &Registry{
		client:   o.Client,
		clock:    o.Clock,
		logger:   o.Logger,
		max:      o.MaxEntries,
		entries:  make(map[key]*entry),
		order:    list.New(),
		inflight: make(map[key]*call),
	}
	if g.client == nil {
		g.client = defaultClient()
	}
	g.clock = courier.ClockOrSystem(g.clock)
	g.logger = courier.LoggerOrDiscard(g.logger)
	if g.max <= 0 {
		g.max = DefaultMaxEntries
	}
	return g
}

func defaultClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = 10 * time.Second
	t.IdleConnTimeout = 90 * time.Second
	t.MaxIdleConnsPerHost = 16
	// Client.Timeout stays 0: each request carries its route's timeout in
	// its context, which may be longer than any default here.
	return &http.Client{Transport: t}
}

// Stats are the counters of a Registry since it was made: Hits are
// Resolves answered from the cache (or by joining a request another caller
// had in flight for the same key), Misses requests made to the registry,
// and Failures and NotRegistered those of them that failed or answered 404.
type Stats = courier.LookupStats

// Stats returns the registry's counters.
func (g *Registry) Stats() Stats {
	return Stats{
		Hits:          g.hits.Load(),
		Misses:        g.misses.Load(),
		Failures:      g.failures.Load(),
		NotRegistered: g.notRegistered.Load(),
	}
}

// Resolve returns the registry's answer for recipient and msgType on route
// r, from the cache when it holds a live one. A recipient the registry
// does not know yields an error wrapping courier.ErrNotRegistered; any
// other error means the registry could not be asked or answered nonsense.
func (g *Registry) Resolve(ctx context.Context, r *courier.Route, recipient, msgType string) (courier.Resolution, error) {
	if r == nil || r.Lookup == nil {
		return courier.Resolution{}, errors.New("route has no lookup")
	}
	if err := ctx.Err(); err != nil {
		return courier.Resolution{}, fmt.Errorf("look up %s: %w", recipient, err)
	}
	k := key{r.Name, recipient, msgType}

	g.mu.Lock()
	if e, ok := g.entries[k]; ok {
		if g.clock.Now().Before(e.expires) {
			g.mu.Unlock()
			g.hits.Add(1)
			if e.notRegistered {
				return courier.Resolution{}, notRegisteredError(recipient, msgType)
			}
			return e.res, nil
		}
		g.remove(k, e)
	}
	c, joined := g.inflight[k]
	if !joined {
		c = &call{done: make(chan struct{})}
		g.inflight[k] = c
	}
	g.mu.Unlock()

	if joined {
		g.hits.Add(1)
	} else {
		g.misses.Add(1)
		// The request is detached from this caller's cancellation: others
		// may be waiting for it, and its own timeout bounds it anyway.
		go g.fetch(context.WithoutCancel(ctx), r, k, c)
	}

	select {
	case <-c.done:
		return c.res, c.err
	case <-ctx.Done():
		return courier.Resolution{}, fmt.Errorf("look up %s: %w", recipient, ctx.Err())
	}
}

// fetch asks the registry for k, caches the answer unless the request
// failed or k was invalidated meanwhile, and releases c's waiters.
func (g *Registry) fetch(ctx context.Context, r *courier.Route, k key, c *call) {
	l := r.Lookup
	timeout := l.RequestTimeout()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	res, err := g.ask(ctx, l.LookupURL(k.recipient, k.msgType), timeout)
	now := g.clock.Now()
	var expires time.Time
	notRegistered := errors.Is(err, courier.ErrNotRegistered)
	switch {
	case notRegistered:
		g.notRegistered.Add(1)
		err = notRegisteredError(k.recipient, k.msgType)
		expires = now.Add(ttl(l.NegativeTTL, courier.DefaultLookupNegativeTTL))
	case err != nil:
		g.failures.Add(1)
		// Debug only: every failure reaches the message's attempt history,
		// and a registry that is down would otherwise flood the log.
		g.logger.Debug("registry lookup failed", "route", r.Name, "recipient", k.recipient, "type", k.msgType, "error", err)
	default:
		expires = now.Add(ttl(l.CacheTTL, courier.DefaultLookupCacheTTL))
		if !res.ExpiresAt.IsZero() && res.ExpiresAt.Before(expires) {
			expires = res.ExpiresAt
		}
	}

	g.mu.Lock()
	// A key invalidated while its request was in flight no longer points
	// at c: the answer, possibly the stale one Invalidate meant to drop,
	// goes to c's waiters only.
	if g.inflight[k] == c {
		delete(g.inflight, k)
		if (err == nil || notRegistered) && now.Before(expires) {
			g.store(k, &entry{res: res, notRegistered: notRegistered, expires: expires})
		}
	}
	c.res, c.err = res, err
	g.mu.Unlock()
	close(c.done)
}

func ttl(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func notRegisteredError(recipient, msgType string) error {
	return fmt.Errorf("recipient %s for type %s: %w", recipient, msgType, courier.ErrNotRegistered)
}

// store caches e under k, evicting the oldest entries while the cache is
// full. g.mu must be held.
func (g *Registry) store(k key, e *entry) {
	if old, ok := g.entries[k]; ok {
		g.remove(k, old)
	}
	for len(g.entries) >= g.max {
		oldest := g.order.Front()
		ok := oldest.Value.(key)
		g.remove(ok, g.entries[ok])
	}
	e.elem = g.order.PushBack(k)
	g.entries[k] = e
}

// remove drops the entry e of k. g.mu must be held.
func (g *Registry) remove(k key, e *entry) {
	g.order.Remove(e.elem)
	delete(g.entries, k)
}

// Invalidate forgets the answer for recipient and msgType on route r, and
// any request for it in flight, so that the next Resolve asks the registry.
func (g *Registry) Invalidate(r *courier.Route, recipient, msgType string) {
	if r == nil {
		return
	}
	k := key{r.Name, recipient, msgType}
	g.mu.Lock()
	defer g.mu.Unlock()
	if e, ok := g.entries[k]; ok {
		g.remove(k, e)
	}
	delete(g.inflight, k)
}

// Cached reports what Peek does, for courier.LookupCache.
func (g *Registry) Cached(r *courier.Route, recipient, msgType string) (bool, time.Time, bool) {
	_, cached, until, notRegistered := g.Peek(r, recipient, msgType)
	return cached, until, notRegistered
}

var _ courier.LookupCache = (*Registry)(nil)

// Peek shows what the cache holds for recipient and msgType on route r
// without asking the registry or counting a hit: the resolution, or
// notRegistered, and when it expires. cached is false when nothing live is
// held.
func (g *Registry) Peek(r *courier.Route, recipient, msgType string) (res courier.Resolution, cached bool, expires time.Time, notRegistered bool) {
	if r == nil {
		return courier.Resolution{}, false, time.Time{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.entries[key{r.Name, recipient, msgType}]
	if !ok || !g.clock.Now().Before(e.expires) {
		return courier.Resolution{}, false, time.Time{}, false
	}
	return e.res, true, e.expires, e.notRegistered
}

// answer is a registry's JSON answer. ExpiresAt is a string so that an
// empty one means "none" rather than a decoding error.
type answer struct {
	URL         string `json:"url"`
	Certificate string `json:"certificate"`
	ExpiresAt   string `json:"expires_at"`
}

// ask makes one registry request. A 404 yields courier.ErrNotRegistered.
func (g *Registry) ask(ctx context.Context, rawURL string, timeout time.Duration) (courier.Resolution, error) {
	shown := courier.RedactURL(rawURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return courier.Resolution{}, fmt.Errorf("registry URL %s is not valid: %w", shown, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := g.client.Do(req)
	if err != nil {
		return courier.Resolution{}, requestError(shown, timeout, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes+1))
	if err != nil {
		return courier.Resolution{}, requestError(shown, timeout, err)
	}

	switch {
	case resp.StatusCode == http.StatusNotFound:
		return courier.Resolution{}, courier.ErrNotRegistered
	case resp.StatusCode != http.StatusOK:
		return courier.Resolution{}, fmt.Errorf("registry %s answered %s: %s", shown, resp.Status, excerpt(body))
	case len(body) > maxAnswerBytes:
		return courier.Resolution{}, fmt.Errorf("registry %s answered more than %d bytes", shown, maxAnswerBytes)
	}
	res, err := parseAnswer(body)
	if err != nil {
		return courier.Resolution{}, fmt.Errorf("registry %s answered nonsense: %w", shown, err)
	}
	return res, nil
}

// requestError says what went wrong with a request, without the URL that
// *url.Error would repeat unredacted.
func requestError(shown string, timeout time.Duration, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("registry %s did not answer within %s", shown, timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("registry %s could not be asked: %w", shown, err)
}

// parseAnswer checks a 200 answer: an absolute http(s) URL, a certificate
// that parses if there is one, an RFC 3339 expiry if there is one.
func parseAnswer(body []byte) (courier.Resolution, error) {
	var a answer
	if err := json.Unmarshal(body, &a); err != nil {
		return courier.Resolution{}, fmt.Errorf("not a JSON answer (%v): %s", err, excerpt(body))
	}
	if a.URL == "" {
		return courier.Resolution{}, errors.New("no url in the answer")
	}
	u, err := url.Parse(a.URL)
	if err != nil {
		return courier.Resolution{}, fmt.Errorf("url %q is not valid: %w", clip(a.URL), err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return courier.Resolution{}, fmt.Errorf("url %q is not an absolute http or https URL", clip(a.URL))
	}
	res := courier.Resolution{URL: a.URL, Certificate: a.Certificate}
	if strings.TrimSpace(a.Certificate) != "" {
		// The transport pins what it is given: junk here would fail every
		// delivery as a tls error at the receiver instead of a lookup
		// error here.
		if _, err := certfile.ParseChain(a.Certificate); err != nil {
			return courier.Resolution{}, fmt.Errorf("certificate %w", err)
		}
	} else {
		res.Certificate = ""
	}
	if a.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, a.ExpiresAt)
		if err != nil {
			return courier.Resolution{}, fmt.Errorf("expires_at %q is not an RFC 3339 time", clip(a.ExpiresAt))
		}
		res.ExpiresAt = t
	}
	return res, nil
}

// excerpt is the start of a body, fit for an error message.
func excerpt(body []byte) string {
	s := strings.ToValidUTF8(string(body), "?")
	if len(s) > maxExcerptBytes {
		s = strings.ToValidUTF8(s[:maxExcerptBytes], "") + "…"
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	s = strings.TrimSpace(s)
	if s == "" {
		return "(empty body)"
	}
	return s
}

func clip(s string) string {
	if len(s) > 100 {
		return strings.ToValidUTF8(s[:100], "") + "…"
	}
	return s
}
