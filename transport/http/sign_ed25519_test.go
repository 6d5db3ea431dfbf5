package http_test

import (
	"crypto/ed25519"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/courier-gw/courier"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// verifyV1a checks a request's webhook-signature as a Standard Webhooks
// receiver does for the v1a scheme: ed25519 over "<webhook-id>.<webhook-timestamp>.<body>",
// any of the space-separated "v1a,<base64>" entries verifying with pub.
// No Go library of Standard Webhooks that courier can depend on verifies
// v1a (the reference library knows v1 only), so the test follows the
// specification with crypto/ed25519. It returns how many entries there are.
func verifyV1a(t *testing.T, h http.Header, body []byte, pub ed25519.PublicKey) (ok bool, entries int) {
	t.Helper()
	msg := []byte(h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + string(body))
	for _, e := range strings.Fields(h.Get("webhook-signature")) {
		version, sig, found := strings.Cut(e, ",")
		if !found || version != "v1a" {
			t.Fatalf("signature entry %q is not v1a", e)
		}
		entries++
		raw, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			t.Fatalf("signature %q is not base64: %v", sig, err)
		}
		if ed25519.Verify(pub, msg, raw) {
			ok = true
		}
	}
	return ok, entries
}

func newKey(t *testing.T, id string) httptransport.SigningKey {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	return httptransport.SigningKey{ID: id, Private: priv}
}

// TestSignV1a: an endpoint whose signature is v1a is signed with
// courier's keys: with both while they are rotated, then with the new one
// alone.
func TestSignV1a(t *testing.T) {
	var got proxied
	var bodies [][]byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.mu.Lock()
		bodies = append(bodies, b)
		got.mu.Unlock()
		got.handler(w, r)
	}))
	defer srv.Close()
	lastBody := func() []byte {
		got.mu.Lock()
		defer got.mu.Unlock()
		return bodies[len(bodies)-1]
	}
	tr := newTransport(t, httptransport.Options{})
	e := endpoint("v1a", srv.URL)
	e.Settings.(*httptransport.Settings).Signature = httptransport.SignatureV1a

	res := send(t, tr, e, message())
	wantClass(t, res, courier.ClassTransport)
	wantError(t, res, "no signing key")

	old, next := newKey(t, "old"), newKey(t, "new")
	pub := func(k httptransport.SigningKey) ed25519.PublicKey { return k.Private.Public().(ed25519.PublicKey) }
	tr.SetSigningKeys([]httptransport.SigningKey{old})
	wantClass(t, send(t, tr, e, message()), "")
	_, h := got.last()
	if ok, n := verifyV1a(t, h, lastBody(), pub(old)); !ok || n != 1 {
		t.Fatalf("one key: verifies %v with %d entries (%q)", ok, n, h.Get("webhook-signature"))
	}

	tr.SetSigningKeys([]httptransport.SigningKey{old, next})
	wantClass(t, send(t, tr, e, message()), "")
	_, h = got.last()
	for _, k := range []httptransport.SigningKey{old, next} {
		if ok, n := verifyV1a(t, h, lastBody(), pub(k)); !ok || n != 2 {
			t.Fatalf("rotation: key %s verifies %v with %d entries (%q)", k.ID, ok, n, h.Get("webhook-signature"))
		}
	}

	tr.SetSigningKeys([]httptransport.SigningKey{next})
	wantClass(t, send(t, tr, e, message()), "")
	_, h = got.last()
	if ok, n := verifyV1a(t, h, lastBody(), pub(next)); !ok || n != 1 {
		t.Fatalf("after the rotation the new key verifies %v with %d entries", ok, n)
	}
	if ok, _ := verifyV1a(t, h, lastBody(), pub(old)); ok {
		t.Fatal("after the rotation the retired key still verifies")
	}
	// A changed body does not verify.
	if ok, _ := verifyV1a(t, h, []byte(`{"total":43}`), pub(next)); ok {
		t.Fatal("a changed body verifies")
	}
}
