package topology

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	courier "github.com/courier-gw/courier"
)

// Set is how a secret is shown (in answers, the audit log and exports), and
// what a change writes to keep the stored one: a spec is read back, edited
// and written again without anyone seeing the secret.
const Set = "set"

// sealedPrefix starts a secret encrypted at rest: the version of the
// format, then the id of the key, then base64 of nonce and ciphertext.
const sealedPrefix = "enc:v1:"

// Keyring encrypts secrets for the store with AES-256-GCM under the current
// key, and opens what the current or the old key sealed: while a key is
// rotated, nodes that have the new one still read what the old one wrote.
type Keyring struct {
	current *sealer
	old     *sealer
}

type sealer struct {
	id   string // the first 4 bytes of the key's SHA-256, in hex
	aead cipher.AEAD
}

// NewKeyring returns a keyring for the 32-byte keys (old may be nil; with
// a nil current key, secrets cannot be stored).
func NewKeyring(current, old []byte) (*Keyring, error) {
	k := &Keyring{}
	var err error
	if current != nil {
		if k.current, err = newSealer(current); err != nil {
			return nil, err
		}
	}
	if old != nil {
		if k.old, err = newSealer(old); err != nil {
			return nil, err
		}
	}
	return k, nil
}

func newSealer(key []byte) (*sealer, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("a secrets key is 32 bytes, not %d", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(key)
	return &sealer{id: hex.EncodeToString(sum[:4]), aead: aead}, nil
}

// seal encrypts a secret of one object; the object's kind and name are
// bound to it, so a sealed value copied to another object does not open.
func (k *Keyring) seal(obj, plain string) (string, error) {
	if k == nil || k.current == nil {
		return "", courier.Errorf(courier.CodeInvalidArgument,
			"secrets are stored encrypted, and this server has no secrets_key: set secrets_key (or COURIER_SECRETS_KEY) to 32 random bytes in base64 on every node, e.g. from `courier secrets new-key`")
	}
	nonce := make([]byte, k.current.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("make a nonce: %w", err)
	}
	out := k.current.aead.Seal(nonce, nonce, []byte(plain), []byte(obj))
	return sealedPrefix + k.current.id + ":" + base64.StdEncoding.EncodeToString(out), nil
}

// open decrypts a sealed secret of one object.
func (k *Keyring) open(obj, sealed string) (string, error) {
	rest, ok := strings.CutPrefix(sealed, sealedPrefix)
	id, data, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 {
		return "", fmt.Errorf("a secret of %s is not in the sealed form", obj)
	}
	var s *sealer
	switch {
	case k == nil:
	case k.current != nil && k.current.id == id:
		s = k.current
	case k.old != nil && k.old.id == id:
		s = k.old
	}
	if s == nil {
		return "", fmt.Errorf("a secret of %s was encrypted with a key this node does not have (key id %s): give it as secrets_key, or as secrets_old_key while the key is rotated", obj, id)
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil || len(raw) < s.aead.NonceSize() {
		return "", fmt.Errorf("a secret of %s is damaged", obj)
	}
	plain, err := s.aead.Open(nil, raw[:s.aead.NonceSize()], raw[s.aead.NonceSize():], []byte(obj))
	if err != nil {
		return "", fmt.Errorf("a secret of %s does not open with key %s: it is damaged or belongs to another object", obj, id)
	}
	return string(plain), nil
}

// current reports whether a sealed value is under the current key.
func (k *Keyring) isCurrent(sealed string) bool {
	return k != nil && k.current != nil && strings.HasPrefix(sealed, sealedPrefix+k.current.id+":")
}

// secretField tells what part of a field of a spec is secret: all of a
// signing secret, a password, an OAuth2 client secret, a bearer token,
// the value of a secret header ({secret: ...}) or a private key; the
// password of a URL (brokers, registries, token endpoints and proxies take
// theirs in the URL); nothing of other fields. Specs are
// walked whole, so the same names in nested settings (a lookup route's
// endpoint_template) are covered too.
func secretField(name string) (whole, inURL bool) {
	switch name {
	case "secret", "password", "client_secret", "bearer", "private_key":
		return true, false
	case "url", "token_url", "proxy":
		return false, true
	}
	return false, false
}

// walkSecrets calls fn with each secret value of a spec (decoded JSON),
// replacing it with what fn returns. For a URL, fn gets and gives its
// password alone.
func walkSecrets(v any, fn func(path, secret string) (string, error)) error {
	return walk(v, "", fn)
}

func walk(v any, path string, fn func(path, secret string) (string, error)) error {
	switch v := v.(type) {
	case map[string]any:
		for name, val := range v {
			p := name
			if path != "" {
				p = path + "." + name
			}
			s, isString := val.(string)
			whole, inURL := secretField(name)
			switch {
			case isString && whole && s != "":
				out, err := fn(p, s)
				if err != nil {
					return err
				}
				v[name] = out
			case isString && inURL:
				out, err := urlSecret(s, func(pw string) (string, error) { return fn(p, pw) })
				if err != nil {
					return err
				}
				v[name] = out
			default:
				if err := walk(val, p, fn); err != nil {
					return err
				}
			}
		}
	case []any:
		for i, val := range v {
			if err := walk(val, fmt.Sprintf("%s[%d]", path, i), fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// urlSecret passes the password of a URL through fn. A URL without one,
// or one that does not parse (the spec's checks say why), is left alone.
func urlSecret(s string, fn func(string) (string, error)) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s, nil
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" {
		return s, nil
	}
	out, err := fn(pw)
	if err != nil {
		return "", err
	}
	u.User = url.UserPassword(u.User.Username(), out)
	return u.String(), nil
}

// redact shows every secret of a spec as Set.
func redact(spec any) {
	_ = walkSecrets(spec, func(string, string) (string, error) { return Set, nil })
}

// restore gives each secret written as Set the stored one at the same
// place; a Set with nothing stored there is a mistake worth saying.
func restore(section, name string, spec, stored any) error {
	return walkSecrets(spec, func(path, s string) (string, error) {
		if s != Set {
			return s, nil
		}
		if old, ok := secretAt(stored, path); ok {
			return old, nil
		}
		return "", courier.Errorf(courier.CodeInvalidArgument,
			"%s.%s.%s: %q stands for the stored secret, and there is none: give the secret itself", section, name, path, Set)
	})
}

// secretAt finds the secret at a path of a stored spec.
func secretAt(stored any, path string) (string, bool) {
	var found string
	ok := false
	_ = walkSecrets(stored, func(p, s string) (string, error) {
		if p == path {
			found, ok = s, true
		}
		return s, nil
	})
	return found, ok
}
