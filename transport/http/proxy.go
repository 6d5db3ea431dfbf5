package http

import (
	"bufio"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/check"
)

// Egress is the way an endpoint's requests leave: through an HTTP forward
// proxy, so that receivers can allow-list the proxy's address.
type Egress struct {
	// Proxy is the http:// URL of the proxy, its credentials (user and
	// password) in it; empty: the server's outbound.proxy, if any.
	Proxy string `json:"proxy,omitempty"`
}

func (e Egress) wire() *Egress {
	if e == (Egress{}) {
		return nil
	}
	return &e
}

// decodeEgress reads an endpoint's egress field.
func decodeEgress(f courier.SettingsFields, h *Settings) {
	e := f.Sub("egress", []string{"proxy"})
	if e == nil {
		return
	}
	if l := e.String("proxy", &h.Egress.Proxy); l > 0 {
		if err := CheckProxy(h.Egress.Proxy); err != nil {
			e.ErrorAt(l, e.Field("proxy"), "%v", err)
		}
	}
}

// CheckProxy says what is wrong with a proxy URL, or nil: an http URL of a
// host and port, with credentials or not, and nothing else. The message
// never quotes the URL, whose password is a secret.
func CheckProxy(raw string) error {
	if err := check.URL(raw, "http"); err != nil {
		return fmt.Errorf("must be the http:// URL of a forward proxy (http://[user:password@]host:port)")
	}
	u, _ := url.Parse(raw)
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("is a proxy's address: http://[user:password@]host:port, without a path or query")
	}
	return nil
}

// proxyURL is a proxy an endpoint's connections go through: its address,
// and the Proxy-Authorization of its credentials.
type proxyURL struct {
	raw  string // as configured, with its credentials: part of the pool's key
	addr string // host:port
	auth string // "Basic ...", or empty
	// guarded is false for the server's own outbound.proxy, which its
	// operator chose and the SSRF guard does not judge; an endpoint's own
	// proxy is judged like any address the endpoint names.
	guarded bool
}

// parseProxy reads a proxy URL that CheckProxy passed; nil for an empty
// one.
func parseProxy(raw string, guarded bool) *proxyURL {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil
	}
	p := &proxyURL{raw: raw, addr: u.Host, guarded: guarded}
	if u.Port() == "" {
		p.addr = net.JoinHostPort(u.Hostname(), "80")
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		p.auth = "Basic " + base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw))
	}
	return p
}

// SetProxy replaces the default proxy, the server's outbound.proxy (empty:
// none), of the endpoints that name none of their own; their pools are
// rebuilt at their next attempt.
func (t *Transport) SetProxy(raw string) {
	if p := parseProxy(raw, false); p != nil {
		t.proxy.Store(p)
	} else {
		t.proxy.Store(&proxyURL{})
	}
}

// proxyFor returns the proxy of an endpoint's settings: its own, else the
// default; nil when its requests go straight to the receiver.
func (t *Transport) proxyFor(s *Settings) *proxyURL {
	if s.Egress.Proxy != "" {
		return parseProxy(s.Egress.Proxy, true)
	}
	if p := t.proxy.Load(); p != nil && p.addr != "" {
		return p
	}
	return nil
}

// proxyKey is what of the proxy shapes a pool (clientKey.proxy).
func (p *proxyURL) key() string {
	if p == nil {
		return ""
	}
	if p.guarded {
		return "endpoint " + p.raw
	}
	return "default " + p.raw
}

// rawURL is the proxy's URL as configured, "" for none.
func (p *proxyURL) rawURL() string {
	if p == nil {
		return ""
	}
	return p.raw
}

// redactProxy shows a proxy URL without its password.
func redactProxy(raw string) string { return courier.RedactURL(raw) }

// proxyError is a proxy's refusal of a CONNECT.
type proxyError struct {
	proxy, target string
	status        string
}

func (e *proxyError) Error() string {
	return fmt.Sprintf("the proxy %s refused to connect to %s: %s", e.proxy, e.target, e.status)
}

// tunnel opens a connection to addr (the receiver's host:port) through the
// proxy: the SSRF guard judges the receiver's addresses first, as it would
// judge them on a direct connection, and the proxy is asked to CONNECT to
// the first address the guard lets through, so that it reaches exactly the
// address judged and not whatever the name resolves to for it. The
// request then goes through the tunnel as it would go straight: for http
// as for https, the proxy changes nothing in it.
func (d *dialer) tunnel(ctx context.Context, addr string) (net.Conn, error) {
	target, err := d.judge(ctx, addr)
	if err != nil {
		return nil, err
	}
	nd := d.net
	if !d.proxy.guarded {
		nd.Control = nil
	}
	conn, err := nd.DialContext(ctx, "tcp", d.proxy.addr)
	if err != nil {
		return nil, &proxyDialError{proxy: d.proxy.addr, err: err}
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var b strings.Builder
	fmt.Fprintf(&b, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n", target, target)
	if d.proxy.auth != "" {
		fmt.Fprintf(&b, "Proxy-Authorization: %s\r\n", d.proxy.auth)
	}
	b.WriteString("\r\n")
	if _, err := conn.Write([]byte(b.String())); err != nil {
		conn.Close()
		return nil, err
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("no answer from the proxy %s to CONNECT: %w", d.proxy.addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, &proxyError{proxy: d.proxy.addr, target: target, status: resp.Status}
	}
	if br.Buffered() > 0 {
		// The receiver speaks after the request: a proxy that sent more
		// than its answer is not to be trusted with it.
		conn.Close()
		return nil, &proxyError{proxy: d.proxy.addr, target: target, status: "bytes after its answer to CONNECT"}
	}
	conn.SetDeadline(time.Time{})
	return conn, nil
}

// judge resolves the host of addr and returns the first of its addresses
// the SSRF guard lets through, as host:port; when it lets none through,
// the guard's refusal of the first.
func (d *dialer) judge(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		r := d.net.Resolver
		if r == nil {
			r = net.DefaultResolver
		}
		if ips, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return "", err
		}
	}
	var first error
	for _, ip := range ips {
		a := net.JoinHostPort(ip.Unmap().String(), port)
		err := d.guard.check("tcp", a, nil)
		if err == nil {
			return a, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = &net.DNSError{Err: "no address", Name: host, IsNotFound: true}
	}
	return "", first
}

// proxyDialError is a failed connect to the proxy itself: classified as a
// connect to the receiver would be, and said to be the proxy's.
type proxyDialError struct {
	proxy string
	err   error
}

func (e *proxyDialError) Error() string { return "the proxy " + e.proxy + ": " + e.err.Error() }
func (e *proxyDialError) Unwrap() error { return e.err }

// isProxyError reports a proxy's refusal, for classify.
func isProxyError(err error) (*proxyError, bool) {
	var pe *proxyError
	return pe, errors.As(err, &pe)
}
