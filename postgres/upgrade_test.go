package postgres_test

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/storetest"
	"github.com/jackc/pgx/v5"
)

// A database made by the release that kept the order of keyed messages
// with triggers (migrations up to 0004), with waiting, in-flight and
// suspended keyed messages and an operator action in it, upgrades in place,
// goes on in order and keeps the action in its audit log.
func TestUpgradeKeepsTheOrder(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`SET search_path TO ` + pgx.Identifier{schema}.Sanitize())
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	names, err := filepath.Glob("migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	for v, name := range names[:4] {
		body, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		exec(string(body))
		exec(`INSERT INTO schema_migrations (version) VALUES ($1)`, v+1)
	}
	made := time.Now().UTC().Truncate(time.Microsecond)
	for _, q := range storetest.UpgradeSQL {
		exec(q, made)
	}
	for _, id := range storetest.UpgradeWaiting {
		var waiting bool
		if err := conn.QueryRow(ctx, `SELECT next_attempt_at IS NULL FROM messages WHERE id = $1`, id).Scan(&waiting); err != nil || !waiting {
			t.Fatalf("the old triggers did not make %s wait: %v", id, err)
		}
	}

	s, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	storetest.AuditAfterUpgrade(t, s, made)
	storetest.OrderAfterUpgrade(t, s, made)

	// Nothing in the database decides any more.
	var triggers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal`, schema).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("%d triggers left after the upgrade (%v)", triggers, err)
	}
}
