package main

import (
	"context"
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// courier signing-keys makes, lists and retires the server's signing keys
// with an admin key; an operator's may not. courier get and courier audit
// show no private key and no proxy password, and what get prints applies
// back as it is.
func TestSigningKeysCommand(t *testing.T) {
	store := sqlitetest.Open(t)
	url := topologyServer(t, store, secretsKey(1), nil)
	id := regexp.MustCompile(`ed25519-[0-9a-f]{16}`)

	out := cliPrints(t, "", as(url, rootSecret, "signing-keys", "rotate"), "signing key ed25519-", "made", "whpk_")
	first := id.FindString(out)
	out = cliPrints(t, "", as(url, rootSecret, "signing-keys", "rotate"), "made")
	second := id.FindString(out)
	if first == "" || second == "" || first == second {
		t.Fatalf("two rotations made %q and %q", first, second)
	}
	out = cliPrints(t, "", as(url, opsSecret, "signing-keys", "list"), first, second)
	if strings.Index(out, first) > strings.Index(out, second) {
		t.Errorf("list is not oldest first:\n%s", out)
	}
	cliPrints(t, "", as(url, opsSecret, "signing-keys", "list", "-o", "json"), `"keys"`, first, second)
	if _, _, err := runCLI(t, "", as(url, opsSecret, "signing-keys", "list", "-o", "yaml")...); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("signing-keys list takes -o yaml: %v", err)
	}
	if _, _, err := runCLI(t, "", as(url, opsSecret, "signing-keys", "rotate")...); err == nil || !strings.Contains(err.Error(), "may not") {
		t.Errorf("an operator rotates: %v", err)
	}
	out = cliPrints(t, "", as(url, rootSecret, "signing-keys", "retire", first), "signing key "+first+" retired", second)
	if strings.Contains(out, "\n"+first) {
		t.Errorf("the retired key is still listed:\n%s", out)
	}

	// An endpoint that signs with v1a through a proxy with a password.
	file := writeTemp(t, "courier.yaml", `endpoints:
  partner:
    transport: http
    url: https://partner.example/hooks
    signature: v1a
    egress: {proxy: "http://courier:pr0xy-pass@proxy.internal:3128"}
routes:
  partner: {endpoints: [partner]}
`)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", file), "2 changed")
	exported := cliPrints(t, "", as(url, rootSecret, "get", "topology"), "    signature: v1a\n", "proxy: http://courier:set@proxy.internal:3128")
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", writeTemp(t, "topology.yaml", exported), "--prune"), "nothing to change")
	audit := cliPrints(t, "", as(url, rootSecret, "audit", "-o", "json"), second)
	objs, _, err := store.TopologyChanges(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.Spec != nil && strings.Contains(string(o.Spec), "private_key") && !strings.Contains(string(o.Spec), `"private_key":"enc:v1:`) {
			t.Errorf("a signing key is not sealed in the store: %s", o.Spec)
		}
	}
	if len(objs) == 0 {
		t.Fatal("the store holds nothing")
	}
	for _, text := range []string{exported, audit, out} {
		for _, secret := range []string{"pr0xy-pass", "private_key\":\""} {
			if strings.Contains(text, secret) && !strings.Contains(text, "private_key\":\"set") {
				t.Errorf("a secret (%q) is shown:\n%s", secret, text)
			}
		}
	}

	// The file-only setup: a key for signing_keys, which parses as one.
	out = cliPrints(t, "", []string{"signing-keys", "new"}, "signing key ed25519-")
	var seed string
	for _, line := range strings.Split(out, "\n") {
		if _, err := base64.StdEncoding.DecodeString(line); err == nil && len(line) == 44 {
			seed = line
		}
	}
	if k, err := httptransport.ParseSigningKey(seed); err != nil || !strings.Contains(out, k.ID) {
		t.Fatalf("signing-keys new printed no key that parses (%v):\n%s", err, out)
	}
}
