package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	courier "github.com/courier-gw/courier"
)

// Key is an API key as the server checks it: its name (the "who" of what it
// does), its role and limits, and the SHA-256 of its secret. The secret
// itself is never held.
type Key struct {
	Name string // qualified: a tenant's key is tenant/name
	// Tenant is the tenant the key acts in: its role holds there alone.
	// A key of courier.SystemTenant acts in every tenant and administers
	// them; empty is the default tenant.
	Tenant string
	Role   courier.Role
	Hash   [sha256.Size]byte
	// Routes limits a sender to these routes; empty means every route.
	Routes []string
	// Rate limits how many messages the key may ingest; zero is unlimited.
	Rate courier.Rate
	// MaxSuspended refuses the key's ingest while it has this many
	// suspended messages; 0 is no cap.
	MaxSuspended int
}

// KeyHashPrefix starts every configured key hash.
const KeyHashPrefix = "sha256:"

// HashSecret returns the configured form of a secret's hash:
// "sha256:" and the lowercase hex SHA-256 of the secret.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return KeyHashPrefix + hex.EncodeToString(sum[:])
}

// ParseKeyHash reads a hash written as HashSecret writes it.
func ParseKeyHash(s string) ([sha256.Size]byte, error) {
	var out [sha256.Size]byte
	h, ok := strings.CutPrefix(s, KeyHashPrefix)
	if !ok || len(h) != 2*sha256.Size || strings.ToLower(h) != h {
		return out, fmt.Errorf(`a key hash is "sha256:" and 64 lowercase hex digits`)
	}
	if _, err := hex.Decode(out[:], []byte(h)); err != nil {
		return out, fmt.Errorf(`a key hash is "sha256:" and 64 lowercase hex digits`)
	}
	return out, nil
}

// access is what a request does, in the terms the roles are granted in.
type access int

const (
	accessPublic  access = iota // liveness and readiness: no key needed
	accessIngest                // hand in messages
	accessRead                  // read messages (a sender: its own) and attempts
	accessOperate               // resubmit, discard, bulk operations, endpoints
	accessAdmin                 // reload the configuration
)

func (a access) String() string {
	switch a {
	case accessIngest:
		return "send messages"
	case accessRead:
		return "read messages"
	case accessOperate:
		return "operate (resubmit, discard, endpoints)"
	case accessAdmin:
		return "administer the server"
	}
	return "do this"
}

// allows reports whether role may do a.
func allows(role courier.Role, a access) bool {
	switch role {
	case courier.RoleAdmin:
		return true
	case courier.RoleOperator:
		return a == accessRead || a == accessOperate || a == accessPublic
	case courier.RoleSender:
		return a == accessIngest || a == accessRead || a == accessPublic
	}
	return false
}

// keyring is the set of keys in force, replaced whole on reload.
type keyring struct {
	keys []Key
}

// authenticate finds the key of a request's bearer token. Every configured
// hash is compared, in constant time, whatever matched before: the time an
// answer takes says nothing about which keys exist or how close a guess was.
func (kr *keyring) authenticate(r *http.Request) (*Key, error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return nil, courier.Errorf(courier.CodeUnauthenticated, "this server requires an API key: send it as Authorization: Bearer <secret>")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, courier.Errorf(courier.CodeUnauthenticated, "the Authorization header must be Bearer <secret>")
	}
	return kr.match(token)
}

// match finds the key of a secret, comparing every configured hash in
// constant time.
func (kr *keyring) match(token string) (*Key, error) {
	sum := sha256.Sum256([]byte(token))
	found := -1
	for i := range kr.keys {
		if subtle.ConstantTimeCompare(sum[:], kr.keys[i].Hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return nil, courier.Errorf(courier.CodeUnauthenticated, "the API key is not valid")
	}
	return &kr.keys[found], nil
}

type keyContext struct{}

// keyOf returns the key a request was made with; nil when the server runs
// without keys.
func keyOf(r *http.Request) *Key {
	k, _ := r.Context().Value(keyContext{}).(*Key)
	return k
}

func withKey(r *http.Request, k *Key) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), keyContext{}, k))
}

// authorize checks that the request's key may do a.
func authorize(r *http.Request, a access) error {
	k := keyOf(r)
	if k == nil || allows(k.Role, a) {
		return nil
	}
	return courier.Errorf(courier.CodePermissionDenied, "key %q (role %s) may not %s", k.Name, k.Role, a)
}

// checkRoute refuses a message for a route its sender key is not limited to.
func checkRoute(k *Key, route string) error {
	if k == nil || k.Role != courier.RoleSender || len(k.Routes) == 0 || slices.Contains(k.Routes, route) {
		return nil
	}
	return courier.Errorf(courier.CodePermissionDenied, "key %q may not send to route %q", k.Name, route)
}

// ownsMessage reports whether the request may see message m: a sender key
// sees only the messages it sent.
func ownsMessage(r *http.Request, m *courier.Message) bool {
	k := keyOf(r)
	return k == nil || k.Role != courier.RoleSender || m.Sender == k.Name
}

// actor names who makes a request: the API key's name, or "local" when the
// server runs without keys (and so serves loopback callers only).
func actor(r *http.Request) string {
	if k := keyOf(r); k != nil {
		return k.Name
	}
	return "local"
}

// LoopbackHost reports whether a request names this machine as its host:
// localhost or a loopback address, with or without a port. Without keys
// courier listens on loopback only, so a request that names another host
// came through a name rebound to 127.0.0.1 (DNS rebinding, from a page in a
// browser on this machine) or through a proxy; the API and the dashboard
// refuse it.
func LoopbackHost(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// checkLocalCaller guards a server without keys, where any caller may do
// anything, against what a web page elsewhere can make a browser on this
// machine send: a request that names another host (DNS rebinding), and a
// request that changes something from a page of another origin (a form or
// fetch across sites). The CLI and scripts send neither an Origin nor a
// Sec-Fetch-Site header and name 127.0.0.1 or localhost.
func checkLocalCaller(r *http.Request) error {
	if !LoopbackHost(r) {
		return courier.Errorf(courier.CodePermissionDenied,
			"without API keys this server answers only requests to a loopback address such as 127.0.0.1 or localhost, not to %q", r.Host)
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil // they change nothing, and a page elsewhere cannot read the answer
	}
	// A browser tells where a request comes from: same-site is another
	// origin too (another port of localhost).
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return courier.Errorf(courier.CodePermissionDenied,
			"without API keys this server refuses changes asked for by a page of another origin (Sec-Fetch-Site: %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" && !originOf(o, r.Host) {
		return courier.Errorf(courier.CodePermissionDenied,
			"without API keys this server refuses changes asked for by a page of another origin (%q, not this server at %q)", o, r.Host)
	}
	return nil
}

// originOf reports whether an Origin header names host (as a request's
// Host header has it). "null" (a sandboxed or file page) names none.
func originOf(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}
