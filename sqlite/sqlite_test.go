package sqlite_test

import (
	"path/filepath"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/sqlite"
	"github.com/courier-gw/courier/storetest"
)

func mustOpen(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(filepath.Join(t.TempDir(), "courier.db"), sqlite.Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) courier.Store { return mustOpen(t) })
}
