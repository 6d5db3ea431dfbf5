package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/tcpproxy"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Failures of the database of the moment are unavailable, the caller may
// try again; faults of the request are internal. Each case provokes the
// error from a real server, or from the driver talking to one.
func TestClassify(t *testing.T) {
	dsn := pgtest.DSN(t)
	ctx := context.Background()
	connect := func(t *testing.T) *pgx.Conn {
		t.Helper()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(context.WithoutCancel(ctx)) })
		return conn
	}
	exec := func(q string) func(t *testing.T) error {
		return func(t *testing.T) error {
			_, err := connect(t).Exec(ctx, q)
			return err
		}
	}
	// raise has the server fail with a SQLSTATE of a class that cannot be
	// had on demand (a full disk, a crash).
	raise := func(sqlstate string) func(t *testing.T) error {
		return exec(`DO $$ BEGIN RAISE EXCEPTION 'raised' USING ERRCODE = '` + sqlstate + `'; END $$`)
	}
	// terminated returns a connection whose backend an administrator
	// ended, with the error it was told so with.
	terminated := func(t *testing.T) (*pgx.Conn, error) {
		t.Helper()
		victim := connect(t)
		var pid int
		if err := victim.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, err := connect(t).Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
		for range 50 { // until the victim hears of its end
			if _, err := victim.Exec(ctx, `SELECT 1`); err != nil {
				return victim, err
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the terminated backend still answers")
		return nil, nil
	}
	storetest.RunClassify(t, postgres.Classify, []storetest.ClassifyCase{
		{Name: "backend terminated", Provoke: func(t *testing.T) error {
			_, err := terminated(t)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "a query on a connection lost before", Provoke: func(t *testing.T) error {
			conn, _ := terminated(t)
			_, err := conn.Exec(ctx, `SELECT 1`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "network cut during a statement", Provoke: func(t *testing.T) error {
			proxy, conn := connectThroughProxy(t, dsn)
			cut := time.AfterFunc(100*time.Millisecond, proxy.Close)
			defer cut.Stop()
			_, err := conn.Exec(ctx, `SELECT pg_sleep(5)`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "pool closed", Provoke: func(t *testing.T) error {
			pool, err := pgxpool.New(ctx, dsn)
			if err != nil {
				t.Fatal(err)
			}
			pool.Close()
			_, err = pool.Exec(ctx, `SELECT 1`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "no server", Provoke: func(t *testing.T) error {
			_, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=2")
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "waiting for the pool past the deadline", Provoke: func(t *testing.T) error {
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			held, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer held.Release()
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err = pool.Exec(short, `SELECT 1`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "statement timeout", Provoke: exec(`SET statement_timeout = '10ms'; SELECT pg_sleep(1)`), Want: courier.CodeUnavailable},
		{Name: "connection exception", Provoke: raise("08006"), Want: courier.CodeUnavailable},
		{Name: "disk full", Provoke: raise("53100"), Want: courier.CodeUnavailable},
		{Name: "cannot connect now", Provoke: raise("57P03"), Want: courier.CodeUnavailable},
		{Name: "system I/O error", Provoke: raise("58030"), Want: courier.CodeUnavailable},
		{Name: "deadlock", Provoke: raise("40P01"), Want: courier.CodeUnavailable},
		{Name: "lock not available", Provoke: raise("55P03"), Want: courier.CodeUnavailable},
		{Name: "idle in transaction too long", Provoke: raise("25P03"), Want: courier.CodeUnavailable},
		{Name: "a write to a standby", Provoke: exec(`BEGIN READ ONLY; CREATE TABLE read_only_probe (id int); ROLLBACK`), Want: courier.CodeUnavailable},
		{Name: "store closed", Provoke: func(t *testing.T) error { return postgres.ErrStoreClosed }, Want: courier.CodeUnavailable},
		{Name: "syntax", Provoke: exec(`SELEC 1`), Want: courier.CodeInternal},
		{Name: "unique violation", Provoke: exec(`CREATE TEMP TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1); INSERT INTO t VALUES (1)`), Want: courier.CodeInternal},
		{Name: "data", Provoke: exec(`SELECT 'x'::int`), Want: courier.CodeInternal},
		{Name: "server's internal error", Provoke: raise("XX000"), Want: courier.CodeInternal},
		{Name: "scan", Provoke: func(t *testing.T) error {
			var n int
			return connect(t).QueryRow(ctx, `SELECT 'not a number'`).Scan(&n)
		}, Want: courier.CodeInternal},
		{Name: "no row where one must be", Provoke: func(t *testing.T) error {
			var n int
			return connect(t).QueryRow(ctx, `SELECT 1 WHERE false`).Scan(&n)
		}, Want: courier.CodeInternal},
	})
}

// connectThroughProxy connects to the database through a proxy of the
// test's own, which the test may close to cut the connection.
func connectThroughProxy(t *testing.T, dsn string) (*tcpproxy.Proxy, *pgx.Conn) {
	t.Helper()
	proxy, proxied := proxyDSN(t, dsn)
	conn, err := pgx.Connect(context.Background(), proxied)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return proxy, conn
}

// proxyDSN starts a proxy to the database of dsn and returns it with the
// dsn that goes through it.
func proxyDSN(t *testing.T, dsn string) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u.Host = proxy.Addr()
	return proxy, u.String()
}

// A store whose database goes away answers reads and writes with
// unavailable, not with an internal error.
func TestDatabaseGoneIsUnavailable(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	proxy, proxied := proxyDSN(t, dsn)
	ctx := context.Background()
	s := openStore(t, proxied, postgres.Options{Schema: schema})
	m := &courier.Message{ID: "m", Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	proxy.Close()
	_, err := s.Message(ctx, "m")
	if courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Errorf("Message with the database gone: %v, want unavailable", err)
	}
	again := *m
	again.ID = "m2"
	if _, err := s.Ingest(ctx, []*courier.Message{&again}); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Errorf("Ingest with the database gone: %v, want unavailable", err)
	}
}

// A commit whose wait for a synchronous standby is cancelled (by a
// statement_timeout, say) is committed on the primary only, and PostgreSQL
// reports it a success with a warning. Such a write is not acknowledged:
// the ingest is unavailable (503), never created (201). The warning is
// raised here by a trigger, with the text the server gives it, since the
// shared server of the tests has no standby to wait for; the failover
// process test of cmd/courier runs servers of its own.
func TestUnreplicatedCommitIsUnavailable(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	s := openStore(t, dsn, postgres.Options{Schema: schema, MaxConns: 2})
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sc := pgx.Identifier{schema}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE FUNCTION `+sc+`.warn_unreplicated() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			RAISE WARNING 'canceling wait for synchronous replication due to user request'
				USING DETAIL = 'The transaction has already committed locally, but might not have been replicated to the standby.';
			RETURN NULL;
		END $$;
		CREATE TRIGGER warn_unreplicated AFTER INSERT ON `+sc+`.messages
			FOR EACH STATEMENT EXECUTE FUNCTION `+sc+`.warn_unreplicated()`); err != nil {
		t.Fatal(err)
	}
	msg := func(id string) *courier.Message {
		m := &courier.Message{ID: id, Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		return m
	}
	if res, err := s.Ingest(ctx, []*courier.Message{msg("m1")}); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Errorf("ingest answered with the warning of an unreplicated commit: %v, %v; want unavailable", res, err)
	}
	// Ordering keys take the path of a transaction of its own.
	keyed := msg("m2")
	keyed.OrderingKey = "k"
	if res, err := s.Ingest(ctx, []*courier.Message{keyed}); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Errorf("keyed ingest answered with the warning of an unreplicated commit: %v, %v; want unavailable", res, err)
	}
	// Other warnings are no matter, and the store takes writes again on
	// new connections.
	if _, err := conn.Exec(ctx, `CREATE OR REPLACE FUNCTION `+sc+`.warn_unreplicated() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE WARNING 'some other warning'; RETURN NULL; END $$`); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Ingest(ctx, []*courier.Message{msg("m3")}); err != nil || res[0].Status != courier.IngestCreated {
		t.Errorf("ingest after the warning's connection was dropped: %v, %v; want created", res, err)
	}
}
