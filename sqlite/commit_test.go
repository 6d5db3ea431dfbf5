package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func openTest(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "courier.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// A failing write undoes its own changes only, even when it shares its
// transaction with others.
func TestGroupIsolatesFailedOp(t *testing.T) {
	s := openTest(t)
	var wg sync.WaitGroup
	const n = 200
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = s.write(context.Background(), func(tx *sql.Tx) error {
				if _, err := tx.Exec(`INSERT INTO actions (at, who, kind, subject) VALUES (1, 'test', 'x', ?)`, fmt.Sprint(i)); err != nil {
					return err
				}
				if i%3 == 0 {
					return errors.New("fail on purpose")
				}
				return nil
			})
		}(i)
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		var count int
		if err := s.rdb.QueryRow(`SELECT COUNT(*) FROM actions WHERE subject = ?`, fmt.Sprint(i)).Scan(&count); err != nil {
			t.Fatal(err)
		}
		failed := i%3 == 0
		if failed != (errs[i] != nil) {
			t.Fatalf("op %d: err %v", i, errs[i])
		}
		if want := map[bool]int{true: 0, false: 1}[failed]; count != want {
			t.Fatalf("op %d (failed %v): %d rows, want %d", i, failed, count, want)
		}
	}
}

// A full disk answers unavailable, keeps every message acknowledged before,
// and the store works again once there is room.
func TestDiskFull(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	limit := func(pages int) {
		t.Helper()
		// The write connection is the committer's; a write op runs on it.
		if err := s.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	var pages int
	if err := s.rdb.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	limit(pages + 20)

	payload := make([]byte, 16<<10)
	var acked []string
	var full error
	for i := 0; i < 100 && full == nil; i++ {
		m := &courier.Message{ID: fmt.Sprintf("m-%d", i), Type: "t", Route: "r", Payload: payload, ContentType: "application/octet-stream"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
			full = err
			break
		}
		acked = append(acked, m.ID)
	}
	if full == nil {
		t.Fatal("ingest never failed with a 20-page limit")
	}
	if got := courier.ErrorCode(full); got != courier.CodeUnavailable {
		t.Fatalf("disk full: code %q (%v), want unavailable", got, full)
	}
	for _, id := range acked {
		if _, err := s.Message(ctx, id); err != nil {
			t.Fatalf("acknowledged %s lost: %v", id, err)
		}
	}
	limit(1 << 30) // room again
	m := &courier.Message{ID: "after", Type: "t", Route: "r", Payload: payload, ContentType: "application/octet-stream"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatalf("ingest after room was made: %v", err)
	}
}

// Reopening a store keeps what it had and does not migrate twice.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := &courier.Message{ID: "kept", Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if _, err := s.Message(context.Background(), "kept"); err != nil {
		t.Fatal(err)
	}
	// Each migration is applied once, not again at the reopen.
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	var versions int
	if err := s.rdb.QueryRow(`SELECT COUNT(*) FROM schema_migrations`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != len(names) {
		t.Fatalf("%d migration rows, want %d", versions, len(names))
	}
}

// A second Open of the same database is refused while the first is open,
// and allowed after it closes.
func TestOneProcessPerDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "in use by another courier") {
		t.Fatalf("second open: %v", err)
	}
	s.Close()
	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	s2.Close()
}

// A durable write is answered only after the WAL's fsync: when the fsync
// fails, ingest fails (the sender is never told 201 for what may not be on
// disk), while a claim, which needs no fsync, goes through.
func TestFailedSyncFailsDurableWrites(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	m := &courier.Message{ID: "before", Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	var syncs atomic.Int64
	s.syncWAL = func() error { syncs.Add(1); return errors.New("EIO") }

	m2 := &courier.Message{ID: "during", Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m2, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(ctx, []*courier.Message{m2}); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Fatalf("ingest with a failing fsync: %v, want unavailable", err)
	}
	if syncs.Load() == 0 {
		t.Fatal("ingest was answered without an fsync")
	}
	got, err := s.ClaimDue(ctx, courier.Claim{Now: time.Now().Add(time.Second), LeaseUntil: time.Now().Add(time.Minute),
		Owner: "t", Routes: []courier.RouteQuota{{Route: "r", Limit: 10}}})
	if err != nil || len(got) == 0 {
		t.Fatalf("claim with a failing fsync: %d messages, %v", len(got), err)
	}
}
