// Package receivertest runs receive locations for the tests of what shows
// and switches them: the API and the dashboard.
package receivertest

import (
	"context"
	"testing"

	courier "github.com/courier-gw/courier"
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
