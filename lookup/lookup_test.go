package lookup_test

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/poll"
	"github.com/courier-gw/courier/internal/testkit/testcert"
	"github.com/courier-gw/courier/lookup"
)

var start = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// registry is a test registry on loopback that counts its requests.
type registry struct {
	*httptest.Server
	requests atomic.Int64
}

func newRegistry(t *testing.T, h http.HandlerFunc) *registry {
	t.Helper()
	g := &registry{}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.requests.Add(1)
		h(w, r)
	}))
	t.Cleanup(g.Close)
	return g
}

// wantRequests fails the test unless the registry has had want requests;
// why, when not empty, says why that many.
func (g *registry) wantRequests(t *testing.T, want int64, why string) {
	t.Helper()
	if got := g.requests.Load(); got != want {
		if why != "" {
			why = " (" + why + ")"
		}
		t.Errorf("registry requests: got %d, want %d%s", got, want, why)
	}
}

// answering is a handler that gives the same answer to every request.
func answering(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

// answeringOnRelease is a handler that answers body once release is
// closed, to hold requests in flight.
func answeringOnRelease(release <-chan struct{}, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		<-release
		fmt.Fprint(w, body)
	}
}

func answerJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func route(g *registry, l courier.Lookup) *courier.Route {
	l.URL = g.URL + "/lookup?participant={recipient}&doc={type}"
	return &courier.Route{Name: "peppol", Lookup: &l}
}

func newResolver(clock *clocktest.Clock) *lookup.Registry {
	return lookup.New(lookup.Options{Clock: clock})
}

// newLookup is what most tests resolve with: a registry answering with h, a
// resolver whose clock stands at start, and a route with the default
// lookup settings.
func newLookup(t *testing.T, h http.HandlerFunc) (*registry, *lookup.Registry, *courier.Route) {
	t.Helper()
	g := newRegistry(t, h)
	return g, newResolver(clocktest.New(start)), route(g, courier.Lookup{})
}

// cached reports whether the resolver holds an answer for the recipient and
// type.
func cached(res *lookup.Registry, r *courier.Route, recipient, msgType string) bool {
	_, ok, _, _ := res.Peek(r, recipient, msgType)
	return ok
}

// startResolve starts a Resolve, waits until its request is the registry's
// first, and returns where the Resolve's error will come.
func startResolve(t *testing.T, ctx context.Context, g *registry, res *lookup.Registry, r *courier.Route) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := res.Resolve(ctx, r, "0088:579800", "invoice")
		done <- err
	}()
	poll.Until(t, "the registry request", func() bool { return g.requests.Load() == 1 })
	return done
}

func mustResolve(t *testing.T, g *lookup.Registry, r *courier.Route, recipient, msgType string) courier.Resolution {
	t.Helper()
	res, err := g.Resolve(context.Background(), r, recipient, msgType)
	if err != nil {
		t.Fatalf("Resolve(%s, %s): %v", recipient, msgType, err)
	}
	return res
}

// mustCertificatePEM returns a self-signed certificate, PEM-encoded.
func mustCertificatePEM(t *testing.T) string {
	t.Helper()
	return string(testcert.New(t, &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "ap.example.test"},
		NotBefore:    start.Add(-time.Hour),
		NotAfter:     start.Add(365 * 24 * time.Hour),
	}, nil).PEM())
}

func TestResolveCachesWithinTTL(t *testing.T) {
	t.Parallel()
	cert := mustCertificatePEM(t)
	expires := start.Add(time.Hour)
	g := newRegistry(t, answering(200, answerJSON(t, map[string]any{
		"url":         "https://ap.example.test/as4",
		"certificate": cert,
		"expires_at":  expires.Format(time.RFC3339),
		"transport":   "peppol-as4", // unknown fields are fine
	})))
	clock := clocktest.New(start)
	res := newResolver(clock)
	r := route(g, courier.Lookup{CacheTTL: 5 * time.Minute})

	want := courier.Resolution{URL: "https://ap.example.test/as4", Certificate: cert, ExpiresAt: expires}
	for i := range 100 {
		got := mustResolve(t, res, r, "0088:579800", "invoice")
		if got.URL != want.URL || got.Certificate != want.Certificate || !got.ExpiresAt.Equal(want.ExpiresAt) {
			t.Fatalf("resolve %d: got %+v, want %+v", i, got, want)
		}
	}
	g.wantRequests(t, 1, "")
	if got, want := res.Stats(), (lookup.Stats{Hits: 99, Misses: 1}); got != want {
		t.Errorf("stats: got %+v, want %+v", got, want)
	}

	peeked, ok, exp, notReg := res.Peek(r, "0088:579800", "invoice")
	if !ok || notReg || peeked.URL != want.URL || !exp.Equal(start.Add(5*time.Minute)) {
		t.Errorf("Peek: got %+v cached=%v expires=%v notRegistered=%v, want the resolution until %v", peeked, ok, exp, notReg, start.Add(5*time.Minute))
	}
}

func TestNotRegisteredIsCachedForNegativeTTL(t *testing.T) {
	t.Parallel()
	g := newRegistry(t, answering(404, `{"error":"unknown participant"}`))
	clock := clocktest.New(start)
	res := newResolver(clock)
	r := route(g, courier.Lookup{NegativeTTL: time.Minute})

	for i := range 2 {
		_, err := res.Resolve(context.Background(), r, "0088:1", "invoice")
		if !errors.Is(err, courier.ErrNotRegistered) {
			t.Fatalf("resolve %d: got %v, want ErrNotRegistered", i, err)
		}
		if !strings.Contains(err.Error(), "0088:1") {
			t.Errorf("resolve %d: error %q does not name the recipient", i, err)
		}
	}
	g.wantRequests(t, 1, "within NegativeTTL")
	if _, ok, _, notReg := res.Peek(r, "0088:1", "invoice"); !ok || !notReg {
		t.Errorf("Peek: cached=%v notRegistered=%v, want both", ok, notReg)
	}

	clock.Advance(time.Minute)
	if _, err := res.Resolve(context.Background(), r, "0088:1", "invoice"); !errors.Is(err, courier.ErrNotRegistered) {
		t.Fatalf("after NegativeTTL: got %v, want ErrNotRegistered", err)
	}
	g.wantRequests(t, 2, "after NegativeTTL")
	if got, want := res.Stats(), (lookup.Stats{Hits: 1, Misses: 2, NotRegistered: 2}); got != want {
		t.Errorf("stats: got %+v, want %+v", got, want)
	}
}

func TestCacheExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cacheTTL  time.Duration
		expiresAt time.Time // zero: the registry gives none
		advance   time.Duration
		want      int64 // registry requests after two Resolves
	}{
		{name: "within TTL", cacheTTL: 5 * time.Minute, advance: 5*time.Minute - time.Second, want: 1},
		{name: "TTL passed", cacheTTL: 5 * time.Minute, advance: 5 * time.Minute, want: 2},
		{name: "default TTL kept", advance: courier.DefaultLookupCacheTTL - time.Second, want: 1},
		{name: "default TTL passed", advance: courier.DefaultLookupCacheTTL, want: 2},
		{name: "expires_at before TTL wins", cacheTTL: 5 * time.Minute, expiresAt: start.Add(time.Minute), advance: 2 * time.Minute, want: 2},
		{name: "expires_at after TTL does not extend it", cacheTTL: time.Minute, expiresAt: start.Add(time.Hour), advance: 2 * time.Minute, want: 2},
		{name: "expires_at not yet reached", cacheTTL: 5 * time.Minute, expiresAt: start.Add(time.Hour), advance: 2 * time.Minute, want: 1},
		{name: "expires_at already past is not cached", cacheTTL: 5 * time.Minute, expiresAt: start.Add(-time.Minute), want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := map[string]any{"url": "https://ap.example.test/as4"}
			if !tt.expiresAt.IsZero() {
				a["expires_at"] = tt.expiresAt.Format(time.RFC3339)
			}
			g := newRegistry(t, answering(200, answerJSON(t, a)))
			clock := clocktest.New(start)
			res := newResolver(clock)
			r := route(g, courier.Lookup{CacheTTL: tt.cacheTTL})

			mustResolve(t, res, r, "0088:579800", "invoice")
			clock.Advance(tt.advance)
			mustResolve(t, res, r, "0088:579800", "invoice")
			g.wantRequests(t, tt.want, "")
		})
	}
}

func TestFailuresAreNotCached(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc // nil: the registry is down
		timeout time.Duration
		want    string // in the error
	}{
		{name: "503", handler: answering(503, "registry under maintenance\n"), want: "503 Service Unavailable: registry under maintenance"},
		{name: "500 with a long body", handler: answering(500, strings.Repeat("x", 5000)), want: "500 Internal Server Error: xxx"},
		{name: "403", handler: answering(403, ""), want: "403 Forbidden: (empty body)"},
		{name: "down", want: "could not be asked"},
		{
			name: "timeout",
			// Sleeps past the route's timeout: blocks until the client
			// gives up and closes the connection.
			handler: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			timeout: 50 * time.Millisecond,
			want:    "did not answer within 50ms",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newRegistry(t, tt.handler)
			r := route(g, courier.Lookup{Timeout: tt.timeout})
			if tt.handler == nil {
				g.Close() // nothing listens at its address any more
			}
			res := newResolver(clocktest.New(start))

			for i := range 2 {
				_, err := res.Resolve(context.Background(), r, "0088:579800", "invoice")
				if err == nil || errors.Is(err, courier.ErrNotRegistered) {
					t.Fatalf("resolve %d: got %v, want a failure", i, err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("resolve %d: error %q does not contain %q", i, err, tt.want)
				}
				if len(err.Error()) > 600 {
					t.Errorf("resolve %d: error of %d bytes, want a short excerpt", i, len(err.Error()))
				}
			}
			if got, want := res.Stats(), (lookup.Stats{Misses: 2, Failures: 2}); got != want {
				t.Errorf("stats: got %+v, want %+v (a failure is not cached)", got, want)
			}
			if tt.handler != nil {
				g.wantRequests(t, 2, "")
			}
			if cached(res, r, "0088:579800", "invoice") {
				t.Error("Peek: a failure is cached")
			}
		})
	}
}

func TestMalformedAnswers(t *testing.T) {
	t.Parallel()
	cert := mustCertificatePEM(t)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: []byte("not a key")}))
	tests := []struct {
		name string
		body string
		want string // in the error
	}{
		{name: "not JSON", body: "<html>registry</html>", want: "not a JSON answer"},
		{name: "empty", body: "", want: "not a JSON answer"},
		{name: "JSON array", body: `["https://ap.example.test"]`, want: "not a JSON answer"},
		{name: "missing url", body: `{"certificate": ""}`, want: "no url"},
		{name: "relative url", body: `{"url": "/as4"}`, want: "not an absolute http or https URL"},
		{name: "no host", body: `{"url": "https:///as4"}`, want: "not an absolute http or https URL"},
		{name: "other scheme", body: `{"url": "ftp://ap.example.test/as4"}`, want: "not an absolute http or https URL"},
		{name: "unparsable url", body: `{"url": "https://ap example test/"}`, want: "is not valid"},
		{name: "certificate not PEM", body: answerJSON(t, map[string]string{"url": "https://ap.example.test", "certificate": "MIIB..."}), want: "not PEM"},
		{name: "PEM not a certificate", body: answerJSON(t, map[string]string{"url": "https://ap.example.test", "certificate": keyPEM}), want: "not a CERTIFICATE"},
		{name: "certificate garbled", body: answerJSON(t, map[string]string{"url": "https://ap.example.test", "certificate": "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}), want: "does not parse"},
		{name: "junk after certificate", body: answerJSON(t, map[string]string{"url": "https://ap.example.test", "certificate": cert + "junk"}), want: "text after"},
		{name: "bad expires_at", body: `{"url": "https://ap.example.test", "expires_at": "tomorrow"}`, want: "RFC 3339"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, res, r := newLookup(t, answering(200, tt.body))

			for i := range 2 {
				_, err := res.Resolve(context.Background(), r, "0088:579800", "invoice")
				if err == nil || errors.Is(err, courier.ErrNotRegistered) {
					t.Fatalf("resolve %d: got %v, want a malformed-answer error", i, err)
				}
				if !strings.Contains(err.Error(), tt.want) {
					t.Errorf("resolve %d: error %q does not contain %q", i, err, tt.want)
				}
			}
			g.wantRequests(t, 2, "a malformed answer is not cached")
		})
	}
}

func TestWellFormedAnswers(t *testing.T) {
	t.Parallel()
	cert := mustCertificatePEM(t)
	tests := []struct {
		name string
		body string
		want courier.Resolution
	}{
		{name: "url only", body: `{"url": "https://ap.example.test/as4"}`, want: courier.Resolution{URL: "https://ap.example.test/as4"}},
		{name: "http", body: `{"url": "http://10.0.0.1:8080/in"}`, want: courier.Resolution{URL: "http://10.0.0.1:8080/in"}},
		{name: "empty optionals", body: `{"url": "https://ap.example.test", "certificate": "", "expires_at": ""}`, want: courier.Resolution{URL: "https://ap.example.test"}},
		{name: "null optionals", body: `{"url": "https://ap.example.test", "certificate": null, "expires_at": null}`, want: courier.Resolution{URL: "https://ap.example.test"}},
		{name: "certificate chain", body: answerJSON(t, map[string]string{"url": "https://ap.example.test", "certificate": cert + cert}), want: courier.Resolution{URL: "https://ap.example.test", Certificate: cert + cert}},
		{name: "expires_at with offset", body: `{"url": "https://ap.example.test", "expires_at": "2025-03-01T14:00:00+02:00"}`, want: courier.Resolution{URL: "https://ap.example.test", ExpiresAt: start}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := newRegistry(t, answering(200, tt.body))
			res := newResolver(clocktest.New(start.Add(-time.Hour)))
			got := mustResolve(t, res, route(g, courier.Lookup{}), "0088:579800", "invoice")
			if got.URL != tt.want.URL || got.Certificate != tt.want.Certificate || !got.ExpiresAt.Equal(tt.want.ExpiresAt) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestInvalidateForcesNewRequest(t *testing.T) {
	t.Parallel()
	g, res, r := newLookup(t, answering(200, `{"url": "https://ap.example.test/as4"}`))

	mustResolve(t, res, r, "0088:579800", "invoice")
	mustResolve(t, res, r, "0088:579800", "credit-note")
	res.Invalidate(r, "0088:579800", "invoice")
	if cached(res, r, "0088:579800", "invoice") {
		t.Error("Peek after Invalidate: still cached")
	}
	if !cached(res, r, "0088:579800", "credit-note") {
		t.Error("Peek: Invalidate dropped another type's entry")
	}
	mustResolve(t, res, r, "0088:579800", "invoice")
	g.wantRequests(t, 3, "")
}

func TestInvalidateDuringRequestDropsItsAnswer(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g, res, r := newLookup(t, answeringOnRelease(release, `{"url": "https://old.example.test/as4"}`))

	done := startResolve(t, context.Background(), g, res, r)
	res.Invalidate(r, "0088:579800", "invoice")
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if cached(res, r, "0088:579800", "invoice") {
		t.Error("Peek: the answer of an invalidated request was cached")
	}
	mustResolve(t, res, r, "0088:579800", "invoice")
	g.wantRequests(t, 2, "")
}

func TestConcurrentResolvesMakeOneRequest(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g, res, r := newLookup(t, answeringOnRelease(release, `{"url": "https://ap.example.test/as4"}`))

	const n = 50
	var wg sync.WaitGroup
	results := make([]courier.Resolution, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			results[i], errs[i] = res.Resolve(context.Background(), r, "0088:579800", "invoice")
		})
	}
	// Every caller counts itself before it waits: once all have, all are
	// waiting on the one request.
	poll.Until(t, "every caller to join", func() bool { s := res.Stats(); return s.Hits+s.Misses == n })
	close(release)
	wg.Wait()

	for i := range n {
		if errs[i] != nil || results[i].URL != "https://ap.example.test/as4" {
			t.Errorf("caller %d: got %+v, %v", i, results[i], errs[i])
		}
	}
	g.wantRequests(t, 1, "")
	if got, want := res.Stats(), (lookup.Stats{Hits: n - 1, Misses: 1}); got != want {
		t.Errorf("stats: got %+v, want %+v", got, want)
	}
}

func TestCancelledCallerLeavesRequestToOthers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	g, res, r := newLookup(t, answeringOnRelease(release, `{"url": "https://ap.example.test/as4"}`))

	ctx, cancel := context.WithCancel(context.Background())
	done := startResolve(t, ctx, g, res, r)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Resolve: got %v, want context.Canceled", err)
	}
	close(release)
	poll.Until(t, "the answer to be cached", func() bool { return cached(res, r, "0088:579800", "invoice") })
	mustResolve(t, res, r, "0088:579800", "invoice")
	g.wantRequests(t, 1, "")
}

func TestPlaceholdersAreQueryEscaped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		template  string
		recipient string
		msgType   string
		wantURI   string
	}{
		{
			name:      "query",
			template:  "/lookup?participant={recipient}&doc={type}",
			recipient: "0088:579800",
			msgType:   "urn:oasis:names:specification:ubl:schema:xsd:Invoice-2::Invoice##2.1",
			wantURI:   "/lookup?participant=0088%3A579800&doc=urn%3Aoasis%3Anames%3Aspecification%3Aubl%3Aschema%3Axsd%3AInvoice-2%3A%3AInvoice%23%232.1",
		},
		{
			name:      "path",
			template:  "/participants/{recipient}/{type}",
			recipient: "iso6523-actorid-upis::0088:579800",
			msgType:   "a/b&c=d",
			wantURI:   "/participants/iso6523-actorid-upis%3A%3A0088%3A579800/a%2Fb%26c%3Dd",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var gotURI atomic.Value
			g := newRegistry(t, func(w http.ResponseWriter, r *http.Request) {
				gotURI.Store(r.RequestURI)
				fmt.Fprint(w, `{"url": "https://ap.example.test/as4"}`)
			})
			r := &courier.Route{Name: "peppol", Lookup: &courier.Lookup{URL: g.URL + tt.template}}
			mustResolve(t, newResolver(clocktest.New(start)), r, tt.recipient, tt.msgType)
			if got := gotURI.Load(); got != tt.wantURI {
				t.Errorf("request URI: got %v, want %s", got, tt.wantURI)
			}
		})
	}
}

func TestCacheKey(t *testing.T) {
	t.Parallel()
	g := newRegistry(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"url": "https://ap.example.test/%s"}`, r.URL.Query().Get("participant"))
	})
	res := newResolver(clocktest.New(start))
	a := route(g, courier.Lookup{})
	b := route(g, courier.Lookup{})
	b.Name = "other"

	keys := []struct {
		r                  *courier.Route
		recipient, msgType string
	}{
		{a, "0088:1", "invoice"},
		{a, "0088:2", "invoice"},
		{a, "0088:1", "credit-note"},
		{b, "0088:1", "invoice"},
	}
	for range 2 {
		for _, k := range keys {
			got := mustResolve(t, res, k.r, k.recipient, k.msgType)
			if want := "https://ap.example.test/" + k.recipient; got.URL != want {
				t.Errorf("%s %s %s: got %s, want %s", k.r.Name, k.recipient, k.msgType, got.URL, want)
			}
		}
	}
	g.wantRequests(t, int64(len(keys)), "one per route, recipient and type")
}

func TestCacheIsBounded(t *testing.T) {
	t.Parallel()
	g := newRegistry(t, answering(200, `{"url": "https://ap.example.test/as4"}`))
	res := lookup.New(lookup.Options{Clock: clocktest.New(start), MaxEntries: 3})
	r := route(g, courier.Lookup{})

	for i := range 5 {
		mustResolve(t, res, r, fmt.Sprintf("0088:%d", i), "invoice")
	}
	for i := range 5 {
		ok := cached(res, r, fmt.Sprintf("0088:%d", i), "invoice")
		if want := i >= 2; ok != want {
			t.Errorf("Peek(0088:%d): cached=%v, want %v (the oldest go first)", i, ok, want)
		}
	}
	mustResolve(t, res, r, "0088:0", "invoice")
	g.wantRequests(t, 6, "an evicted recipient is asked again")
}

func TestRouteWithoutLookup(t *testing.T) {
	t.Parallel()
	res := newResolver(clocktest.New(start))
	if _, err := res.Resolve(context.Background(), &courier.Route{Name: "plain"}, "0088:1", "invoice"); err == nil {
		t.Error("Resolve on a route without lookup: got no error")
	}
}
