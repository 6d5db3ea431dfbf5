package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/storetest"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// TestDeliveryStatementsCompileOnce checks that ingesting, claiming and
// writing outcomes run the statements prepared when the store opened, and
// that SQLite does not compile them again at each new binding of their
// parameters: a recompiled claim cost more than the claim itself. SQLite
// asks the authorizer about every statement it compiles, so the number of
// its calls must not grow from one round of deliveries to the next.
func TestDeliveryStatementsCompileOnce(t *testing.T) {
	var compiles atomic.Int64
	hook := func(c *sqlite3.SQLiteConn) error {
		c.RegisterAuthorizer(func(action int, _, _, _ string) int {
			// BEGIN and COMMIT are compiled each time by the driver.
			if action != sqlite3.SQLITE_TRANSACTION {
				compiles.Add(1)
			}
			return sqlite3.SQLITE_OK
		})
		return nil
	}
	connectHook.Store(&hook)
	t.Cleanup(func() { connectHook.Store(nil) })

	s, err := Open(filepath.Join(t.TempDir(), "courier.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	now := time.Now()
	ingested := 0
	ingest := func(n int) {
		t.Helper()
		var msgs []*courier.Message
		for range n {
			i := ingested
			ingested++
			m := &courier.Message{ID: fmt.Sprintf("m-%d", i), Type: "t", Route: "r", Payload: []byte(`{}`), ContentType: "application/json",
				Headers: map[string]string{"X-N": fmt.Sprint(i)}}
			if i%2 == 1 {
				m.OrderingKey = fmt.Sprintf("k-%d", i%3)
			}
			courier.Accept(m, courier.DefaultPolicy(), false, now)
			msgs = append(msgs, m)
		}
		if _, err := s.Ingest(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	ingest(30)
	round := func(limit int) int {
		t.Helper()
		ingest(limit)
		now = now.Add(time.Second)
		got, err := s.ClaimDue(ctx, courier.Claim{Now: now, LeaseUntil: now.Add(time.Minute), Owner: "test",
			Routes: []courier.RouteQuota{{Route: "r", Limit: limit}}})
		if err != nil {
			t.Fatal(err)
		}
		// Odd rounds write Deliveries, even ones whole changes.
		storetest.MustApply(t, s, storetest.Delivered(got, now, limit%2 == 1)...)
		return len(got)
	}
	round(3)
	before := compiles.Load()
	delivered := 0
	for _, limit := range []int{1, 7, 2, 11, 5} {
		delivered += round(limit)
	}
	if delivered == 0 {
		t.Fatal("nothing was claimed")
	}
	if n := compiles.Load() - before; n != 0 {
		t.Errorf("SQLite compiled statements %d times over five rounds of ingests, claims and outcomes; want none", n)
	}
}
