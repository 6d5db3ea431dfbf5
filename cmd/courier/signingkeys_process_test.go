package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// A server whose topology is in the store signs an endpoint's requests
// with v1a: they verify with the public keys its GET /v1/signing-keys
// serves, with either key while two are in force, and after the old one
// is retired with the new one alone.
func TestSigningKeysProcess(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{})
	p := startNode(t, t.TempDir(), "secrets_key: "+base64.StdEncoding.EncodeToString(secretsKey(3))+"\n")
	id := regexp.MustCompile(`ed25519-[0-9a-f]{16}`)
	first := id.FindString(cliPrints(t, "", []string{"--server", p.url, "signing-keys", "rotate"}, "made"))
	cliPrints(t, "", []string{"--server", p.url, "apply", "-f", writeTemp(t, "topology.yaml", `endpoints:
  partner: {transport: http, url: "`+sk.URL()+`/hook", signature: v1a}
routes:
  partner: {endpoints: [partner]}
`)}, "2 changed")

	// keys fetches the public keys as a receiver does, with no API key.
	keys := func() map[string]ed25519.PublicKey {
		t.Helper()
		var set api.SigningKeySet
		getJSON(t, p.url+"/v1/signing-keys", &set)
		out := map[string]ed25519.PublicKey{}
		for _, k := range set.Keys {
			x, err := base64.RawURLEncoding.DecodeString(k.X)
			if err != nil {
				t.Fatal(err)
			}
			out[k.KeyID] = x
		}
		return out
	}
	// verifiedBy sends a message and returns the ids of the served keys
	// that verify its arrival.
	sent := 0
	verifiedBy := func(served map[string]ed25519.PublicKey) []string {
		t.Helper()
		sent++
		msg := "m-" + string(rune('0'+sent))
		p.create(t, msg, `{"type": "invoice", "route": "partner", "payload": {"n": 1}}`)
		arrivalsByID(t, sk, sent, 30*time.Second)
		var got []string
		for _, a := range sk.All() {
			if a.Header.Get("webhook-id") != msg {
				continue
			}
			text := []byte(msg + "." + a.Header.Get("webhook-timestamp") + "." + string(a.Body))
			for kid, pub := range served {
				for _, e := range strings.Fields(a.Header.Get("webhook-signature")) {
					sig, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(e, "v1a,"))
					if err == nil && strings.HasPrefix(e, "v1a,") && ed25519.Verify(pub, text, sig) {
						got = append(got, kid)
					}
				}
			}
		}
		return got
	}

	if got := verifiedBy(keys()); len(got) != 1 || got[0] != first {
		t.Fatalf("with one key, verified by %v; want %s", got, first)
	}
	second := id.FindString(cliPrints(t, "", []string{"--server", p.url, "signing-keys", "rotate"}, "made"))
	served := keys()
	if len(served) != 2 {
		t.Fatalf("during the rotation %d keys are served", len(served))
	}
	if got := verifiedBy(served); len(got) != 2 {
		t.Fatalf("during the rotation, verified by %v; want %s and %s", got, first, second)
	}
	old := served[first]
	cliPrints(t, "", []string{"--server", p.url, "signing-keys", "retire", first}, "retired")
	served = keys()
	if _, ok := served[first]; ok || len(served) != 1 {
		t.Fatalf("after retiring %s the keys served are %v", first, served)
	}
	served[first] = old // a receiver that still holds the old key
	if got := verifiedBy(served); len(got) != 1 || got[0] != second {
		t.Fatalf("after the rotation, verified by %v; want %s alone", got, second)
	}
}
