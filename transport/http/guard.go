package http

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"syscall"

	courier "github.com/courier-gw/courier"
)

// blockedNetworks are the addresses an endpoint may not reach unless an
// allowlist names them: a webhook URL is chosen by whoever configures it,
// and must not become a way into courier's own host, its private network or
// the cloud's metadata service (169.254.169.254 and fd00:ec2::254 lie in
// the link-local and unique-local ranges).
var blockedNetworks = []struct {
	prefix netip.Prefix
	what   string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "an unspecified (this-network) address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a shared (carrier-grade NAT) address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address (cloud metadata lives here)"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "a protocol-assignment address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique-local (private) address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// blockedReason says why ip is blocked, or "" when it may be reached.
func blockedReason(ip netip.Addr) string {
	ip = ip.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	for _, b := range blockedNetworks {
		if b.prefix.Contains(ip) {
			return b.what
		}
	}
	return ""
}

// guard decides which addresses one endpoint's connections may go to.
type guard struct {
	allow []netip.Prefix // the global allowlist and the endpoint's
}

// check is the dialer's Control hook: it runs on the resolved address of
// every connection, after the name lookup and before the connect, so no
// packet leaves for a blocked address and a name that resolves differently
// the second time (DNS rebinding) gains nothing.
func (g guard) check(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return &blockedError{addr: address, reason: "not an IP address"}
	}
	reason := blockedReason(ip)
	if reason == "" {
		return nil
	}
	for _, p := range g.allow {
		if p.Contains(ip.Unmap()) || p.Contains(ip) {
			return nil
		}
	}
	return &blockedError{addr: address, reason: reason}
}

// blockedError is a connection the SSRF guard refused to open.
type blockedError struct {
	addr   string
	reason string
}

func (e *blockedError) Error() string {
	return fmt.Sprintf("%s is %s", e.addr, e.advice())
}

// advice is the reason, and how to allow the address.
func (e *blockedError) advice() string {
	return fmt.Sprintf("%s, which endpoints may not reach: allow it with allow_networks on the endpoint or outbound.allow_networks", e.reason)
}

// parseNetworks reads the endpoint's allow_networks, which the configuration
// has checked already; one that does not parse allows nothing.
func parseNetworks(cidrs []string) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range cidrs {
		if p, err := netip.ParsePrefix(strings.TrimSpace(c)); err == nil {
			out = append(out, p.Masked())
		}
	}
	return out
}

// Blocked says why the SSRF guard would refuse every connection to e's URL,
// given the global allowlist allow, or "" when it would let one through or
// cannot tell (a name that does not resolve now, a URL a registry gives).
// Whoever configures an endpoint is told at once, rather than by its first
// delivery; the guard still decides at each connection, on the address a
// name resolves to then. A name is resolved with resolver (nil: the
// system's), within ctx.
func Blocked(ctx context.Context, resolver *net.Resolver, e *courier.Endpoint, allow []netip.Prefix) string {
	if e.Transport != courier.TransportHTTP || settingsOf(e).URL == "" {
		return ""
	}
	u, err := url.Parse(settingsOf(e).URL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	g := guard{allow: append(slices.Clone(allow), parseNetworks(settingsOf(e).AllowNetworks)...)}
	if p := parseProxy(settingsOf(e).Egress.Proxy, true); p != nil {
		// The endpoint's own proxy is judged as the receiver is.
		if host, port, err := net.SplitHostPort(p.addr); err == nil {
			if why := blockedHost(ctx, resolver, g, host, port); why != "" {
				return "its proxy " + why
			}
		}
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return blockedHost(ctx, resolver, g, u.Hostname(), port)
}

// blockedHost says why g refuses every address of host, or "".
func blockedHost(ctx context.Context, resolver *net.Resolver, g guard, host, port string) string {
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		if resolver == nil {
			resolver = net.DefaultResolver
		}
		if addrs, err = resolver.LookupNetIP(ctx, "ip", host); err != nil {
			return ""
		}
	}
	var why *blockedError
	for _, ip := range addrs {
		err := g.check("tcp", net.JoinHostPort(ip.Unmap().String(), port), nil)
		if !errors.As(err, &why) {
			return "" // the dialer may connect to this one
		}
	}
	if why == nil {
		return ""
	}
	if _, err := netip.ParseAddr(host); err != nil {
		// A name: say what it resolves to.
		return fmt.Sprintf("%s resolves to %s, %s", host, strings.TrimSuffix(why.addr, ":"+port), why.advice())
	}
	return why.Error()
}

// Blocked is the package's Blocked with t's allowlist, as the last reload
// set it, and t's resolver.
func (t *Transport) Blocked(ctx context.Context, e *courier.Endpoint) string {
	t.mu.Lock()
	allow := slices.Clone(t.allow)
	t.mu.Unlock()
	return Blocked(ctx, t.opts.Resolver, e, allow)
}
