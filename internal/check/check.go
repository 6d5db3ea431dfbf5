// Package check holds the checks of configured values that the
// configuration and the transports' settings share, so that a URL or an
// address is judged, and a value quoted back, the same way wherever it is
// written.
package check

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Clip shortens a value quoted back in an error message.
func Clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// HostPort accepts host:port with a numeric port. A listen address may
// leave out the host (all interfaces) and use port 0 (any free port, for
// tests); an address to dial may not.
func HostPort(s string, listen bool) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("%q is not host:port", Clip(s))
	}
	if host == "" && !listen {
		return fmt.Errorf("%q has no host", Clip(s))
	}
	if strings.ContainsAny(host, " \t/") {
		return fmt.Errorf("%q is not host:port", Clip(s))
	}
	lowest := 1
	if listen {
		lowest = 0
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < lowest || n > 65535 {
		return fmt.Errorf("%q: the port must be a number from %d to 65535", Clip(s), lowest)
	}
	return nil
}

// URL accepts an absolute URL with one of the schemes and a host.
func URL(s string, schemes ...string) error {
	u, err := url.Parse(s)
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("not an absolute %s URL", strings.Join(schemes, " or "))
	}
	if strings.ContainsAny(s, " \t") {
		return fmt.Errorf("a URL has no spaces")
	}
	return nil
}
