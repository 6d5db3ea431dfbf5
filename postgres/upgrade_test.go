package postgres_test

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/storetest"
	"github.com/jackc/pgx/v5"
)

// A database made by the release that kept the order of keyed messages
// with triggers (migrations up to 0004), with waiting, in-flight and
// suspended keyed messages and an operator action in it, upgrades in place,
// goes on in order and keeps the action in its audit log.
func TestUpgradeKeepsTheOrder(t *testing.T) {
	conn, exec, dsn, schema := oldDatabase(t, 5)
	ctx := context.Background()
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

	s := openStore(t, dsn, postgres.Options{Schema: schema})
	storetest.UsageAfterUpgrade(t, s)
	storetest.AuditAfterUpgrade(t, s, made)
	storetest.OrderAfterUpgrade(t, s, made)

	// Nothing in the database decides any more.
	var triggers int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal`, schema).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("%d triggers left after the upgrade (%v)", triggers, err)
	}
}

// A database made before migration 0017, with a message sent to a route
// and a published one (its lead and a shared delivery) in it, upgrades in
// place to one index of ids, which still refuses what the two did: an id
// taken by one kind for the other, another content under an id, a second
// lead. The shared delivery still reads its lead's payload.
func TestUpgradeKeepsIdsUnique(t *testing.T) {
	conn, exec, dsn, schema := oldDatabase(t, 17)
	ctx := context.Background()
	made := time.Now().UTC().Truncate(time.Microsecond)
	sent, pub := storetest.UpgradeIDs(t, made)
	for i, m := range append([]*courier.Message{sent}, pub...) {
		shared := i > 1 // the message sent to a route and the lead keep their payloads
		var seq int64
		if err := conn.QueryRow(ctx, `INSERT INTO messages (id, subscription, shared, type, route, size, content_type, hash, state,
			round_started_at, next_attempt_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued', $9, $9, $9, $9)
			RETURNING seq`, m.ID, m.Subscription, shared, m.Type, m.Route, len(m.Payload), m.ContentType, m.Hash, made).Scan(&seq); err != nil {
			t.Fatal(err)
		}
		if !shared {
			exec(`INSERT INTO bodies (seq, payload) VALUES ($1, $2)`, seq, m.Payload)
		}
	}

	s := openStore(t, dsn, postgres.Options{Schema: schema})
	storetest.IdsAfterUpgrade(t, s, made)
	var indexes []string
	rows, err := conn.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'messages'
		AND indexname IN ('messages_id', 'messages_lead', 'messages_key') ORDER BY indexname`, schema)
	if err == nil {
		indexes, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	if err != nil || len(indexes) != 1 || indexes[0] != "messages_key" {
		t.Errorf("indexes of ids after the upgrade: %v, %v; want [messages_key]", indexes, err)
	}
}

// A database made before migration 0018, with an endpoint switched off,
// upgrades in place to health read by change: the first read finds the
// endpoint off, the next its switch on.
func TestUpgradeReadsHealthByChange(t *testing.T) {
	_, exec, dsn, schema := oldDatabase(t, 18)
	exec(storetest.UpgradeHealthSQL, time.Now())
	s := openStore(t, dsn, postgres.Options{Schema: schema})
	storetest.HealthAfterUpgrade(t, s)
}

// oldDatabase makes a fresh schema as a release whose last migration came
// before version first left it, and returns a connection to it, a function
// that runs a statement there or fails the test, the database and the
// schema.
func oldDatabase(t *testing.T, first int) (conn *pgx.Conn, exec func(q string, args ...any), dsn, schema string) {
	t.Helper()
	dsn, schema = pgtest.Schema(t)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	exec = func(q string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`SET search_path TO ` + pgx.Identifier{schema}.Sanitize())
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	storetest.MigrateBefore(t, first, exec, `INSERT INTO schema_migrations (version) VALUES ($1)`)
	return conn, exec, dsn, schema
}
