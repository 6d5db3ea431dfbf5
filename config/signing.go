package config

import (
	"fmt"
	"strings"
	"time"

	httptransport "github.com/courier-gw/courier/transport/http"
)

// parseSigningKeys reads signing_keys (or COURIER_SIGNING_KEYS): the
// base64 ed25519 keys that sign v1a requests, space-separated, oldest
// first. During a rotation both sign; the old one then goes. Messages
// never quote a key.
func parseSigningKeys(s string) ([]httptransport.SigningKey, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 {
		return nil, fmt.Errorf("is empty: give one or more base64 ed25519 keys, space-separated (`courier signing-keys new` prints one), or leave it out")
	}
	var keys []httptransport.SigningKey
	seen := map[string]bool{}
	for i, f := range fields {
		k, err := httptransport.ParseSigningKey(f)
		if err != nil {
			return nil, fmt.Errorf("key %d of %d: %v", i+1, len(fields), err)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("key %d of %d is key %s again", i+1, len(fields), k.ID)
		}
		seen[k.ID] = true
		keys = append(keys, k)
	}
	return keys, nil
}

// parseProxy reads COURIER_OUTBOUND_PROXY as outbound.proxy.
func parseProxy(s string) (string, error) { return s, httptransport.CheckProxy(s) }

// SigningKey is one of courier's signing keys as the store holds it
// (courier.KindSigningKey): the key, and when it was made, which orders
// the keys of a rotation.
type SigningKey struct {
	Key     httptransport.SigningKey
	Created time.Time
}

// signingKeyFields are the fields of a signing key's spec.
var signingKeyFields = []string{"private_key", "created"}

// signingKey reads one signing key of the store: its name is the id of
// its key (httptransport.KeyID), so that the name a receiver finds in the
// key set is the key's own.
func (d *decoder) signingKey(p pair) *SigningKey {
	path := "signing_keys." + p.key
	o := d.object(p.value, path, p.line, signingKeyFields)
	k := &SigningKey{}
	if o.required("private_key", ": the base64 of the key's ed25519 seed") {
		o.parsed("private_key", func(s string) (err error) {
			k.Key, err = httptransport.ParseSigningKey(s)
			if err == nil && k.Key.ID != p.key {
				err = fmt.Errorf("is the key %s, not %s: a signing key is named by its id", k.Key.ID, p.key)
			}
			return err
		})
	}
	o.parsed("created", func(s string) (err error) {
		k.Created, err = time.Parse(time.RFC3339Nano, s)
		return err
	})
	return k
}
