package http

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
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
	return fmt.Sprintf("%s is %s, which endpoints may not reach: allow it with allow_networks on the endpoint or outbound.allow_networks", e.addr, e.reason)
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
