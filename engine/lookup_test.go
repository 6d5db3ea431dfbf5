package engine_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/testcert"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/lookup"
)

// registry is a recipient registry on loopback: it answers each recipient's
// URL as set, 404 for the others, or a status for every request.
type registry struct {
	*httptest.Server
	mu       sync.Mutex
	urls     map[string]string
	status   int // when set, every answer
	requests atomic.Int64
}

func startRegistry(t *testing.T) *registry {
	g := &registry{urls: map[string]string{}}
	g.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.requests.Add(1)
		g.mu.Lock()
		status, url := g.status, g.urls[r.URL.Query().Get("participant")]
		g.mu.Unlock()
		switch {
		case status != 0:
			w.WriteHeader(status)
		case url == "":
			http.NotFound(w, r)
		default:
			json.NewEncoder(w).Encode(map[string]string{"url": url})
		}
	}))
	t.Cleanup(g.Close)
	return g
}

func (g *registry) set(recipient, url string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.urls[recipient] = url
}

func (g *registry) answer(status int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.status = status
}

// lookupRoute adds the route nemhandel that resolves recipients at g.
func lookupRoute(h *harness, g *registry, ttl time.Duration) {
	tmpl := courier.NewEndpoint("", courier.TransportHTTP)
	httptransport.Of(tmpl).Method, tmpl.Timeout = "POST", 5*time.Second
	h.top.Routes["nemhandel"] = &courier.Route{Name: "nemhandel", Strategy: courier.StrategySingle, EndpointTemplate: tmpl,
		Lookup: &courier.Lookup{URL: g.URL + "/lookup?participant={recipient}&doctype={type}", Timeout: 2 * time.Second,
			CacheTTL: ttl, NegativeTTL: ttl}}
	h.policy(steadyPolicy("invoice", courier.DefaultPolicy().MaxAttempts, 20*time.Millisecond))
	h.resolver = lookup.New(lookup.Options{})
}

// newLookupHarness is a harness with the route nemhandel resolving
// recipients at a registry of its own, which build, when not nil, sets up.
func newLookupHarness(t *testing.T, ttl time.Duration, build func(h *harness, g *registry)) (*harness, *registry) {
	t.Helper()
	var g *registry
	h := newHarness(t, func(h *harness) {
		g = startRegistry(t)
		lookupRoute(h, g, ttl)
		if build != nil {
			build(h, g)
		}
	})
	return h, g
}

func (h *harness) sendTo(id, recipient string) {
	h.t.Helper()
	m := &courier.Message{ID: id, Type: "invoice", Route: "nemhandel", Recipient: recipient, Payload: []byte(`<Invoice/>`), ContentType: "application/xml"}
	courier.Accept(m, h.top.Policy(m.Type), false, time.Now())
	if _, err := h.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		h.t.Fatal(err)
	}
	h.engine.Wake()
}

// One lookup serves a hundred messages to one recipient within the cache's
// time; every recipient at one access point shares its resolved endpoint.
func TestLookupCachesAndDelivers(t *testing.T) {
	h, g := newLookupHarness(t, time.Minute, func(h *harness, g *registry) {
		g.set("0088:1", h.sink.URL()+"/ap1")
		g.set("0088:2", h.sink.URL()+"/ap1")
	})
	for i := 0; i < 100; i++ {
		h.sendTo(fmt.Sprintf("inv-%03d", i), "0088:1")
	}
	h.sendTo("inv-other", "0088:2")
	for i := 0; i < 100; i++ {
		h.waitState(fmt.Sprintf("inv-%03d", i), courier.StateDelivered)
	}
	m := h.waitState("inv-other", courier.StateDelivered)
	if n := g.requests.Load(); n != 2 {
		t.Fatalf("%d registry requests for 101 messages to 2 recipients; want 2", n)
	}
	if got := h.sink.Count("/ap1"); got != 101 {
		t.Fatalf("%d arrived at the access point", got)
	}
	if want := courier.ResolvedEndpointPrefix + h.sink.URL() + "/ap1"; m.Endpoint != want {
		t.Fatalf("delivered via %q, want %q", m.Endpoint, want)
	}
}

// A recipient the registry does not know is suspended as rejected after one
// lookup, and the answer is kept: the next message asks nobody.
func TestLookupNotRegistered(t *testing.T) {
	h, g := newLookupHarness(t, time.Minute, nil)
	h.sendTo("inv-1", "0088:nobody")
	m := h.waitState("inv-1", courier.StateSuspended)
	if m.Reason != courier.ReasonRejected || m.Attempts != 1 || !strings.Contains(m.LastError, "not registered") {
		t.Fatalf("%s after %d attempts: %q", m.Reason, m.Attempts, m.LastError)
	}
	h.sendTo("inv-2", "0088:nobody")
	h.waitState("inv-2", courier.StateSuspended)
	if n := g.requests.Load(); n != 1 {
		t.Fatalf("%d registry requests; want 1 (the negative answer kept)", n)
	}
	if h.sink.Total() != 0 {
		t.Fatal("something was sent for a recipient nobody knows")
	}
}

// While the registry is down the message is retried (class lookup) and no
// endpoint's health suffers; once it is back the message is delivered.
func TestLookupRegistryDown(t *testing.T) {
	h, g := newLookupHarness(t, time.Minute, func(h *harness, g *registry) {
		g.set("0088:1", h.sink.URL()+"/ap1")
		g.answer(503)
	})
	h.sendTo("inv-1", "0088:1")
	deadline := time.Now().Add(10 * time.Second)
	for g.requests.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatal("the lookup was not retried")
		}
		time.Sleep(10 * time.Millisecond)
	}
	m, _ := h.store.Message(context.Background(), "inv-1")
	if m.State != courier.StateQueued && m.State != courier.StateInflight || m.LastClass != courier.ClassLookup {
		t.Fatalf("while the registry is down: %s, last class %q", m.State, m.LastClass)
	}
	hs, _ := h.store.Health(context.Background())
	for _, eh := range hs {
		if eh.State != courier.HealthActive || eh.Failures > 0 {
			t.Fatalf("a failed lookup touched the health of %s: %+v", eh.Endpoint, eh)
		}
	}
	g.answer(0)
	m = h.waitState("inv-1", courier.StateDelivered)
	if attempts, _ := h.store.Attempts(context.Background(), "inv-1"); attempts[0].Class != courier.ClassLookup {
		t.Fatalf("first attempt %+v", attempts[0])
	}
}

// The recipient moves to another access point: a failed delivery to the old
// one makes the next attempt look up again, and it follows.
func TestLookupFollowsAMove(t *testing.T) {
	h, g := newLookupHarness(t, time.Hour, func(h *harness, g *registry) {
		g.set("0088:1", h.sink.URL()+"/old")
		h.sink.Script("/old", sink.Respond(503), sink.Repeat)
	})
	h.sendTo("inv-1", "0088:1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sink.Wait(ctx, "/old", 1); err != nil {
		t.Fatal(err)
	}
	g.set("0088:1", h.sink.URL()+"/new")
	m := h.waitState("inv-1", courier.StateDelivered)
	if want := courier.ResolvedEndpointPrefix + h.sink.URL() + "/new"; m.Endpoint != want || h.sink.Count("/new") != 1 {
		t.Fatalf("delivered via %s (%d at /new)", m.Endpoint, h.sink.Count("/new"))
	}
	if n := g.requests.Load(); n < 2 {
		t.Fatalf("%d registry requests; the failure should have made it ask again", n)
	}
}

// A resolved endpoint's min_interval holds for every recipient behind it,
// and messages waiting for their turn are put back, not held in a worker.
func TestLookupPacesTheAccessPoint(t *testing.T) {
	h, _ := newLookupHarness(t, time.Minute, func(h *harness, g *registry) {
		h.top.Routes["nemhandel"].EndpointTemplate.MinInterval = 150 * time.Millisecond
		for i := 0; i < 5; i++ {
			g.set(fmt.Sprintf("0088:%d", i), h.sink.URL()+"/ap")
		}
	})
	for i := 0; i < 5; i++ {
		h.sendTo(fmt.Sprintf("inv-%d", i), fmt.Sprintf("0088:%d", i))
	}
	for i := 0; i < 5; i++ {
		if m := h.waitState(fmt.Sprintf("inv-%d", i), courier.StateDelivered); m.Attempts != 1 {
			t.Fatalf("inv-%d took %d attempts: waiting for the access point must not spend any", i, m.Attempts)
		}
	}
	a := h.sink.Arrivals("/ap")
	for i := 1; i < len(a); i++ {
		// Starts are spaced exactly; arrival varies by tens of ms here.
		if gap := a[i].Time.Sub(a[i-1].Time); gap < 100*time.Millisecond {
			t.Fatalf("arrivals %d and %d only %s apart at one access point", i-1, i, gap)
		}
	}
}

// The registry's certificate is pinned: the receiver presenting it gets the
// message; one presenting another certificate is refused (class tls).
func TestLookupPinsTheCertificate(t *testing.T) {
	ap := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	defer ap.Close()
	// httptest's servers share one certificate: the impostor makes its own.
	other := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	other.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	other.StartTLS()
	defer other.Close()
	pinned := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ap.Certificate().Raw}))
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		url := ap.URL
		if r.URL.Query().Get("participant") == "0088:impostor" {
			url = other.URL // presents the test server's other certificate
		}
		json.NewEncoder(w).Encode(map[string]string{"url": url + "/as4", "certificate": pinned})
	}))
	defer reg.Close()
	h := newHarness(t, func(h *harness) {
		g := &registry{Server: reg}
		lookupRoute(h, g, time.Minute)
	})
	h.sendTo("inv-ok", "0088:good")
	h.sendTo("inv-bad", "0088:impostor")
	h.waitState("inv-ok", courier.StateDelivered)
	deadline := time.Now().Add(10 * time.Second)
	for {
		m, _ := h.store.Message(context.Background(), "inv-bad")
		if m.LastClass == courier.ClassTLS {
			if !strings.Contains(m.LastError, "not the one the registry gave") {
				t.Fatalf("refused with %q", m.LastError)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("inv-bad: %s %q", m.State, m.LastError)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// selfSigned makes a certificate for 127.0.0.1 that no one else has.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	return testcert.New(t, &x509.Certificate{Subject: pkix.Name{CommonName: "impostor"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}, nil).TLS()
}
