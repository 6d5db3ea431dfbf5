package cpustat

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5"
)

func TestBackendsSince(t *testing.T) {
	earlier := Backends{10: 5, 11: 7, 12: 3}
	now := Backends{10: 9, 12: 1, 13: 2} // 11 ended; 12 is a new process under a reused id; 13 started
	if got, want := now.Since(earlier), (4+1+2)*time.Second/clockTicks; got != want {
		t.Errorf("Since = %v, want %v", got, want)
	}
}

// The backends of one application name are measured, and another
// client's work on the same server meanwhile is not.
func TestReadBackends(t *testing.T) {
	dsn := pgtest.DSN(t)
	if !LocalDatabase(dsn) {
		t.Skip("the test database is not on this machine")
	}
	ctx := context.Background()
	app := fmt.Sprintf("cpustat-test-%d", os.Getpid())
	connect := func(name string) *pgx.Conn {
		cfg, err := pgx.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["application_name"] = name
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close(ctx) })
		return conn
	}
	measured, other := connect(app), connect(app+"-other")
	read := func() Backends {
		b, err := ReadBackends(ctx, dsn, app)
		if err != nil {
			t.Fatal(err)
		}
		var pid uint32
		if err := measured.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		if _, ok := b[int(pid)]; !ok {
			t.Fatalf("read backends %v; want the one of pid %d among them", b, pid)
		}
		return b
	}
	spend := func(conn *pgx.Conn) {
		// Enough work to pass several clock ticks on any machine.
		if _, err := conn.Exec(ctx, `SELECT count(*) FROM generate_series(1, 3000000)`); err != nil {
			t.Fatal(err)
		}
	}
	before := read()
	spend(other)
	counted := read().Since(before)
	before = read()
	spend(measured)
	spent := read().Since(before)
	if spent <= 0 || counted >= spent/2 {
		t.Errorf("the measured connection's work counted %v, another client's %v; want the first alone", spent, counted)
	}
}
