package topology

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"time"

	courier "github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// SigningKeys returns courier's signing keys that the store holds, oldest
// first: every one of them signs the v1a requests of http endpoints, so
// that during a rotation the header carries a signature of the old key
// and one of the new.
func (c *Keeper) SigningKeys() []httptransport.SigningKey {
	if k := c.signing.Load(); k != nil {
		return *k
	}
	return nil
}

// signingOf returns the signing keys among entries, oldest first.
func signingOf(entries map[objectKey]*entry) []httptransport.SigningKey {
	type made struct {
		key     httptransport.SigningKey
		created time.Time
	}
	var all []made
	for k, e := range entries {
		if k.kind == courier.KindSigningKey && e.decoded != nil && e.decoded.SigningKey != nil {
			all = append(all, made{e.decoded.SigningKey.Key, e.decoded.SigningKey.Created})
		}
	}
	sort.Slice(all, func(i, j int) bool {
		if !all[i].created.Equal(all[j].created) {
			return all[i].created.Before(all[j].created)
		}
		return all[i].key.ID < all[j].key.ID
	})
	out := make([]httptransport.SigningKey, len(all))
	for i, m := range all {
		out[i] = m.key
	}
	return out
}

// RotateSigningKey makes a new signing key and keeps it in the store, its
// private half sealed: from then on it signs beside the keys there are,
// until those are retired. The change is recorded in the audit log (as
// the creation of a signing_key, its private key shown as "set").
func (c *Keeper) RotateSigningKey(ctx context.Context, who string) (httptransport.SigningKey, error) {
	if c.file != "" {
		return httptransport.SigningKey{}, courier.Errorf(courier.CodeFailedPrecondition,
			"the topology is in %s, and so are the signing keys (signing_keys): make one with `courier signing-keys new` and add it there", c.file)
	}
	k, err := httptransport.NewSigningKey()
	if err != nil {
		return httptransport.SigningKey{}, err
	}
	spec, err := json.Marshal(map[string]string{"private_key": k.Seed(),
		"created": c.opts.Clock.Now().UTC().Format(time.RFC3339Nano)})
	if err != nil {
		return httptransport.SigningKey{}, err
	}
	if _, _, err := c.Put(ctx, who, courier.KindSigningKey, k.ID, spec, 0); err != nil {
		return httptransport.SigningKey{}, err
	}
	return k, nil
}

// RetireSigningKey removes a signing key: it signs no more, and
// GET /v1/signing-keys no longer serves it. The last key is kept while an
// endpoint signs with v1a, whose requests would fail without one.
func (c *Keeper) RetireSigningKey(ctx context.Context, who, id string) error {
	if c.file != "" {
		return courier.Errorf(courier.CodeFailedPrecondition,
			"the topology is in %s, and so are the signing keys (signing_keys): remove the key there", c.file)
	}
	keys := c.SigningKeys()
	found := false
	for _, k := range keys {
		found = found || k.ID == id
	}
	if !found {
		return courier.Errorf(courier.CodeNotFound, "no signing key %q", id)
	}
	if len(keys) == 1 {
		for _, e := range c.Topology().Endpoints {
			if s, ok := e.Settings.(*httptransport.Settings); ok && s.Signature == httptransport.SignatureV1a {
				return courier.Errorf(courier.CodeFailedPrecondition,
					"%s is the last signing key, and endpoint %s signs with v1a: make a new key first (`courier signing-keys rotate`)", id, e.Name)
			}
		}
	}
	return c.Delete(ctx, who, courier.KindSigningKey, id, -1)
}

// SetFileSigningKeys puts in force the signing keys of the configuration
// (signing_keys), in file mode, where the store holds none.
func (c *Keeper) SetFileSigningKeys(keys []httptransport.SigningKey) {
	keys = slices.Clone(keys)
	c.signing.Store(&keys)
}
