package sqlite_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/sqlite"
)

// A claim looks only at the priorities of the stored messages; a store
// opened again knows them from the database, and a priority first met
// later is claimed as well, before lower ones.
func TestClaimsThePrioritiesStored(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "courier.db")
	now := time.Now()
	ingest := func(s *sqlite.Store, id string, priority int) {
		t.Helper()
		m := &courier.Message{ID: id, Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain", Priority: priority}
		courier.Accept(m, &courier.Policy{Priority: priority}, false, now.Add(-time.Second))
		if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	claim := func(s *sqlite.Store) []string {
		t.Helper()
		got, err := s.ClaimDue(ctx, courier.Claim{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "n",
			Routes: []courier.RouteQuota{{Route: "r", Limit: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range got {
			ids = append(ids, m.ID)
		}
		return ids
	}

	s, err := sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ingest(s, "six", 6)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlite.Open(path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ingest(s, "zero", 0)
	ingest(s, "nine", 9)
	if got, want := claim(s), []string{"nine", "six", "zero"}; !slices.Equal(got, want) {
		t.Fatalf("claimed %v, want %v", got, want)
	}
}
