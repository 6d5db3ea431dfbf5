package sqlite_test

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/sqlite"
	"github.com/courier-gw/courier/storetest"
)

// A database made by the release that kept the order of keyed messages
// with triggers (migrations up to 0006), with waiting, in-flight and
// suspended keyed messages and an operator action in it, upgrades in place,
// goes on in order and keeps the action in its audit log.
func TestUpgradeKeepsTheOrder(t *testing.T) {
	path, db, exec := releaseBefore(t, 7)
	made := time.Now().UTC().Truncate(time.Microsecond)
	for _, q := range storetest.UpgradeSQL {
		exec(strings.ReplaceAll(q, "$1", "?1"), made.UnixMicro())
	}
	for _, id := range storetest.UpgradeWaiting {
		var waiting bool
		if err := db.QueryRow(`SELECT next_attempt_at IS NULL FROM messages WHERE id = ?`, id).Scan(&waiting); err != nil || !waiting {
			t.Fatalf("the old triggers did not make %s wait: %v", id, err)
		}
	}
	db.Close()

	s := openAt(t, path)
	storetest.UsageAfterUpgrade(t, s)
	storetest.AuditAfterUpgrade(t, s, made)
	storetest.OrderAfterUpgrade(t, s, made)

	// Nothing in the database decides any more.
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var triggers int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'trigger'`).Scan(&triggers); err != nil || triggers != 0 {
		t.Errorf("%d triggers left after the upgrade (%v)", triggers, err)
	}
}

// A database made before migration 0017, with an endpoint switched off,
// upgrades in place to health read by change: the first read finds the
// endpoint off, the next its switch on.
func TestUpgradeReadsHealthByChange(t *testing.T) {
	path, db, exec := releaseBefore(t, 17)
	exec(strings.ReplaceAll(storetest.UpgradeHealthSQL, "$1", "?1"), time.Now().UnixMicro())
	db.Close()

	s := openAt(t, path)
	storetest.HealthAfterUpgrade(t, s)
}

// openAt opens the store of the database at path; it is closed when the
// test ends.
func openAt(t *testing.T, path string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// releaseBefore makes a database as the release before migration first
// left it (every migration of a version below first applied and recorded),
// and returns its path, the open database and a way to run statements in
// it that fails the test.
func releaseBefore(t *testing.T, first int) (string, *sql.DB, func(q string, args ...any)) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "courier.db")
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT '')`)
	storetest.MigrateBefore(t, first, exec, `INSERT INTO schema_migrations (version) VALUES (?)`)
	return path, db, exec
}
