package engine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/httpcheck"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/storetest"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// claimSecret is the Standard Webhooks secret of the claim-check tests'
// endpoint: the receiver checks the notice's signature with it.
const claimSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// claimRig is what a claim check goes through: a store, courier's API on
// it over real HTTP (where receivers fetch), an engine whose public URL is
// that API, and a real receiver.
type claimRig struct {
	store courier.Store
	sink  *sink.Sink
	api   *httptest.Server
	clock *clocktest.Clock // the API's: it decides when a URL has expired
	eng   *engine.Engine
	top   *courier.Topology
}

func newClaimRig(t *testing.T, store courier.Store) *claimRig {
	t.Helper()
	t.Cleanup(func() { store.Close() })
	sk, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sk.Close)
	r := &claimRig{store: store, sink: sk, clock: clocktest.New(time.Now())}
	r.top = &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"scans": {Name: "scans", Transport: courier.TransportHTTP, Timeout: 5 * time.Second, MaxConcurrency: 4,
			Settings:   &httptransport.Settings{URL: sk.URL() + "/scans", Method: http.MethodPost, Secrets: []string{claimSecret}},
			ClaimCheck: &courier.ClaimCheck{Above: 1 << 20, TTL: time.Hour}}},
		Routes:   map[string]*courier.Route{"scans": {Name: "scans", Endpoints: []string{"scans"}, Strategy: courier.StrategySingle}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	r.top.Prepare()
	r.api = httptest.NewServer(api.NewServer(api.Options{Store: store, Topology: r.top, Clock: r.clock}))
	t.Cleanup(r.api.Close)
	tr := httptransport.New(httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	r.eng = engine.New(engine.Options{Store: store, Topology: r.top, PublicURL: r.api.URL + "/",
		Senders:      map[courier.Transport]courier.Sender{courier.TransportHTTP: tr},
		PollInterval: 20 * time.Millisecond, TimerInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond,
		RandFunc: func() float64 { return 0.5 }})
	t.Cleanup(tr.Close) // once the engine has stopped
	startstoptest.Start(t, r.eng)
	return r
}

// send stores a message of the payload on route scans, as a blob when it
// is larger than courier.InlineMax, and tells the engine.
func (r *claimRig) send(t *testing.T, id string, payload []byte) {
	t.Helper()
	storetest.IngestSpooled(t, r.store, &courier.Message{ID: id, Type: "scan", Route: "scans", ContentType: "application/pdf"}, payload)
	r.eng.Due([]string{"scans"})
}

func (r *claimRig) waitDelivered(t *testing.T, id string) *courier.Message {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := r.store.Message(context.Background(), id)
		if err == nil && m.State == courier.StateDelivered {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %+v (%v), want delivered", id, m, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// checkWebhookSignature fails t unless a carries a Standard Webhooks
// signature of its body by claimSecret.
func checkWebhookSignature(t *testing.T, a sink.Arrival) {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(claimSecret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(a.Header.Get("webhook-id") + "." + a.Header.Get("webhook-timestamp") + "."))
	mac.Write(a.Body)
	if got, want := a.Header.Get("webhook-signature"), "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("webhook-signature %q, want %q over the notice", got, want)
	}
}

// TestClaimCheckDelivers sends a payload of 3 MiB to an endpoint whose
// claim check takes payloads over 1 MiB: the receiver gets a signed notice
// and the attempt is delivered when it takes it; the receiver fetches the
// payload through the notice's URL from courier's API, byte for byte, and
// the fetch is recorded. The URL changed, or after it expired, is refused.
// A payload under the threshold goes as it is.
func TestClaimCheckDelivers(t *testing.T) {
	testClaimCheckDelivers(t, mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db")))
}

// TestClaimCheckDeliversOnPostgres is TestClaimCheckDelivers on the
// PostgreSQL store, whose blobs are large objects.
func TestClaimCheckDeliversOnPostgres(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatalf("open the postgres store: %v", err)
	}
	testClaimCheckDelivers(t, s)
}

func testClaimCheckDelivers(t *testing.T, store courier.Store) {
	r := newClaimRig(t, store)
	payload := make([]byte, 3<<20+4321)
	for i := range payload {
		payload[i] = byte(i*131) ^ byte(i>>9)
	}
	sum := sha256.Sum256(payload)
	digest := hex.EncodeToString(sum[:])
	small := []byte("%PDF-1.7 a small one")
	started := time.Now()
	r.send(t, "scan-1", payload)
	r.send(t, "scan-2", small)
	r.waitDelivered(t, "scan-1")
	r.waitDelivered(t, "scan-2")

	arrivals := r.sink.Arrivals("/scans")
	if len(arrivals) != 2 {
		t.Fatalf("%d arrivals at the receiver, want 2", len(arrivals))
	}
	byID := map[string]sink.Arrival{}
	for _, a := range arrivals {
		byID[a.Header.Get("webhook-id")] = a
	}

	// The small payload goes as it is.
	if a := byID["scan-2"]; !bytes.Equal(a.Body, small) || a.Header.Get("Content-Type") != "application/pdf" {
		t.Errorf("the payload under the threshold came as %q (%s), want itself", a.Body, a.Header.Get("Content-Type"))
	}

	// The large one goes as a notice, signed as any message is.
	a := byID["scan-1"]
	if got := a.Header.Get("Content-Type"); got != courier.ClaimNoticeType {
		t.Fatalf("the notice came as %s (%d bytes), want %s", got, len(a.Body), courier.ClaimNoticeType)
	}
	checkWebhookSignature(t, a)
	var n courier.ClaimNotice
	if err := json.Unmarshal(a.Body, &n); err != nil {
		t.Fatalf("notice %s: %v", a.Body, err)
	}
	c := n.ClaimCheck
	if c.MessageID != "scan-1" || c.Size != int64(len(payload)) || c.SHA256 != digest || c.ContentType != "application/pdf" ||
		!strings.HasPrefix(c.URL, r.api.URL+"/v1/claims/scan-1?") {
		t.Errorf("notice %s", a.Body)
	}
	if ttl := c.ExpiresAt.Sub(started); ttl < time.Hour-2*time.Second || ttl > time.Hour+time.Minute {
		t.Errorf("the URL expires %v after the send, want an hour", ttl)
	}
	hist, err := r.store.Attempts(context.Background(), "scan-1")
	if err != nil || len(hist) != 1 || hist[0].Outcome != courier.OutcomeDelivered || hist[0].Endpoint != "scans" {
		t.Fatalf("attempts %+v (%v), want one, delivered", hist, err)
	}

	// The receiver fetches the payload through the URL: the bytes match.
	status, body, h := httpcheck.Get(t, c.URL)
	got := sha256.Sum256(body)
	if status != http.StatusOK || len(body) != len(payload) || hex.EncodeToString(got[:]) != c.SHA256 || !bytes.Equal(body, payload) {
		t.Fatalf("fetch: %d with %d bytes, want 200 with the %d bytes of sha256 %s", status, len(body), len(payload), c.SHA256)
	}
	if h.Get("Courier-Content-SHA256") != digest || h.Get("Content-Type") != "application/pdf" {
		t.Errorf("fetch headers %v", h)
	}

	// The fetch is recorded, and shows with the message.
	actions := storetest.WaitActions(t, r.store, "scan-1", 1)
	if len(actions) != 1 || actions[0].Kind != courier.ActionClaimFetched || actions[0].Who != "endpoint:scans" {
		t.Fatalf("actions %+v, want the fetch", actions)
	}
	status, body, _ = httpcheck.Get(t, r.api.URL+"/v1/messages/scan-1")
	var v api.Message
	if err := json.Unmarshal(body, &v); err != nil || status != http.StatusOK || len(v.Actions) != 1 || v.Actions[0].Kind != courier.ActionClaimFetched {
		t.Errorf("message view %d %s, want the fetch among its actions", status, body)
	}

	// A changed URL is refused.
	u, err := url.Parse(c.URL)
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(q url.Values){
		func(q url.Values) { sig := []byte(q.Get("sig")); sig[0] ^= 1; q.Set("sig", string(sig)) },
		func(q url.Values) { q.Set("endpoint", "other") },
		func(q url.Values) { q.Set("expires", q.Get("expires")+"0") },
	} {
		q := u.Query()
		change(q)
		bad := *u
		bad.RawQuery = q.Encode()
		status, body, _ := httpcheck.Get(t, bad.String())
		if status != http.StatusForbidden || !strings.Contains(string(body), `"permission_denied"`) {
			t.Errorf("changed URL %s: %d %s, want 403 permission_denied", bad.String(), status, body)
		}
	}

	// So is the URL once it has expired.
	r.clock.Advance(time.Hour + time.Minute)
	status, body, _ = httpcheck.Get(t, c.URL)
	if status != http.StatusForbidden || !strings.Contains(string(body), "expired") {
		t.Errorf("expired URL: %d %s, want 403 saying it expired", status, body)
	}
	if actions, _ := r.store.Actions(context.Background(), "scan-1"); len(actions) != 1 {
		t.Errorf("%d fetches recorded, want only the one served", len(actions))
	}
}

// Without a public URL a notice cannot be made: the attempt fails and
// says why, and the payload is not sent in its place.
func TestClaimCheckWithoutPublicURL(t *testing.T) {
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	r := newClaimRig(t, store)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	tr := httptransport.New(httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	defer tr.Close()
	p := courier.DefaultPolicy()
	p.MaxAttempts = 1
	r.top.Policies[courier.DefaultPolicyName] = p
	r.eng = engine.New(engine.Options{Store: store, Topology: r.top,
		Senders:      map[courier.Transport]courier.Sender{courier.TransportHTTP: tr},
		PollInterval: 20 * time.Millisecond, TimerInterval: 20 * time.Millisecond, RescueInterval: 50 * time.Millisecond})
	if err := r.eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The rig's cleanup stops this engine too.
	r.send(t, "scan-1", make([]byte, 2<<20))
	deadline := time.Now().Add(20 * time.Second)
	for {
		hist, err := store.Attempts(context.Background(), "scan-1")
		if err == nil && len(hist) > 0 {
			if a := hist[0]; a.Outcome != courier.OutcomeFailed || a.Class != courier.ClassTransport || !strings.Contains(a.Error, "no public_url") {
				t.Errorf("attempt %+v, want a transport failure that names public_url", a)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no attempt recorded: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := r.sink.Count("/scans"); n != 0 {
		t.Errorf("%d requests reached the receiver, want none", n)
	}
}
