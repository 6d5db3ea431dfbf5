package api_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/courier-gw/courier/internal/testkit/syncbuf"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/topology"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// signingServer is an API over a store-held topology whose secrets are
// sealed, with its log in a buffer, and the http transport the node would
// deliver with, given the keys as the server gives them.
type signingServer struct {
	*testServer
	cat *topology.Keeper
	tr  *httptransport.Transport
	log *syncbuf.Buffer
}

func newSigningServer(t *testing.T) *signingServer {
	t.Helper()
	store := sqlitetest.Open(t)
	keyring, err := topology.NewKeyring(bytes.Repeat([]byte{7}, 32), nil)
	if err != nil {
		t.Fatal(err)
	}
	log := &syncbuf.Buffer{}
	logger := slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	tr := httptransport.New(httptransport.Options{Logger: logger,
		AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(tr.Close)
	var srv *api.Server
	var cat *topology.Keeper
	cat, err = topology.Open(context.Background(), topology.Options{Store: store, Keyring: keyring, Logger: logger,
		OnChange: func(tp *courier.Topology) {
			if srv != nil {
				srv.SetTopology(tp)
				tr.SetSigningKeys(cat.SigningKeys())
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv = api.NewServer(api.Options{Store: store, Topology: cat.Topology(), Objects: cat, SigningKeys: cat,
		Keys: tenantKeys(t), Clock: courier.SystemClock{}, Logger: logger})
	ts := &testServer{store: store, Server: httptest.NewServer(validated(t, srv))}
	t.Cleanup(ts.Close)
	for _, tenant := range []string{"acme", "beta"} {
		if status, body, _ := ts.callAs(t, "system/admin", "PUT", "/v1/tenants/"+tenant, `{"weight": 1}`); status != http.StatusCreated {
			t.Fatalf("the system creates tenant %s: %d %s", tenant, status, body)
		}
	}
	return &signingServer{testServer: ts, cat: cat, tr: tr, log: log}
}

// publicKeys fetches GET /v1/signing-keys as a receiver does: with no key.
func (s *signingServer) publicKeys(t *testing.T) []httptransport.PublicKey {
	t.Helper()
	status, body, h := s.call(t, "GET", "/v1/signing-keys", "")
	if status != http.StatusOK || !strings.Contains(h.Get("Cache-Control"), "max-age") {
		t.Fatalf("GET /v1/signing-keys without a key: %d %s %v", status, body, h)
	}
	return decode[api.SigningKeySet](t, body).Keys
}

// delivered sends one message to a receiver that verifies it as a
// Standard Webhooks receiver of v1a does, with the JWK set it was given;
// it returns the ids of the keys that verify it.
func (s *signingServer) delivered(t *testing.T, keys []httptransport.PublicKey) []string {
	t.Helper()
	var mu sync.Mutex
	var verified []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		msg := []byte(r.Header.Get("webhook-id") + "." + r.Header.Get("webhook-timestamp") + "." + string(body))
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			x, err := base64.RawURLEncoding.DecodeString(k.X)
			if err != nil || k.Type != "OKP" || k.Curve != "Ed25519" {
				t.Errorf("key %s is not an Ed25519 JWK: %+v", k.KeyID, k)
				continue
			}
			for _, e := range strings.Fields(r.Header.Get("webhook-signature")) {
				sig, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(e, "v1a,"))
				if strings.HasPrefix(e, "v1a,") && ed25519.Verify(ed25519.PublicKey(x), msg, sig) {
					verified = append(verified, k.KeyID)
				}
			}
		}
	}))
	defer receiver.Close()
	e := &courier.Endpoint{Name: "hook", Transport: courier.TransportHTTP,
		Settings: &httptransport.Settings{URL: receiver.URL, Signature: httptransport.SignatureV1a}}
	res := s.tr.Send(context.Background(), courier.Delivery{Endpoint: e, Attempt: 1,
		Message: &courier.Message{ID: "m-1", Type: "invoice", Payload: []byte(`{"total":42}`), ContentType: "application/json"}})
	if res.Class != "" {
		t.Fatalf("delivery: %s: %s", res.Class, res.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	return verified
}

// TestSigningKeys: the system's admin key makes keys and retires them;
// GET /v1/signing-keys serves their public halves to anyone; deliveries
// verify with what it serves: during a rotation with either key, after it
// with the new one alone. Each change is in the audit log, and the
// private keys are nowhere to be read: not in answers, the audit log, the
// log, nor unsealed in the store.
func TestSigningKeys(t *testing.T) {
	s := newSigningServer(t)
	if keys := s.publicKeys(t); len(keys) != 0 {
		t.Fatalf("a new server serves keys: %+v", keys)
	}

	status, body, _ := s.callAs(t, "system/admin", "POST", "/v1/signing-keys/rotate", "")
	if status != http.StatusCreated {
		t.Fatalf("rotate: %d %s", status, body)
	}
	first := decode[api.RotatedKey](t, body).Key
	keys := s.publicKeys(t)
	if len(keys) != 1 || keys[0] != first || !strings.HasPrefix(first.Webhooks, "whpk_") {
		t.Fatalf("after the first key: %+v (made %+v)", keys, first)
	}
	if got := s.delivered(t, keys); len(got) != 1 || got[0] != first.KeyID {
		t.Fatalf("with one key, verified by %v", got)
	}

	// An endpoint that signs with v1a keeps its last key.
	if status, body, _ := s.callAs(t, "system/admin", "PUT", "/v1/endpoints/signed",
		`{"transport": "http", "url": "http://127.0.0.1:9/hook", "signature": "v1a", "egress": {"proxy": "http://courier:pr0xy-pass@127.0.0.1:3128"}}`); status != http.StatusCreated {
		t.Fatalf("put an endpoint that signs with v1a: %d %s", status, body)
	}
	status, body, _ = s.callAs(t, "system/admin", "DELETE", "/v1/signing-keys/"+first.KeyID, "")
	if status != http.StatusPreconditionFailed || !strings.Contains(string(body), "signed") {
		t.Fatalf("retire the last key while an endpoint signs with v1a: %d %s", status, body)
	}

	status, body, _ = s.callAs(t, "system/admin", "POST", "/v1/signing-keys/rotate", "")
	if status != http.StatusCreated {
		t.Fatalf("rotate: %d %s", status, body)
	}
	second := decode[api.RotatedKey](t, body).Key
	keys = s.publicKeys(t)
	if len(keys) != 2 || keys[0] != first || keys[1] != second {
		t.Fatalf("during the rotation (oldest first): %+v", keys)
	}
	got := s.delivered(t, keys)
	if len(got) != 2 || got[0] != first.KeyID || got[1] != second.KeyID {
		t.Fatalf("during the rotation, verified by %v; want both keys", got)
	}
	if got := s.delivered(t, []httptransport.PublicKey{second}); len(got) != 1 {
		t.Fatalf("a receiver with the new key alone: verified by %v", got)
	}

	status, body, _ = s.callAs(t, "system/admin", "DELETE", "/v1/signing-keys/"+first.KeyID, "")
	if status != http.StatusOK {
		t.Fatalf("retire the old key: %d %s", status, body)
	}
	if left := decode[api.SigningKeySet](t, body).Keys; len(left) != 1 || left[0] != second {
		t.Fatalf("left after retiring: %+v", left)
	}
	if got := s.delivered(t, []httptransport.PublicKey{first, second}); len(got) != 1 || got[0] != second.KeyID {
		t.Fatalf("after the rotation, verified by %v; want the new key alone", got)
	}
	status, _, _ = s.callAs(t, "system/admin", "DELETE", "/v1/signing-keys/"+first.KeyID, "")
	if status != http.StatusNotFound {
		t.Fatalf("retire a retired key: %d", status)
	}

	// Tenants' keys, of any role, may neither make nor retire keys: the
	// paths are not theirs (404), and nothing changes.
	for _, key := range []string{"acme/admin", "beta/admin", "acme/sender"} {
		if status, body, _ := s.callAs(t, key, "POST", "/v1/signing-keys/rotate", ""); status != http.StatusNotFound && status != http.StatusForbidden {
			t.Errorf("%s rotates: %d %s", key, status, body)
		}
		if status, body, _ := s.callAs(t, key, "DELETE", "/v1/signing-keys/"+second.KeyID, ""); status != http.StatusNotFound && status != http.StatusForbidden {
			t.Errorf("%s retires: %d %s", key, status, body)
		}
	}
	if keys := s.publicKeys(t); len(keys) != 1 || keys[0] != second {
		t.Fatalf("after the tenants tried: %+v", keys)
	}

	// The audit log has each change, as the system's admin made it.
	status, body, _ = s.callAs(t, "system/admin", "GET", "/v1/audit?object=signing_key", "")
	if status != http.StatusOK {
		t.Fatalf("audit: %d %s", status, body)
	}
	var audit struct {
		Entries []struct {
			Action, Subject, Who string
		} `json:"entries"`
	}
	if err := json.Unmarshal(body, &audit); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, e := range audit.Entries {
		seen = append(seen, e.Action+" "+e.Subject+" by "+e.Who)
	}
	want := []string{"delete " + first.KeyID + " by system/admin", "create " + second.KeyID + " by system/admin", "create " + first.KeyID + " by system/admin"}
	if strings.Join(seen, "; ") != strings.Join(want, "; ") {
		t.Fatalf("audit of the signing keys: %v; want %v", seen, want)
	}

	// No private key, nor the proxy's password, anywhere to be read.
	var secrets []string
	for _, k := range s.cat.SigningKeys() {
		secrets = append(secrets, k.Seed(), base64.StdEncoding.EncodeToString(k.Private))
	}
	if len(secrets) == 0 {
		t.Fatal("the keeper holds no key")
	}
	secrets = append(secrets, "pr0xy-pass")
	var shown []string
	for _, path := range []string{"/v1/audit", "/v1/audit?object=signing_key", "/v1/audit?object=endpoint", "/v1/topology", "/v1/endpoints/signed", "/v1/signing-keys"} {
		_, body, _ := s.callAs(t, "system/admin", "GET", path, "")
		shown = append(shown, path+": "+string(body))
	}
	_, body, _ = s.callAs(t, "system/admin", "GET", "/v1/endpoints/signed", "")
	if !strings.Contains(string(body), `"signature":"v1a"`) || !strings.Contains(string(body), "courier:set@127.0.0.1:3128") {
		t.Errorf("the endpoint as read: %s", body)
	}
	objs, _, err := s.store.TopologyChanges(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		shown = append(shown, "stored "+string(o.Kind)+" "+o.Name+": "+string(o.Spec))
		if o.Kind == courier.KindSigningKey && o.Spec != nil && !strings.Contains(string(o.Spec), `"private_key":"enc:v1:`) {
			t.Errorf("signing key %s is not sealed in the store: %s", o.Name, o.Spec)
		}
	}
	shown = append(shown, "log: "+s.log.String())
	for _, text := range shown {
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Errorf("a secret is shown in %s", truncate(text))
			}
		}
	}
}
