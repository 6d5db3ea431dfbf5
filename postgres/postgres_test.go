package postgres_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/storetest"
	"github.com/jackc/pgx/v5"
)

// testDSN returns the database of the tests, or skips (fails in CI) without one.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv("COURIER_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("COURIER_TEST_POSTGRES is not set; CI runs every store test")
		}
		t.Skip("set COURIER_TEST_POSTGRES=postgres://postgres@127.0.0.1:5432/test?sslmode=disable to run the PostgreSQL tests")
	}
	return dsn
}

// mustOpen opens a store in a fresh schema of its own, dropped at the end.
func mustOpen(t testing.TB) *postgres.Store {
	t.Helper()
	dsn := testDSN(t)
	schema := fmt.Sprintf("courier_test_%d_%d", time.Now().UnixNano(), rand.IntN(1<<20))
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, MaxConns: 4})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		s.Close()
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) courier.Store { return mustOpen(t) })
}

func TestSharedLimits(t *testing.T) {
	storetest.RunLimits(t, func(t *testing.T) courier.SharedLimits { return mustOpen(t) })
}
