// Package sqlitetest gives tests a SQLite store of their own, in a
// temporary directory.
package sqlitetest

import (
	"path/filepath"
	"testing"

	"github.com/courier-gw/courier/sqlite"
)

// Open opens a store in a fresh temporary directory; it is closed when the
// test ends.
func Open(t testing.TB) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "courier.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open the sqlite store: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
