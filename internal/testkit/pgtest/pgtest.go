// Package pgtest gives tests a PostgreSQL store of their own: a fresh schema
// in the database named by COURIER_TEST_POSTGRES, dropped when the test ends.
package pgtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/testenv"
	"github.com/courier-gw/courier/postgres"
	"github.com/jackc/pgx/v5"
)

// DSN returns the database of the tests, from COURIER_TEST_POSTGRES; the
// test skips without it (fails in CI).
func DSN(t testing.TB) string {
	t.Helper()
	return testenv.Postgres.URL(t)
}

// Schema makes a fresh schema for the test, dropped (with everything in it)
// when the test ends, and returns the database and the schema's name.
func Schema(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn = DSN(t)
	schema = fmt.Sprintf("courier_test_%d_%d", time.Now().UnixNano(), rand.IntN(1<<20))
	exec(t, dsn, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
	t.Cleanup(func() { exec(t, dsn, postgres.DropSchemaSQL(schema)) })
	return dsn, schema
}

// SchemaDSN makes a fresh schema as Schema does and returns a DSN whose
// connections use it (search_path), for a courier process to be given,
// and the schema's name.
func SchemaDSN(t testing.TB) (dsn, schema string) {
	t.Helper()
	dsn, schema = Schema(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

// Open opens a store in a fresh schema; it is closed when the test ends.
func Open(t testing.TB) *postgres.Store {
	t.Helper()
	dsn, schema := Schema(t)
	s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, MaxConns: 8})
	if err != nil {
		t.Fatalf("open the postgres store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func exec(t testing.TB, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatalf("connect to %s: %v", dsn, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}
