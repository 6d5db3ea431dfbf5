package http

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
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

// NewSigningKey makes a fresh ed25519 key.
func NewSigningKey() (SigningKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return SigningKey{}, err
	}
	return SigningKey{ID: KeyID(priv.Public().(ed25519.PublicKey)), Private: priv}, nil
}

// KeyID is the id of the key whose public half is pub: "ed25519-" and the
// first 8 bytes of its SHA-256, in hex. The same key has the same id
// wherever it is given (the store, the configuration).
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519-" + hex.EncodeToString(sum[:8])
}

// ParseSigningKey reads a private key as the configuration and the store
// give it: the base64 of its 32-byte seed (or of the 64-byte private key
// whose first half the seed is), with or without Standard Webhooks'
// "whsk_" prefix. The error never quotes the key.
func ParseSigningKey(s string) (SigningKey, error) {
	enc := strings.TrimPrefix(strings.TrimSpace(s), "whsk_")
	raw, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		if raw, err = base64.RawStdEncoding.DecodeString(enc); err != nil {
			return SigningKey{}, fmt.Errorf("a signing key is the base64 of a 32-byte ed25519 seed, and this is not base64")
		}
	}
	var priv ed25519.PrivateKey
	switch len(raw) {
	case ed25519.SeedSize:
		priv = ed25519.NewKeyFromSeed(raw)
	case ed25519.PrivateKeySize:
		priv = ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize])
	default:
		return SigningKey{}, fmt.Errorf("a signing key is the base64 of a 32-byte ed25519 seed, not of %d bytes", len(raw))
	}
	return SigningKey{ID: KeyID(priv.Public().(ed25519.PublicKey)), Private: priv}, nil
}

// Seed is the key as ParseSigningKey reads it: the base64 of its seed.
func (k SigningKey) Seed() string { return base64.StdEncoding.EncodeToString(k.Private.Seed()) }

// Public is the key's public half.
func (k SigningKey) Public() ed25519.PublicKey { return k.Private.Public().(ed25519.PublicKey) }

// PublicKey is a signing key's public half as GET /v1/signing-keys serves
// it: a JSON Web Key (RFC 8037, kty OKP, crv Ed25519), with the key also in
// the Standard Webhooks form (whpk_<base64>) that its libraries take.
type PublicKey struct {
	KeyID     string `json:"kid"`
	Type      string `json:"kty"`
	Curve     string `json:"crv"`
	X         string `json:"x"`
	Use       string `json:"use"`
	Algorithm string `json:"alg"`
	// Webhooks is the key as Standard Webhooks verifiers take it.
	Webhooks string `json:"whpk"`
}

// PublicKey returns the key's public half as GET /v1/signing-keys serves it.
func (k SigningKey) PublicKey() PublicKey {
	pub := k.Public()
	return PublicKey{KeyID: k.ID, Type: "OKP", Curve: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub),
		Use: "sig", Algorithm: "EdDSA", Webhooks: "whpk_" + base64.StdEncoding.EncodeToString(pub)}
}
