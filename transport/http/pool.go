package http

import (
	"container/list"
	"crypto/tls"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/courier-gw/courier"
	"github.com/valyala/fasthttp"
)

// binding is the pool an endpoint uses, for as long as the settings in its
// key stay the same.
type binding struct {
	key    clientKey
	c      *client
	lookup *list.Element // the place of a resolved endpoint in Transport.lookups; nil for others
	// The endpoint's settings its key was worked out of, and its URL as
	// parsed then: an attempt of an endpoint whose settings are as they
	// were takes them from here, without parsing the URL or working out
	// the key again.
	from   settings
	target *url.URL // never changed once parsed
	uri    string   // target as a request line has it
}

// settings are the inputs of an endpoint's binding: its own settings, its
// attempt timeout and the global allowlist in force (by its generation).
type settings struct {
	url, pin string
	tls      TLS
	allow    []string
	timeout  time.Duration
	global   uint64
	proxy    *proxyURL // the proxy the key was worked out with (proxyFor)
}

func (t *Transport) settingsOf(e *courier.Endpoint, timeout time.Duration) settings {
	return settings{url: settingsOf(e).URL, pin: settingsOf(e).PinnedCertificate, tls: settingsOf(e).TLS, allow: settingsOf(e).AllowNetworks,
		timeout: timeout, global: t.allowGen, proxy: t.proxyFor(settingsOf(e))}
}

func (a settings) same(b settings) bool {
	return a.url == b.url && a.pin == b.pin && a.tls == b.tls && a.timeout == b.timeout && a.global == b.global &&
		slices.Equal(a.allow, b.allow) && a.proxy.key() == b.proxy.key()
}

// bound is what an attempt takes from an endpoint's binding: a copy, made
// under the transport's lock, which a later change of the binding leaves
// as it is.
type bound struct {
	c      *client
	target *url.URL
	uri    string
}

func (b *binding) bound() bound { return bound{c: b.c, target: b.target, uri: b.uri} }

// boundFor returns e's binding as an attempt uses it, while e's settings
// are those the binding was made for; ok is false when they are not (or
// e has none yet): the attempt then works them out (clientFor).
func (t *Transport) boundFor(e *courier.Endpoint, timeout time.Duration) (bound, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.endpoints[e.Name]
	if b == nil || b.target == nil || !b.from.same(t.settingsOf(e, timeout)) {
		return bound{}, false
	}
	if b.lookup != nil {
		t.lookups.MoveToFront(b.lookup)
	}
	t.touch(b.c)
	return b.bound(), true
}

// SetAllowNetworks replaces the global allowlist, as on reload; the pools
// of endpoints are rebuilt at their next attempt.
func (t *Transport) SetAllowNetworks(allow []netip.Prefix) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.allow = slices.Clone(allow)
	t.allowGen++
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
	tls            TLS
	// pin is the PEM certificate the receiver must present: a registry
	// that gives another for the same URL must not find the connections
	// it verified.
	pin string
	// proxy is the proxy the connections go through (proxyURL.key): with
	// its credentials, so that a changed password gets new connections.
	proxy string
}

// clientFor returns e's binding as an attempt uses it, e's URL being u:
// its pool, built on first use or when the endpoint's settings changed,
// and what the binding was worked out of noted for boundFor.
func (t *Transport) clientFor(e *courier.Endpoint, u *url.URL, timeout time.Duration) (bound, error) {
	key := clientKey{
		origin:         u.Scheme + "://" + u.Host,
		connectTimeout: min(t.opts.ConnectTimeout, timeout),
		tls:            settingsOf(e).TLS,
		pin:            settingsOf(e).PinnedCertificate,
	}
	proxy := t.proxyFor(settingsOf(e))
	key.proxy = proxy.key()

	t.mu.Lock()
	defer t.mu.Unlock()
	allow := append(slices.Clone(t.allow), parseNetworks(settingsOf(e).AllowNetworks)...)
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
		b.from, b.target, b.uri = t.settingsOf(e, timeout), u, u.String()
		return b.bound(), nil
	}
	c := t.pools[key]
	if c == nil {
		tlsConfig, err := t.endpointTLS(settingsOf(e).TLS, settingsOf(e).PinnedCertificate)
		if err != nil {
			return bound{}, err
		}
		c = t.newClient(key, allow, tlsConfig, proxy)
		t.pools[key] = c
		t.log.Debug("http transport: new connection pool", "endpoint", e.Name, "origin", key.origin,
			"connect_timeout", key.connectTimeout, "allow_networks", key.allow, "proxy", redactProxy(proxy.rawURL()))
	}
	if b != nil {
		t.drop(e.Name, b)
	}
	c.users++
	t.touch(c)
	b = &binding{key: key, c: c, from: t.settingsOf(e, timeout), target: u, uri: u.String()}
	t.endpoints[e.Name] = b
	if strings.HasPrefix(e.Name, courier.ResolvedEndpointPrefix) {
		b.lookup = t.lookups.PushFront(e.Name)
		if t.lookups.Len() > t.opts.MaxLookupPools {
			last := t.lookups.Back().Value.(string)
			t.drop(last, t.endpoints[last])
		}
	}
	return b.bound(), nil
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

func (t *Transport) newClient(key clientKey, allow []netip.Prefix, tlsConfig *tls.Config, proxy *proxyURL) *client {
	c := &client{key: key, total: &t.open}
	d := &dialer{
		net: net.Dialer{Resolver: t.opts.Resolver, KeepAlive: 30 * time.Second,
			Control: guard{allow: allow}.check},
		connectTimeout: key.connectTimeout,
		tls:            tlsConfig,
		guard:          guard{allow: allow},
		proxy:          proxy,
		t:              t,
		pool:           c,
	}
	// fasthttp rather than net/http's client: an attempt costs a fraction
	// of the CPU (no goroutines of its own per connection, pooled requests
	// and responses), which on a busy node is most of the delivery's cost.
	// Deliveries go over HTTP/1.1, straight to the receiver or through the
	// endpoint's proxy (dialer.tunnel): never an environment proxy (it
	// would bypass the endpoint's network rules and blur the error
	// classes); no HTTP/2, no compression.
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
