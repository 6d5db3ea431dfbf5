package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/storetest"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// openRaw opens a database of the test's own with the driver's options in
// query, and a table t with a primary key.
func openRaw(t *testing.T, path, query string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?"+query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)`); err != nil {
		t.Fatal(err)
	}
	return db
}

// Failures of the database of the moment are unavailable, the caller may
// try again; faults of the request are internal. Each case provokes the
// error from a real database, but for a failing disk.
func TestClassify(t *testing.T) {
	dir := t.TempDir()
	storetest.RunClassify(t, classify, []storetest.ClassifyCase{
		{Name: "busy", Provoke: func(t *testing.T) error {
			path := filepath.Join(dir, "busy.db")
			holder := openRaw(t, path, "_journal_mode=WAL&_txlock=immediate")
			tx, err := holder.Begin() // holds the write lock
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback()
			_, err = openRaw(t, path, "_journal_mode=WAL&_busy_timeout=0").Exec(`INSERT INTO t (v) VALUES ('x')`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "locked", Provoke: func(t *testing.T) error {
			// Connections of one shared cache lock tables, not the file: a
			// read of a table another connection is writing is refused.
			a := openRaw(t, filepath.Join(dir, "locked.db"), "cache=shared")
			a.SetMaxOpenConns(2)
			writer, err := a.Conn(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer writer.Close()
			if _, err := writer.ExecContext(context.Background(), `BEGIN; INSERT INTO t (v) VALUES ('x')`); err != nil {
				t.Fatal(err)
			}
			defer writer.ExecContext(context.Background(), `ROLLBACK`)
			var n int
			return a.QueryRow(`SELECT COUNT(*) FROM t`).Scan(&n)
		}, Want: courier.CodeUnavailable},
		{Name: "disk full", Provoke: func(t *testing.T) error {
			db := openRaw(t, filepath.Join(dir, "full.db"), "")
			db.SetMaxOpenConns(1) // the page limit is the connection's
			var pages int
			if err := db.QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
				t.Fatal(err)
			}
			_, err := db.Exec(`INSERT INTO t (v) VALUES (?)`, strings.Repeat("x", 1<<16))
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "cannot open", Provoke: func(t *testing.T) error {
			db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "no", "such", "dir", "x.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			return db.Ping()
		}, Want: courier.CodeUnavailable},
		{Name: "I/O error", Provoke: func(t *testing.T) error {
			// A failing disk cannot be had on demand; the driver's own
			// error stands for it.
			return sqlite3.Error{Code: sqlite3.ErrIoErr, ExtendedCode: sqlite3.ErrIoErrWrite}
		}, Want: courier.CodeUnavailable},
		{Name: "read-only", Provoke: func(t *testing.T) error {
			path := filepath.Join(dir, "readonly.db")
			openRaw(t, path, "") // made, with its table
			db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, err = db.Exec(`INSERT INTO t (v) VALUES ('x')`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "database closed", Provoke: func(t *testing.T) error {
			db := openRaw(t, filepath.Join(dir, "closed.db"), "")
			db.Close()
			_, err := db.Exec(`INSERT INTO t (v) VALUES ('x')`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "store closed", Provoke: func(t *testing.T) error {
			return errClosed // what a write is told after Close
		}, Want: courier.CodeUnavailable},
		{Name: "context ended", Provoke: func(t *testing.T) error {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := openRaw(t, filepath.Join(dir, "ctx.db"), "").ExecContext(ctx, `INSERT INTO t (v) VALUES ('x')`)
			return err
		}, Want: courier.CodeUnavailable},
		{Name: "constraint", Provoke: func(t *testing.T) error {
			db := openRaw(t, filepath.Join(dir, "constraint.db"), "")
			if _, err := db.Exec(`INSERT INTO t (id, v) VALUES (1, 'x')`); err != nil {
				t.Fatal(err)
			}
			_, err := db.Exec(`INSERT INTO t (id, v) VALUES (1, 'y')`)
			return err
		}, Want: courier.CodeInternal},
		{Name: "syntax", Provoke: func(t *testing.T) error {
			_, err := openRaw(t, filepath.Join(dir, "syntax.db"), "").Exec(`INSERT INTO t (v) VALUE ('x')`)
			return err
		}, Want: courier.CodeInternal},
		{Name: "no such table", Provoke: func(t *testing.T) error {
			_, err := openRaw(t, filepath.Join(dir, "table.db"), "").Exec(`INSERT INTO nope (v) VALUES ('x')`)
			return err
		}, Want: courier.CodeInternal},
		{Name: "scan", Provoke: func(t *testing.T) error {
			var n int
			return openRaw(t, filepath.Join(dir, "scan.db"), "").QueryRow(`SELECT 'not a number'`).Scan(&n)
		}, Want: courier.CodeInternal},
		{Name: "no row where one must be", Provoke: func(t *testing.T) error {
			var n int
			return openRaw(t, filepath.Join(dir, "norow.db"), "").QueryRow(`SELECT id FROM t`).Scan(&n)
		}, Want: courier.CodeInternal},
	})
}
