package postgres_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/pgtest"
	"github.com/courier-gw/courier/postgres"
)

// A node hears the routes of the messages another node made due, and not
// its own.
func TestListenNamesTheRoutes(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	open := func() *postgres.Store {
		s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	var mu sync.Mutex
	heard := map[string]bool{}
	ready := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.Listen(ctx, func(routes []string) {
		mu.Lock()
		defer mu.Unlock()
		if routes == nil {
			select {
			case ready <- struct{}{}: // listening
			default:
			}
			return
		}
		for _, r := range routes {
			heard[r] = true
		}
	})
	<-ready
	ingest := func(s courier.Store, routes ...string) {
		t.Helper()
		var msgs []*courier.Message
		for _, r := range routes {
			m := &courier.Message{ID: "m-" + r, Type: "t", Route: r, Payload: []byte("x"), ContentType: "text/plain"}
			courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
			msgs = append(msgs, m)
		}
		if _, err := s.Ingest(context.Background(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	ingest(b, "own")
	ingest(a, "x", "y")
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := make([]string, 0, len(heard))
		for r := range heard {
			got = append(got, r)
		}
		mu.Unlock()
		slices.Sort(got)
		if slices.Equal(got, []string{"x", "y"}) {
			break
		}
		if time.Now().After(deadline) || len(got) > 2 {
			t.Fatalf("heard %v, want [x y]", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
