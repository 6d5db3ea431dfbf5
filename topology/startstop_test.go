package topology_test

import (
	"context"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
	"github.com/courier-gw/courier/topology"
)

func TestStartStopStress(t *testing.T) {
	kr, err := topology.NewKeyring(newKey(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := topology.Open(context.Background(), topology.Options{Store: sqlitetest.Open(t), Keyring: kr, PollInterval: time.Millisecond,
		ListenFunc: func(ctx context.Context, changed func(int64)) {
			changed(0)
			<-ctx.Done()
		}})
	if err != nil {
		t.Fatal(err)
	}
	startstoptest.Stress(t, c)
}
