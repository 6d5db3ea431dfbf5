package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
)

// A node on a shared store takes every free slot of an endpoint it has
// work for in one go, and gives back, at the end of each window, what it
// held beyond the most it used in that window: another node then gets them.
func TestSlotsGoBackWhenUnused(t *testing.T) {
	store := pgtest.Open(t)
	ctx := context.Background()
	ep := &courier.Endpoint{Name: "ep", MaxConcurrency: 4}
	known := map[string]*courier.Endpoint{"ep": ep}
	other := func() int {
		t.Helper()
		got, err := store.AcquireSlots(ctx, "other", []courier.SlotRequest{{Endpoint: "ep", Max: 4, N: 4}}, time.Minute, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return got["ep"]
	}

	s := newEndpointSlots(store)
	t0 := time.Now()
	if err := s.refresh(ctx, "node", []*courier.Endpoint{ep}, known, t0); err != nil {
		t.Fatal(err)
	}
	if got := s.free(ep); got != 4 {
		t.Fatalf("after the first refresh %d slots free, want all 4 taken at once", got)
	}
	// Two attempts run and end within the window.
	s.take(ep)
	s.take(ep)
	s.release("ep")
	s.release("ep")
	if err := s.refresh(ctx, "node", nil, known, t0.Add(slotWindow/2)); err != nil {
		t.Fatal(err)
	}
	if got := other(); got != 0 {
		t.Fatalf("another node got %d slots while the window runs, want none", got)
	}
	if err := s.refresh(ctx, "node", nil, known, t0.Add(slotWindow)); err != nil {
		t.Fatal(err)
	}
	if got := s.free(ep); got != 2 {
		t.Fatalf("after a window that used 2, %d slots held, want 2", got)
	}
	if got := other(); got != 2 {
		t.Fatalf("another node got %d slots after the window, want the 2 given back", got)
	}
	// A window without use gives back the rest.
	if err := s.refresh(ctx, "node", nil, known, t0.Add(2*slotWindow)); err != nil {
		t.Fatal(err)
	}
	if got := s.free(ep); got != 0 {
		t.Fatalf("after an unused window, %d slots held, want none", got)
	}
	if got := other(); got != 4 {
		t.Fatalf("another node holds %d slots, want all 4", got)
	}
}

// An endpoint whose turn of the claims comes every second and a half, as
// with ten thousand endpoints, keeps its slots between turns while the
// node's rounds go on: it neither gives them back nor has to take them
// again at each turn.
func TestSlotsKeptBetweenTurns(t *testing.T) {
	store := pgtest.Open(t)
	ctx := context.Background()
	ep := &courier.Endpoint{Name: "ep", MaxConcurrency: 4}
	known := map[string]*courier.Endpoint{"ep": ep}
	s := newEndpointSlots(store)
	t0 := time.Now()
	if err := s.refresh(ctx, "node", []*courier.Endpoint{ep}, known, t0); err != nil {
		t.Fatal(err)
	}
	// A round every half second; the endpoint's turn in every third.
	for round := 0; round <= 12; round++ {
		at := t0.Add(time.Duration(round) * 500 * time.Millisecond)
		if err := s.refresh(ctx, "node", nil, known, at); err != nil {
			t.Fatal(err)
		}
		if round%3 != 0 {
			continue
		}
		if got := s.free(ep); got != 4 {
			t.Fatalf("at its turn %v after the first, %d slots held, want all 4 kept", at.Sub(t0), got)
		}
		for range 4 {
			s.take(ep)
		}
		for range 4 {
			s.release("ep")
		}
	}
}

// The node's bookkeeping holds only the endpoints in use: after many
// endpoints (as a lookup route resolves) asked for slots that another node
// held, and their work ended, a window later nothing of them is left.
func TestSlotsForgetEndpointsNoLongerUsed(t *testing.T) {
	store := pgtest.Open(t)
	ctx := context.Background()
	var eps []*courier.Endpoint
	for i := range 50 {
		ep := &courier.Endpoint{Name: fmt.Sprintf("ep-%d", i), MaxConcurrency: 1}
		eps = append(eps, ep)
		if _, err := store.AcquireSlots(ctx, "other", []courier.SlotRequest{{Endpoint: ep.Name, Max: 1, N: 1}}, time.Minute, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	s := newEndpointSlots(store)
	t0 := time.Now()
	if err := s.refresh(ctx, "node", eps, nil, t0); err != nil {
		t.Fatal(err)
	}
	for _, ep := range eps {
		s.claimed(ep.Name, false)
	}
	s.mu.Lock()
	paused := len(s.retryAt)
	s.mu.Unlock()
	if paused != len(eps) {
		t.Fatalf("%d endpoints wait to ask again, want all %d (another node holds their slots)", paused, len(eps))
	}
	if err := s.refresh(ctx, "node", nil, nil, t0.Add(slotWindow)); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.retryAt) != 0 || len(s.hungry) != 0 || len(s.held) != 0 {
		t.Errorf("after a window without work: %d paused, %d hungry, %d held endpoints; want none", len(s.retryAt), len(s.hungry), len(s.held))
	}
}
