package sqlite

import (
	"path/filepath"
	"testing"
)

// SQLite keeps no count of its memory (see memstatus.go): a store that
// was opened and written leaves the count at 0, where SQLite counting
// would show the pages and statements it holds.
func TestSQLiteCountsNoMemory(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "courier.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := memoryUsed(); n != 0 {
		t.Errorf("SQLite counts %d bytes in use: the count of its allocations is on", n)
	}
}
