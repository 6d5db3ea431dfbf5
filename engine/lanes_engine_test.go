package engine_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// claimWatch records the routes of every claim the engine makes, and
// counts its sweeps.
type claimWatch struct {
	courier.Store
	mu     sync.Mutex
	routes map[string]int // claims that asked for the route
	claims int
	most   int // routes in the largest claim
	sweeps int // looks for due routes that returned
}

func (w *claimWatch) ClaimDue(ctx context.Context, c courier.Claim) ([]*courier.Message, error) {
	w.mu.Lock()
	w.claims++
	w.most = max(w.most, len(c.Routes))
	for _, q := range c.Routes {
		w.routes[q.Route]++
	}
	w.mu.Unlock()
	return w.Store.ClaimDue(ctx, c)
}

func (w *claimWatch) DueRoutes(ctx context.Context) ([]courier.RouteDue, error) {
	due, err := w.Store.DueRoutes(ctx)
	w.mu.Lock()
	w.sweeps++
	w.mu.Unlock()
	return due, err
}

func (w *claimWatch) asked(route string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.routes[route]
}

// swept is how many looks for due routes have returned.
func (w *claimWatch) swept() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.sweeps
}

// waitSweeps waits until the engine's looks for due routes have returned
// n times in all.
func (w *claimWatch) waitSweeps(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); w.swept() < n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d sweeps, want %d", w.swept(), n)
		}
	}
}

// Routes whose endpoints are switched off hold most of the backlog; the
// others are delivered, and no claim ever asks for a held route: its
// backlog costs the claims nothing. Switched on, it goes.
func TestHeldRoutesAreNeverClaimed(t *testing.T) {
	watch := &claimWatch{routes: map[string]int{}}
	const held, open = 20, 40
	h := newHarness(t, func(h *harness) {
		for i := 0; i < held+open; i++ {
			name := fmt.Sprintf("ep-%02d", i)
			h.top.Endpoints[name] = h.httpEndpoint(name, "/"+name)
			h.route(fmt.Sprintf("r-%02d", i), name)
			if i < held {
				if _, err := h.store.UpdateHealth(context.Background(), name, func(eh courier.EndpointHealth) courier.EndpointHealth {
					return eh.SwitchedOff(time.Now())
				}, nil); err != nil {
					t.Fatal(err)
				}
			}
		}
		h.wrap = func(s courier.Store) courier.Store { watch.Store = s; return watch }
	})
	var msgs []*courier.Message
	for i := 0; i < held+open; i++ {
		n := 2
		if i < held {
			n = 10
		}
		for j := 0; j < n; j++ {
			m := &courier.Message{ID: fmt.Sprintf("m-%02d-%d", i, j), Type: "t", Route: fmt.Sprintf("r-%02d", i),
				Payload: []byte(`{}`), ContentType: "application/json"}
			courier.Accept(m, h.top.Policy("t"), false, time.Now())
			msgs = append(msgs, m)
		}
	}
	if _, err := h.store.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	h.engine.Wake()
	for i := held; i < held+open; i++ {
		for j := 0; j < 2; j++ {
			h.waitState(fmt.Sprintf("m-%02d-%d", i, j), courier.StateDelivered)
		}
	}
	watch.waitSweeps(t, watch.swept()+3) // a few more sweeps and their rounds
	for i := 0; i < held; i++ {
		if n := watch.asked(fmt.Sprintf("r-%02d", i)); n != 0 {
			t.Errorf("route r-%02d, its endpoint off, was asked for in %d claims", i, n)
		}
		if m := h.waitState(fmt.Sprintf("m-%02d-0", i), courier.StateQueued); m.Attempts != 0 {
			t.Errorf("a held message spent %d attempts", m.Attempts)
		}
	}
	if _, err := h.store.UpdateHealth(context.Background(), "ep-03", func(eh courier.EndpointHealth) courier.EndpointHealth {
		return eh.SwitchedOn(time.Now())
	}, nil); err != nil {
		t.Fatal(err)
	}
	h.engine.Wake()
	for j := 0; j < 10; j++ {
		h.waitState(fmt.Sprintf("m-03-%d", j), courier.StateDelivered)
	}
	if h.sink.Count("/ep-04") != 0 {
		t.Error("an endpoint still off received messages")
	}
}

// A route with a deep backlog does not hold up one with a single message:
// the small one is delivered while the deep one still has most of its
// backlog queued.
func TestDeepBacklogDoesNotStarveAnotherRoute(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.top.Endpoints["deep"] = h.httpEndpoint("deep", "/deep")
		h.top.Endpoints["deep"].MaxConcurrency = 1
		h.top.Endpoints["small"] = h.httpEndpoint("small", "/small")
		h.route("deep", "deep")
		h.route("small", "small")
	})
	const backlog = 2000
	msgs := make([]*courier.Message, backlog)
	for i := range msgs {
		msgs[i] = &courier.Message{ID: fmt.Sprintf("deep-%d", i), Type: "t", Route: "deep", Payload: []byte(`{}`), ContentType: "application/json"}
		courier.Accept(msgs[i], h.top.Policy("t"), false, time.Now())
	}
	if _, err := h.store.Ingest(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	h.engine.Due([]string{"deep"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := h.sink.Wait(ctx, "/deep", 10); err != nil {
		t.Fatal(err)
	}
	h.send("small-1", "t", "small")
	h.waitState("small-1", courier.StateDelivered)
	if n := h.sink.Count("/deep"); n > backlog/2 {
		t.Errorf("the small route's message came after %d of the deep route's %d", n, backlog)
	}
}

// maxRoutes is the most routes one claim asked for.
func (w *claimWatch) maxRoutes() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.most
}

// Many routes with a few messages each are claimed many at a time: each
// ready lane gets a share of the free workers, not what its endpoint could
// take, which would leave a round asking a few routes for more than they
// have.
func TestManySmallRoutesClaimedTogether(t *testing.T) {
	watch := &claimWatch{routes: map[string]int{}}
	const routes = 300
	h := newHarness(t, func(h *harness) {
		var msgs []*courier.Message
		for i := 0; i < routes; i++ {
			name := fmt.Sprintf("r-%03d", i)
			h.top.Endpoints[name] = h.httpEndpoint(name, "/"+name)
			h.route(name, name)
			for j := 0; j < 2; j++ {
				m := &courier.Message{ID: fmt.Sprintf("m-%03d-%d", i, j), Type: "t", Route: name, Payload: []byte(`{}`), ContentType: "application/json"}
				courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
				msgs = append(msgs, m)
			}
		}
		if _, err := h.store.Ingest(context.Background(), msgs); err != nil {
			t.Fatal(err)
		}
		h.wrap = func(s courier.Store) courier.Store { watch.Store = s; return watch }
	})
	for i := 0; i < routes; i++ {
		h.waitState(fmt.Sprintf("m-%03d-1", i), courier.StateDelivered)
	}
	// 256 workers over 300 ready routes: one each, all in one claim.
	if most := watch.maxRoutes(); most < 200 {
		t.Errorf("the most routes one claim asked for: %d, want about 256", most)
	}
}
