package engine_test

import (
	"context"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/sink"
	httptransport "github.com/courier-gw/courier/transport/http"
)

// recorder is an Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	attempts []courier.Result
	applied  []courier.Change
	health   []courier.EndpointHealth
	waits    []time.Duration
}

func (r *recorder) AttemptDone(m *courier.Message, endpoint string, res courier.Result, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, res)
}

func (r *recorder) OutcomeWritten(wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, wait)
}

func (r *recorder) Applied(c courier.Change) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.applied = append(r.applied, c)
}

func (r *recorder) HealthChanged(endpoint string, before, after courier.EndpointHealth) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.health = append(r.health, after)
}

// TestObserver: the observer hears of each attempt, each applied change
// (a delivery, a suspension), the health updates of the endpoints, and how
// long after each attempt its outcome was written.
func TestObserver(t *testing.T) {
	store, limits, _ := openStore(t)
	sk, err := sink.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	sk.Script("/bad", sink.Respond(http.StatusBadRequest), sink.Repeat)
	top := &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{
			"good": {Name: "good", Transport: courier.TransportHTTP, Timeout: 2 * time.Second, MaxConcurrency: 4,
				Settings: &httptransport.Settings{URL: sk.URL() + "/good", Method: http.MethodPost}},
			"bad": {Name: "bad", Transport: courier.TransportHTTP, Timeout: 2 * time.Second, MaxConcurrency: 4,
				Settings: &httptransport.Settings{URL: sk.URL() + "/bad", Method: http.MethodPost}},
		},
		Routes: map[string]*courier.Route{
			"good": {Name: "good", Endpoints: []string{"good"}, Strategy: courier.StrategySingle},
			"bad":  {Name: "bad", Endpoints: []string{"bad"}, Strategy: courier.StrategySingle},
		},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	tr := httptransport.New(httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	defer tr.Close()
	rec := &recorder{}
	eng := engine.New(engine.Options{Store: store, Topology: top, Limits: limits, Observer: rec,
		Senders:      map[courier.Transport]courier.Sender{courier.TransportHTTP: tr},
		PollInterval: 20 * time.Millisecond, TimerInterval: 20 * time.Millisecond})
	if err := eng.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, m := range []*courier.Message{
		{ID: "ok-1", Type: "t", Route: "good", Payload: []byte("1"), ContentType: "text/plain"},
		{ID: "ok-2", Type: "t", Route: "good", Payload: []byte("2"), ContentType: "text/plain"},
		{ID: "no-1", Type: "t", Route: "bad", Payload: []byte("3"), ContentType: "text/plain"},
	} {
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		if _, err := store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	eng.Wake()
	deadline := time.Now().Add(20 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.applied)
		rec.mu.Unlock()
		if n >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d changes observed, want 3", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := eng.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	store.Close()

	rec.mu.Lock()
	defer rec.mu.Unlock()
	delivered, failed := 0, 0
	for _, r := range rec.attempts {
		if r.Delivered() {
			delivered++
		} else if r.Class == courier.ClassHTTP4xx {
			failed++
		}
	}
	if delivered != 2 || failed != 1 || len(rec.attempts) != 3 {
		t.Errorf("attempts observed: %d delivered, %d http_4xx of %d; want 2, 1 of 3", delivered, failed, len(rec.attempts))
	}
	states := map[string]courier.State{}
	for _, c := range rec.applied {
		states[c.Message.ID] = c.Message.State
		if c.Attempt == nil || c.Message.CreatedAt.IsZero() {
			t.Errorf("change of %s without its attempt or creation time: %+v", c.Message.ID, c)
		}
	}
	want := map[string]courier.State{"ok-1": courier.StateDelivered, "ok-2": courier.StateDelivered, "no-1": courier.StateSuspended}
	for id, s := range want {
		if states[id] != s {
			t.Errorf("%s observed as %q, want %q", id, states[id], s)
		}
	}
	if len(rec.health) == 0 {
		t.Error("no health update observed")
	}
	if len(rec.waits) != 3 {
		t.Errorf("%d outcomes written observed, want 3", len(rec.waits))
	}
	for _, w := range rec.waits {
		if w < 0 {
			t.Errorf("an outcome written %v after its attempt ended, before it", w)
		}
	}
}
