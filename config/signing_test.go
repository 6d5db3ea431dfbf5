package config

import (
	"testing"
)

// signing_keys (or COURIER_SIGNING_KEYS) gives the keys of the file-only
// setup, oldest first; outbound.proxy (or COURIER_OUTBOUND_PROXY) the
// default proxy; an http endpoint chooses v1a and its own proxy. Bad
// values name file, line and field, and never quote a key or a password.
func TestSigningKeysAndProxy(t *testing.T) {
	t.Parallel()
	endpoints := "endpoints:\n  hook: {transport: http, url: 'https://example.org/h'}\nroutes:\n  r: {endpoints: [hook]}\n"
	tests := []struct {
		name  string
		file  string
		env   map[string]string
		keys  int
		proxy string
		want  []string
	}{
		{"two keys", "signing_keys: " + key32A + " whsk_" + key32B + "\n" + endpoints, nil, 2, "", nil},
		{"from the environment", endpoints, map[string]string{"COURIER_SIGNING_KEYS": key32A}, 1, "", nil},
		{"a short key", "signing_keys: " + key32A + " " + key16 + "\n" + endpoints, nil, 0, "",
			[]string{"c.yaml:1: signing_keys: key 2 of 2: a signing key is the base64 of a 32-byte ed25519 seed, not of 16 bytes"}},
		{"not base64", "signing_keys: hunter2!\n" + endpoints, nil, 0, "",
			[]string{"c.yaml:1: signing_keys: key 1 of 1: a signing key is the base64 of a 32-byte ed25519 seed, and this is not base64"}},
		{"a key twice", "signing_keys: " + key32A + " " + key32A + "\n" + endpoints, nil, 0, "",
			[]string{"c.yaml:1: signing_keys: key 2 of 2 is key ed25519-9ab5f0efe9ea33aa again"}},
		{"with the topology in the store", "signing_keys: " + key32A + "\n", nil, 0, "",
			[]string{"c.yaml:1: signing_keys: the topology is in the store, which holds the signing keys too: make and rotate them with `courier signing-keys rotate`"}},
		{"default proxy", "outbound: {proxy: 'http://u:hunter2@proxy.internal:3128'}\n" + endpoints, nil, 0, "http://u:hunter2@proxy.internal:3128", nil},
		{"proxy from the environment", endpoints, map[string]string{"COURIER_OUTBOUND_PROXY": "http://proxy.internal:3128"}, 0, "http://proxy.internal:3128", nil},
		{"https proxy", "outbound: {proxy: 'https://u:hunter2@proxy.internal'}\n" + endpoints, nil, 0, "",
			[]string{"c.yaml:1: outbound.proxy: must be the http:// URL of a forward proxy (http://[user:password@]host:port)"}},
		{"proxy with a path", "outbound: {proxy: 'http://proxy.internal/x?hunter2'}\n" + endpoints, nil, 0, "",
			[]string{"c.yaml:1: outbound.proxy: is a proxy's address: http://[user:password@]host:port, without a path or query"}},
		{"an endpoint's v1a and proxy", "endpoints:\n  hook: {transport: http, url: 'https://example.org/h', signature: v1a, egress: {proxy: 'http://u:hunter2@p:1'}}\nroutes:\n  r: {endpoints: [hook]}\n", nil, 0, "", nil},
		{"v1a with a secret", "endpoints:\n  hook: {transport: http, url: 'https://example.org/h', secret: hunter2, signature: v1a}\nroutes:\n  r: {endpoints: [hook]}\n", nil, 0, "",
			[]string{"c.yaml:2: endpoints.hook.signature: v1a signs with courier's own keys, which the receiver verifies with the public keys of GET /v1/signing-keys: leave secret out"}},
		{"v1 without a secret", "endpoints:\n  hook: {transport: http, url: 'https://example.org/h', signature: v1}\nroutes:\n  r: {endpoints: [hook]}\n", nil, 0, "",
			[]string{"c.yaml:2: endpoints.hook.signature: v1 signs with the endpoint's secret, and it has none: add secret, or use v1a to sign with courier's own keys"}},
		{"an unknown scheme", "endpoints:\n  hook: {transport: http, url: 'https://example.org/h', signature: v2}\nroutes:\n  r: {endpoints: [hook]}\n", nil, 0, "",
			[]string{`c.yaml:2: endpoints.hook.signature: must be v1 (HMAC with the endpoint's secret) or v1a (ed25519 with courier's signing keys), not "v2"`}},
		{"an endpoint's bad proxy", "endpoints:\n  hook: {transport: http, url: 'https://example.org/h', egress: {proxy: 'socks5://u:hunter2@p:1'}}\nroutes:\n  r: {endpoints: [hook]}\n", nil, 0, "",
			[]string{"c.yaml:2: endpoints.hook.egress.proxy: must be the http:// URL of a forward proxy (http://[user:password@]host:port)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := parseKeepingSecrets(t, tt.file, tt.env, tt.want, key32A, key32B, key16, "hunter2")
			if c == nil {
				return
			}
			if len(c.SigningKeys) != tt.keys || c.Outbound.Proxy != tt.proxy {
				t.Errorf("%d keys, proxy %q; want %d, %q", len(c.SigningKeys), c.Outbound.Proxy, tt.keys, tt.proxy)
			}
		})
	}
}
