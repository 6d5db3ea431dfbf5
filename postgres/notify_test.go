package postgres_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/postgres"
	"github.com/jackc/pgx/v5"
)

// A node hears the routes of the messages another node made due, and not
// its own.
func TestListenNamesTheRoutes(t *testing.T) {
	ns := nodes(t, 2)
	a, b := ns[0], ns[1]
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

// Every node hears the version of each topology change, its own too; after
// each (re)connect it hears 0, to look again for what it may have missed.
func TestListenTopology(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	ctx := context.Background()
	opts := postgres.Options{Schema: schema}
	a, b := openStore(t, dsn, opts), openStore(t, dsn, opts)
	heard := make(chan int64, 16)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	b.ListenTopology(lctx, func(version int64) { heard <- version })
	wantHeard(t, heard, 0) // listening
	write := func(s *postgres.Store, base int64) {
		t.Helper()
		o := courier.TopologyObject{Kind: courier.KindEndpoint, Name: "e", Spec: []byte(`{}`), UpdatedAt: time.Now(), UpdatedBy: "t"}
		if _, err := s.WriteTopology(ctx, base, []courier.TopologyObject{o}, nil); err != nil {
			t.Fatal(err)
		}
	}
	write(a, 0)
	wantHeard(t, heard, 1)
	write(b, 1)
	wantHeard(t, heard, 2)

	// The listener's connection is cut: it connects again and says so.
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var cut int
	if err := conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE query = $1`, `LISTEN `+pgx.Identifier{"courier_topology." + schema}.Sanitize()).Scan(&cut); err != nil || cut != 1 {
		t.Fatalf("cut %d listeners (%v), want 1", cut, err)
	}
	wantHeard(t, heard, 0)
	write(a, 2)
	wantHeard(t, heard, 3)

	// It stops with its context: once its connection is gone, it hears
	// nothing more.
	cancel()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var listening int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE query = $1`,
			`LISTEN `+pgx.Identifier{"courier_topology." + schema}.Sanitize()).Scan(&listening); err != nil {
			t.Fatal(err)
		}
		if listening == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d listeners still connected after the context ended", listening)
		}
	}
	write(a, 3)
	select {
	case v := <-heard:
		t.Fatalf("heard %d after the listener's context ended", v)
	case <-time.After(500 * time.Millisecond):
	}
}

// A channel's name is cut to an identifier's 63 bytes, as LISTEN cuts it,
// and never inside a character.
func TestChannelName(t *testing.T) {
	long := strings.Repeat("s", 60)
	for _, tt := range []struct{ prefix, schema, want string }{
		{"courier_due.", "public", "courier_due.public"},
		{"courier_topology.", long, ("courier_topology." + long)[:63]},
		{"courier_topology.", strings.Repeat("s", 45) + "é", "courier_topology." + strings.Repeat("s", 45)}, // é would end at byte 64
	} {
		if got := postgres.ChannelName(tt.prefix, tt.schema); got != tt.want {
			t.Errorf("ChannelName(%q, %q) = %q, want %q", tt.prefix, tt.schema, got, tt.want)
		}
	}
}

// In a schema whose name makes the channel longer than an identifier,
// topology changes are written and heard all the same.
func TestListenTopologyLongSchema(t *testing.T) {
	dsn, short := pgtest.Schema(t)
	schema := short + "_" + strings.Repeat("x", 60-len(short))
	ctx := context.Background()
	s, err := postgres.Open(ctx, dsn, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Error(err)
		}
	})
	heard := make(chan int64, 4)
	s.ListenTopology(ctx, func(version int64) { heard <- version })
	for _, want := range []int64{0, 1} {
		if want == 1 {
			o := courier.TopologyObject{Kind: courier.KindRoute, Name: "r", Spec: []byte(`{}`), UpdatedAt: time.Now(), UpdatedBy: "t"}
			if _, err := s.WriteTopology(ctx, 0, []courier.TopologyObject{o}, nil); err != nil {
				t.Fatal(err)
			}
		}
		wantHeard(t, heard, want)
	}
}

// wantHeard fails t unless the next version a listener hears (on heard),
// within a generous deadline, is want.
func wantHeard(t *testing.T, heard <-chan int64, want int64) {
	t.Helper()
	select {
	case got := <-heard:
		if got != want {
			t.Fatalf("heard %d, want %d", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("heard nothing, want %d", want)
	}
}
