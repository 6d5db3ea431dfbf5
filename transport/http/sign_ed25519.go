package http

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/courier-gw/courier"
)

// The signature schemes of Standard Webhooks an endpoint chooses among with
// its signature field.
const (
	// SignatureV1 is HMAC-SHA256 with the endpoint's shared secret: the
	// default when the endpoint has a secret.
	SignatureV1 = "v1"
	// SignatureV1a is ed25519 with courier's own signing keys, whose public
	// halves GET /v1/signing-keys serves: the receiver holds no secret.
	SignatureV1a = "v1a"
)

// SigningKey is one of courier's ed25519 keys that sign the requests of the
// endpoints whose signature is v1a. While keys are rotated, every key of
// the set signs, and the header carries one signature of each.
type SigningKey struct {
	ID      string // the key's id, as GET /v1/signing-keys names it
	Private ed25519.PrivateKey
}

// SetSigningKeys replaces the keys that sign v1a requests, oldest first.
// An endpoint that asks for v1a while there are none fails its attempts,
// class transport, until a key is made.
func (t *Transport) SetSigningKeys(keys []SigningKey) {
	keys = slices.Clone(keys)
	t.signing.Store(&keys)
}

// signingKeys returns the keys in force.
func (t *Transport) signingKeys() []SigningKey {
	if k := t.signing.Load(); k != nil {
		return *k
	}
	return nil
}

// decodeSignature reads an endpoint's signature field: which Standard
// Webhooks scheme signs its requests. v1 needs the secret; v1a takes none.
func decodeSignature(f courier.SettingsFields, h *Settings) {
	l := f.String("signature", &h.Signature)
	switch {
	case l == 0:
	case h.Signature == SignatureV1 && len(h.Secrets) == 0:
		f.ErrorAt(l, f.Field("signature"), "v1 signs with the endpoint's secret, and it has none: add secret, or use v1a to sign with courier's own keys")
	case h.Signature == SignatureV1a && len(h.Secrets) > 0:
		f.ErrorAt(l, f.Field("signature"), "v1a signs with courier's own keys, which the receiver verifies with the public keys of GET /v1/signing-keys: leave secret out")
	case h.Signature != SignatureV1 && h.Signature != SignatureV1a:
		f.ErrorAt(l, f.Field("signature"), "must be v1 (HMAC with the endpoint's secret) or v1a (ed25519 with courier's signing keys), not %q", clip(h.Signature, 32))
	}
}

// signV1a returns the webhook-signature value of the v1a scheme: one
// "v1a,<base64 ed25519 signature>" per key, space-separated, over
// "<id>.<timestamp>.<body>" as Standard Webhooks specifies.
func signV1a(keys []SigningKey, id, ts string, body []byte) (string, error) {
	if len(keys) == 0 {
		return "", fmt.Errorf("signature is v1a, and courier has no signing key: make one with `courier signing-keys rotate` (or give signing_keys in the server's configuration)")
	}
	msg := make([]byte, 0, len(id)+len(ts)+2+len(body))
	msg = append(append(append(append(append(msg, id...), '.'), ts...), '.'), body...)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("v1a,")
		b.WriteString(base64.StdEncoding.EncodeToString(ed25519.Sign(k.Private, msg)))
	}
	return b.String(), nil
}

// signBlobV1a is signV1a for a blob. Ed25519 signs a message whole, not a
// stream, so the blob is read into memory for it, within timeout.
func signBlobV1a(keys []SigningKey, id, ts string, blob *blobSource, timeout time.Duration) (string, error) {
	if len(keys) == 0 {
		return signV1a(nil, id, ts, nil)
	}
	r, err := blob.open(time.Now().Add(timeout))
	if err != nil {
		return "", err
	}
	defer r.Close()
	body, err := io.ReadAll(r)
	if err != nil {
		return "", &payloadError{err: err}
	}
	return signV1a(keys, id, ts, body)
}
