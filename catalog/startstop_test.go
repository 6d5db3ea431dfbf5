package catalog_test

import (
	"context"
	"testing"
	"time"

	"github.com/courier-gw/courier/catalog"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
)

func TestStartStopStress(t *testing.T) {
	kr, err := catalog.NewKeyring(newKey(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := catalog.Open(context.Background(), catalog.Options{Store: sqlitetest.Open(t), Keyring: kr, PollInterval: time.Millisecond,
		ListenFunc: func(ctx context.Context, changed func(int64)) {
			changed(0)
			<-ctx.Done()
		}})
	if err != nil {
		t.Fatal(err)
	}
	startstoptest.Stress(t, c)
}
