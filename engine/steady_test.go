package engine

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// A round's read that began before this node wrote an endpoint's health
// keeps what the write said for that endpoint, and still brings the news
// of every other one: a node that keeps writing one failing endpoint does
// not go on treating another as steady after the store says it is not.
func TestSteadyReadKeepsOnlyNewerWrites(t *testing.T) {
	var s steadyEndpoints
	s.seen(s.generation(), nil, true)
	if !s.is("a", true) || !s.is("b", true) {
		t.Fatal("endpoints without a stored health are not steady")
	}

	gen := s.generation()
	// This node writes a failure of a while the round reads the store; the
	// read (older) still says a is clean, and says b is now suspended.
	s.wrote(courier.EndpointHealth{Endpoint: "a", State: courier.HealthTimeout, Failures: 1})
	s.seen(gen, []courier.EndpointHealth{
		{Endpoint: "a", State: courier.HealthActive},
		{Endpoint: "b", State: courier.HealthSuspended, Suspensions: 1, SuspendedUntil: time.Now().Add(time.Minute)},
	}, true)
	if s.is("a", true) {
		t.Error("a read older than this node's write undid the write")
	}
	if s.is("b", true) {
		t.Error("the read's news of b was thrown away because a was written meanwhile")
	}

	// The next read, begun after the write, is taken whole.
	s.seen(s.generation(), []courier.EndpointHealth{{Endpoint: "a", State: courier.HealthActive}}, true)
	if !s.is("a", true) || !s.is("b", true) {
		t.Errorf("after a newer read: a steady %v, b steady %v; want both", s.is("a", true), s.is("b", true))
	}
}

// An endpoint back to active with its suspensions still counted is not
// steady: a delivery clears the count, so its health must be written.
func TestSteadyNeedsNothingCounted(t *testing.T) {
	var s steadyEndpoints
	s.wrote(courier.EndpointHealth{Endpoint: "a", State: courier.HealthActive, Suspensions: 2})
	if s.is("a", true) {
		t.Error("an active endpoint with two suspensions counted is steady")
	}
	s.wrote(courier.EndpointHealth{Endpoint: "a", State: courier.HealthActive})
	if !s.is("a", true) {
		t.Error("a clean active endpoint is not steady")
	}
}
