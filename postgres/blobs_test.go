package postgres_test

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/jackc/pgx/v5"
)

// Large objects being written hold a connection each, so that few may be
// at once: the store keeps the rest of its pool (8 connections here, 2
// writers) for everything else, and a writer past them waits for one to
// finish, or is refused as unavailable when its caller stops waiting.
func TestLargeObjectWritersAreBounded(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	var open []courier.BlobWriter
	for range 2 {
		w, err := s.Blobs().Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, w)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.Blobs().Create(short); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Fatalf("a third writer at once: %v, want unavailable", err)
	}
	// Meanwhile the store still ingests.
	m := &courier.Message{ID: "small", Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatalf("ingest while blobs are written: %v", err)
	}
	open[0].Close()
	w, err := s.Blobs().Create(ctx)
	if err != nil {
		t.Fatalf("a writer once one finished: %v", err)
	}
	w.Close()
	open[1].Close()
}

// A blob held on after a failed ingest (Spool.CloseLater) holds a
// connection; the store's Close lets go of it rather than wait for it, so
// that a node stops within its shutdown timeout. On the fault this test
// hangs until the test binary's timeout.
func TestCloseLetsGoOfHeldBlobs(t *testing.T) {
	old := courier.IngestSettle
	courier.IngestSettle = time.Hour
	t.Cleanup(func() { courier.IngestSettle = old })
	s := pgtest.Open(t)
	sp := courier.NewSpool(context.Background(), s.Blobs(), 0)
	if _, err := sp.Write(make([]byte, courier.InlineMax+1)); err != nil {
		t.Fatal(err)
	}
	m := &courier.Message{}
	if err := sp.Finish(m); err != nil {
		t.Fatal(err)
	}
	sp.CloseLater()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// Dropping a store's schema takes its large objects with it: they belong
// to the database, and DROP SCHEMA alone would leave them for good.
func TestDropSchemaTakesLargeObjects(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	s := openStore(t, dsn, postgres.Options{Schema: schema, MaxConns: 4})
	w, err := s.Blobs().Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("a payload kept as a large object")); err != nil {
		t.Fatal(err)
	}
	ref, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	s.Close()
	conn, count := largeObjects(t, dsn)
	if count(ref) != 1 {
		t.Fatalf("large object %s is not there after its commit", ref)
	}
	if _, err := conn.Exec(ctx, postgres.DropSchemaSQL(schema)); err != nil {
		t.Fatal(err)
	}
	if n := count(ref); n != 0 {
		t.Errorf("large object %s left after its schema was dropped", ref)
	}
}

// Erasing a payload kept as a large object unlinks the object in the
// erasure's transaction: nothing of it is left in the database.
func TestEraseUnlinksLargeObject(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	s := openStore(t, dsn, postgres.Options{Schema: schema, MaxConns: 4})
	sp := courier.NewSpool(ctx, s.Blobs(), 0)
	if _, err := sp.Write(make([]byte, courier.InlineMax+1)); err != nil {
		t.Fatal(err)
	}
	m := &courier.Message{ID: "big", Type: "invoice", Route: "r", ContentType: "application/pdf"}
	if err := sp.Finish(m); err != nil {
		t.Fatal(err)
	}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	sp.Close()
	_, count := largeObjects(t, dsn)
	if count(m.Blob) != 1 {
		t.Fatalf("large object %s is not there after the ingest", m.Blob)
	}
	if _, err := s.Erase(ctx, "big", courier.Action{At: time.Now(), Who: "dpo"}); err != nil {
		t.Fatal(err)
	}
	if n := count(m.Blob); n != 0 {
		t.Errorf("large object %s left after its payload was erased", m.Blob)
	}
}

// largeObjects connects to the database of dsn, until the test ends, and
// returns the connection with a count of the large objects there with the
// oid ref (1 while it is there).
func largeObjects(t *testing.T, dsn string) (*pgx.Conn, func(ref string) int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	return conn, func(ref string) int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_largeobject_metadata WHERE oid = $1::oid`, ref).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
}
