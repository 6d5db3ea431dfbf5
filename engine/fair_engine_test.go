package engine_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// sharedEndpoint builds tenants' routes on one endpoint of the system
// tenant with max_concurrency 8: routes[t] routes for tenant t, each named
// t/r-NN, at weights[t] (default 1). The engine has 32 workers: a turn is
// worth a tenant's part of them, so that the windows the tests count over
// hold many turns.
func sharedEndpoint(h *harness, routes map[string]int, weights map[string]int) {
	h.workers = 32
	ep := h.httpEndpoint("system/shared", "/shared")
	ep.MaxConcurrency = 8
	h.top.Endpoints[ep.Name] = ep
	h.top.Tenants = map[string]*courier.Tenant{}
	for tenant, n := range routes {
		for i := 0; i < n; i++ {
			h.route(courier.Qualify(tenant, fmt.Sprintf("r-%02d", i)), ep.Name)
		}
		if w := weights[tenant]; w > 0 {
			h.top.Tenants[tenant] = &courier.Tenant{Name: tenant, Weight: w}
		}
	}
	h.sink.Script("/shared", sink.Delay(3*time.Millisecond, 204), sink.Repeat)
}

// backlog queues perRoute messages on each of a tenant's n routes, the
// tenants' messages interleaved so that all are queued together.
func backlog(h *harness, routes map[string]int, perRoute int) []string {
	var msgs []*courier.Message
	var ids []string
	for i := 0; i < perRoute; i++ {
		for tenant, n := range routes {
			for r := 0; r < n; r++ {
				id := courier.QualifyID(tenant, fmt.Sprintf("m-%02d-%04d", r, i))
				msgs = append(msgs, h.message(id, "t", courier.Qualify(tenant, fmt.Sprintf("r-%02d", r)), "", 0))
				ids = append(ids, id)
			}
		}
	}
	h.ingestAll(msgs)
	return ids
}

// sharesOfFirst returns each tenant's part of the first n deliveries at
// the shared endpoint.
func sharesOfFirst(h *harness, n int) map[string]float64 {
	h.t.Helper()
	byTenant := map[string]int{}
	seen := 0
	for _, a := range h.sink.Arrivals("/shared") {
		if seen == n {
			break
		}
		id, _ := courier.ParseKey(a.Header.Get("webhook-id"))
		byTenant[courier.TenantOfID(id)]++
		seen++
	}
	out := map[string]float64{}
	for t, c := range byTenant {
		out[t] = float64(c) / float64(n)
	}
	return out
}

// A tenant with one route and one with twenty share an endpoint of the
// system tenant, both with a backlog: while both wait, the one with one
// route gets about half the deliveries, not one in twenty-one.
func TestFairShareOfASharedEndpoint(t *testing.T) {
	routes := map[string]int{"a": 20, "b": 1}
	h := newHarness(t, func(h *harness) { sharedEndpoint(h, routes, nil) })
	// a: 800 messages, b: 400: b still waits after the first 400
	// deliveries even at its fair half.
	want := backlog(h, map[string]int{"a": 20, "b": 1}, 40)
	want = append(want, backlog(h, map[string]int{"b": 1}, 360)...)
	h.waitDelivered(want, 2*time.Minute)
	got := sharesOfFirst(h, 400)
	if got["b"] < 0.35 {
		t.Fatalf("b got %.0f%% of the first 400 deliveries, a %.0f%%: want about half", 100*got["b"], 100*got["a"])
	}
	t.Logf("of the first 400 deliveries: a %.0f%%, b %.0f%%", 100*got["a"], 100*got["b"])
	if got := h.sink.MaxConcurrent("/shared"); got > 8 {
		t.Fatalf("%d requests open at once at an endpoint with max_concurrency 8", got)
	}
}

// Weights 2:1 share the endpoint about 2:1.
func TestFairShareByWeight(t *testing.T) {
	routes := map[string]int{"a": 10, "b": 10}
	h := newHarness(t, func(h *harness) { sharedEndpoint(h, routes, map[string]int{"a": 2}) })
	want := backlog(h, routes, 60)
	h.waitDelivered(want, 2*time.Minute)
	got := sharesOfFirst(h, 600)
	if got["a"] < 0.55 || got["a"] > 0.78 {
		t.Fatalf("at weights 2:1, a got %.0f%% of the first 600 deliveries, b %.0f%%: want about two thirds", 100*got["a"], 100*got["b"])
	}
	t.Logf("of the first 600 deliveries at weights 2:1: a %.0f%%, b %.0f%%", 100*got["a"], 100*got["b"])
}

// While both wait, the engine says which tenant fair share holds back and
// why; once the backlog is gone, none.
func TestFairSharesReportThrottled(t *testing.T) {
	routes := map[string]int{"a": 20, "b": 1}
	h := newHarness(t, func(h *harness) {
		sharedEndpoint(h, routes, nil)
		h.sink.Script("/shared", sink.Delay(20*time.Millisecond, 204), sink.Repeat)
	})
	want := backlog(h, routes, 20)
	deadline := time.Now().Add(30 * time.Second)
	for {
		shares := h.engine.FairShares()
		var a *engineShare
		for i := range shares {
			if shares[i].Tenant == "a" {
				a = &engineShare{shares[i].Throttled, shares[i].Reason, shares[i].WaitingRoutes}
			}
		}
		if a != nil && a.throttled {
			if a.waiting == 0 || a.reason == "" {
				t.Fatalf("a throttled with %d routes waiting, reason %q", a.waiting, a.reason)
			}
			t.Logf("a: throttled, %d routes waiting: %s", a.waiting, a.reason)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a was never shown throttled while it shared the endpoint: %+v", shares)
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.waitDelivered(want, 2*time.Minute)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		throttled := false
		for _, s := range h.engine.FairShares() {
			throttled = throttled || s.Throttled
		}
		if !throttled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still throttled with nothing left to send: %+v", h.engine.FairShares())
		}
	}
}

type engineShare struct {
	throttled bool
	reason    string
	waiting   int
}

// Within a tenant nothing changes: a key's messages go in order, and a
// priority message goes ahead of its tenant's backlog, while another
// tenant shares the endpoint.
func TestOrderWithinATenantUnderFairShare(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		sharedEndpoint(h, map[string]int{"acme": 1, "beta": 4}, nil)
		h.policy(orderedPolicy("order"))
	})
	var msgs []*courier.Message
	ids := map[string][]string{}
	var want []string
	for i := 0; i < 100; i++ {
		for k := 0; k < 10; k++ {
			key := fmt.Sprintf("customer-%d", k)
			id := courier.QualifyID("acme", fmt.Sprintf("%s-%03d", key, i))
			msgs = append(msgs, h.message(id, "order", "acme/r-00", key, 0))
			ids[key] = append(ids[key], id)
			want = append(want, id)
		}
		for r := 0; r < 4; r++ {
			id := courier.QualifyID("beta", fmt.Sprintf("b-%d-%03d", r, i))
			msgs = append(msgs, h.message(id, "order", fmt.Sprintf("beta/r-%02d", r), "", 0))
			want = append(want, id)
		}
	}
	h.ingestAll(msgs)
	ctx := t.Context()
	if err := h.sink.Wait(ctx, "/shared", 50); err != nil {
		t.Fatal(err)
	}
	urgent := courier.QualifyID("acme", "urgent")
	h.ingestAll([]*courier.Message{h.message(urgent, "order", "acme/r-00", "", 9)})
	h.engine.Due([]string{"acme/r-00"})
	first := h.waitDelivered(append(want, urgent), 2*time.Minute)
	checkKeyOrder(t, first, ids)
	acmeLeft := 0
	for _, id := range ids["customer-0"] {
		if first[id] > first[urgent] {
			acmeLeft++
		}
	}
	if acmeLeft < len(ids["customer-0"])/2 {
		t.Fatalf("only %d of customer-0's %d messages came after acme's urgent one: it waited behind its tenant's backlog",
			acmeLeft, len(ids["customer-0"]))
	}
}

// countingLimits counts the store round trips that ask for slots.
type countingLimits struct {
	courier.SharedLimits
	acquires atomic.Int64
}

func (c *countingLimits) AcquireSlots(ctx context.Context, owner string, want []courier.SlotRequest, ttl time.Duration, now time.Time) (map[string]int, error) {
	c.acquires.Add(1)
	return c.SharedLimits.AcquireSlots(ctx, owner, want, ttl, now)
}

// On a store that nodes share, many tenants with endpoints of their own
// each take a turn of the node's claims, of several routes; a round asks
// the store for the slots of the endpoints its turns are about to reach
// once, not once per turn, so that the cost of a round does not grow with
// the tenants.
func TestFairAsksForSlotsOncePerRound(t *testing.T) {
	store := pgtest.Open(t)
	t.Cleanup(func() { store.Close() })
	sk, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sk.Close)
	const tenants, perTenant = 60, 3
	top := &courier.Topology{Endpoints: map[string]*courier.Endpoint{}, Routes: map[string]*courier.Route{},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}}
	var routes []string
	var msgs []*courier.Message
	for i := range tenants {
		tenant := fmt.Sprintf("t%02d", i)
		for j := range perTenant {
			ep := courier.NewEndpoint(courier.Qualify(tenant, fmt.Sprintf("ep-%d", j)), courier.TransportHTTP)
			ep.Settings = &httptransport.Settings{URL: sk.URL() + "/in", Method: http.MethodPost}
			top.Endpoints[ep.Name] = ep
			r := courier.Qualify(tenant, fmt.Sprintf("orders-%d", j))
			top.Routes[r] = &courier.Route{Name: r, Endpoints: []string{ep.Name}, Strategy: courier.StrategySingle}
			routes = append(routes, r)
			m := &courier.Message{ID: courier.QualifyID(tenant, fmt.Sprintf("m-%d", j)), Type: "t", Route: r, Payload: []byte(`{}`), ContentType: "application/json"}
			courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
			msgs = append(msgs, m)
		}
	}
	top.Prepare()
	if _, err := store.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	limits := &countingLimits{SharedLimits: store}
	tr := httptransport.New(httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(tr.Close)
	eng := engine.New(engine.Options{Store: store, Topology: top, Limits: limits, Workers: 256, Owner: "node",
		Senders: map[courier.Transport]courier.Sender{courier.TransportHTTP: tr}})
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Stop(context.Background()) })
	eng.Due(routes)
	for deadline := time.Now().Add(30 * time.Second); len(sk.Arrivals("/in")) < len(msgs); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages arrived", len(sk.Arrivals("/in")), len(msgs))
		}
	}
	if got := limits.acquires.Load(); got > tenants/4 {
		t.Errorf("the store was asked for slots %d times for %d tenants' endpoints, want a few times, not once per tenant", got, tenants)
	}
}

// claimLog notes the routes of every claim.
type claimLog struct {
	courier.Store
	mu     sync.Mutex
	claims [][]string
}

func (c *claimLog) ClaimDue(ctx context.Context, cl courier.Claim) ([]*courier.Message, error) {
	var routes []string
	for _, q := range cl.Routes {
		routes = append(routes, q.Route)
	}
	c.mu.Lock()
	c.claims = append(c.claims, routes)
	c.mu.Unlock()
	return c.Store.ClaimDue(ctx, cl)
}

// With more tenants waiting than the node has workers, a tenant's turn is
// still worth a few messages (minQuantum): a claim takes several routes of
// each tenant it serves, together, rather than one route each of as many
// tenants.
func TestFairTurnKeepsATenantsRoutesTogether(t *testing.T) {
	const tenants, routes = 40, 4
	watch := &claimLog{}
	h := newHarness(t, func(h *harness) {
		h.workers = 32 // fewer than the tenants waiting
		for i := range tenants {
			tenant := fmt.Sprintf("t%02d", i)
			ep := h.httpEndpoint(courier.Qualify(tenant, "ep"), "/in")
			h.top.Endpoints[ep.Name] = ep
			for r := range routes {
				h.route(courier.Qualify(tenant, fmt.Sprintf("r-%d", r)), ep.Name)
			}
		}
		h.sink.Script("/in", sink.Delay(2*time.Millisecond, 204), sink.Repeat)
		h.wrap = func(s courier.Store) courier.Store { watch.Store = s; return watch }
	})
	var msgs []*courier.Message
	var ids []string
	for i := range tenants {
		tenant := fmt.Sprintf("t%02d", i)
		for r := range routes {
			for k := range 4 {
				id := courier.QualifyID(tenant, fmt.Sprintf("m-%d-%d", r, k))
				msgs = append(msgs, h.message(id, "t", courier.Qualify(tenant, fmt.Sprintf("r-%d", r)), "", 0))
				ids = append(ids, id)
			}
		}
	}
	h.ingestAll(msgs)
	h.waitDelivered(ids, time.Minute)
	watch.mu.Lock()
	defer watch.mu.Unlock()
	together, apart := 0, 0
	for _, claim := range watch.claims {
		perTenant := map[string]int{}
		for _, r := range claim {
			perTenant[courier.TenantOf(r)]++
		}
		if len(perTenant) < 2 {
			continue // one tenant alone takes its routes as they come
		}
		for _, n := range perTenant {
			if n > 1 {
				together++
			} else {
				apart++
			}
		}
	}
	if together <= apart {
		t.Errorf("in the claims with several tenants, %d tenants had several routes claimed together and %d one; want most together", together, apart)
	}
}
