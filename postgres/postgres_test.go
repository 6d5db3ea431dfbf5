package postgres_test

import (
	"context"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) courier.Store { return pgtest.Open(t) })
}

func TestSharedLimits(t *testing.T) {
	storetest.RunLimits(t, func(t *testing.T) courier.SharedLimits { return pgtest.Open(t) })
}

// openStore opens a store on the database of dsn with opts (its schema one
// that a test made, or that another node has open); it is closed when the
// test ends.
func openStore(t testing.TB, dsn string, opts postgres.Options) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// nodes opens n stores on one fresh schema: n nodes of one installation.
func nodes(t testing.TB, n int) []*postgres.Store {
	t.Helper()
	dsn, schema := pgtest.Schema(t)
	var out []*postgres.Store
	for range n {
		out = append(out, openStore(t, dsn, postgres.Options{Schema: schema}))
	}
	return out
}
