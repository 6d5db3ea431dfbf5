package postgres_test

import (
	"context"
	"slices"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
)

// A node is present while its session lives. When the session ends (its
// process died, or the server lost it), the node hears of it (Lost), the
// others see it departed at once, find what it leased, and free its slot
// holds long before they would lapse; its record goes once nothing of it
// is leased any more. A name that is present cannot join twice.
func TestPresence(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	now := time.Now()

	a, err := s.Join(ctx, "node-a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Leave()
	if again, err := s.Join(ctx, "node-a"); err == nil {
		again.Leave()
		t.Fatal("a name that is present joined a second time")
	}
	b, err := s.Join(ctx, "node-b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Leave()
	if gone := departed(t, s); len(gone) != 0 {
		t.Fatalf("departed %v while both nodes are present", gone)
	}

	// node-a holds every slot of an endpoint, for a minute, and leases a
	// message for an hour.
	if got, err := s.AcquireSlots(ctx, "node-a", []courier.SlotRequest{{Endpoint: "ep", Max: 4, N: 4}}, time.Minute, now); err != nil || got["ep"] != 4 {
		t.Fatalf("node-a took %v slots (%v), want 4", got, err)
	}
	m := &courier.Message{ID: "m1", Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), true, now.Add(-time.Second))
	if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	claimed, err := s.ClaimDue(ctx, courier.Claim{Now: now, LeaseUntil: now.Add(time.Hour), Owner: "node-a",
		Routes: []courier.RouteQuota{{Route: "r", Limit: 1}}, Max: 1})
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claimed %d (%v), want 1", len(claimed), err)
	}

	if n, err := s.EndPresence(ctx, "node-a"); err != nil || n != 1 {
		t.Fatalf("ended %d sessions of node-a (%v), want 1", n, err)
	}
	select {
	case <-a.Lost():
	case <-time.After(time.Minute):
		t.Fatal("node-a did not hear that its presence was lost")
	}
	select {
	case <-b.Lost():
		t.Fatal("node-b lost its presence too")
	default:
	}
	waitDeparted(t, s, []string{"node-a"})

	leased, err := s.LeasesOf(ctx, []string{"node-a"}, 10)
	if err != nil || len(leased) != 1 || leased[0].ID != "m1" {
		t.Fatalf("leases of node-a: %v (%v), want m1", leased, err)
	}
	if got, _ := s.AcquireSlots(ctx, "node-b", []courier.SlotRequest{{Endpoint: "ep", Max: 4, N: 4}}, time.Minute, now); got["ep"] != 0 {
		t.Fatalf("node-b got %d slots while node-a's hold was not forgotten, want 0", got["ep"])
	}
	if err := s.Forget(ctx, []string{"node-a"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.AcquireSlots(ctx, "node-b", []courier.SlotRequest{{Endpoint: "ep", Max: 4, N: 4}}, time.Minute, now); err != nil || got["ep"] != 4 {
		t.Fatalf("node-b took %v slots (%v) after node-a was forgotten, want its 4", got, err)
	}
	// Still leased: still departed, so that its message is taken up.
	waitDeparted(t, s, []string{"node-a"})
	rescued := *leased[0]
	rescued.State, rescued.LeaseOwner, rescued.LeaseUntil, rescued.NextAttemptAt = courier.StateQueued, "", time.Time{}, now
	if applied, err := s.Apply(ctx, []courier.Change{{Message: &rescued, From: courier.StateInflight, Token: leased[0].TotalAttempts}}); err != nil || !applied[0] {
		t.Fatalf("taking up m1: applied %v, %v", applied, err)
	}
	if err := s.Forget(ctx, []string{"node-a"}); err != nil {
		t.Fatal(err)
	}
	waitDeparted(t, s, nil)

	// A node that leaves is gone as well: what it leased is the others'.
	b.Leave()
	waitDeparted(t, s, []string{"node-b"})
	c, err := s.Join(ctx, "node-a")
	if err != nil {
		t.Fatalf("a name whose node is gone could not join again: %v", err)
	}
	c.Leave()
}

func departed(t *testing.T, s interface {
	Departed(context.Context) ([]string, error)
}) []string {
	t.Helper()
	gone, err := s.Departed(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(gone)
	return gone
}

// waitDeparted waits until the departed nodes are want: the server frees
// a closed session's locks as it notices.
func waitDeparted(t *testing.T, s interface {
	Departed(context.Context) ([]string, error)
}, want []string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		gone := departed(t, s)
		if slices.Equal(gone, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("departed %v, want %v", gone, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
