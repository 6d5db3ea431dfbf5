// Package receivertest runs receive locations for the tests of what shows
// and switches them (the API and the dashboard), and of the transports
// they read from.
package receivertest

import (
	"context"
	"sync/atomic"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sourcetest"
	"github.com/courier-gw/courier/receiver"
	filetransport "github.com/courier-gw/courier/transport/file"
)

// StartPickup starts a receiver service on store with the one receive
// location r, which must take files from a directory, and stops it when the
// test ends.
func StartPickup(t testing.TB, store courier.Store, topology func() *courier.Topology, r *courier.Receiver) *receiver.Service {
	t.Helper()
	svc := receiver.New(receiver.Options{Store: store, TopologyFunc: topology, Receivers: []*courier.Receiver{r},
		OpenFunc: func(_ context.Context, r *courier.Receiver) (courier.Source, error) {
			return filetransport.OpenPickup(r)
		}})
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop(context.Background()) })
	return svc
}

// StartCounting starts a receiver service on store with the one receive
// location r, which may name the route acme, taking payloads of up to
// 8 MiB from the source open opens; acked counts the items that source
// acknowledges. The service stops when the test ends, if not before.
func StartCounting[S courier.Source](t testing.TB, store courier.Store, r *courier.Receiver, open func(context.Context, *courier.Receiver) (S, error), acked *atomic.Int64) *receiver.Service {
	t.Helper()
	top := &courier.Topology{
		Routes:   map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"a"}}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	svc := receiver.New(receiver.Options{Store: store, Receivers: []*courier.Receiver{r}, MaxPayload: 8 << 20,
		TopologyFunc: func() *courier.Topology { return top },
		OpenFunc: func(ctx context.Context, r *courier.Receiver) (courier.Source, error) {
			src, err := open(ctx, r)
			return &sourcetest.AckCounter{Source: src, Acked: acked}, err
		}})
	if err := svc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Stop(context.Background()) })
	return svc
}
