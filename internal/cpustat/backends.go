package cpustat

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// Backends are the PostgreSQL server processes that serve the connections
// of one application_name, with the server's own processes (WAL writer,
// checkpointer, autovacuum and the like, which work for every client), and
// the CPU time each had used when they were read. The difference of two
// readings is what those connections cost the database in between: other
// clients' backends are not counted, so it holds while others use the
// server too (their share of its own processes' work aside).
type Backends map[int]int64 // ticks by process id

// ReadBackends reads the backends of the server at dsn whose connections
// carry application name app, and the server's own processes. The query
// runs on a connection of its own under another name, so it is not
// counted.
func ReadBackends(ctx context.Context, dsn, app string) (Backends, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = app + "-measuring"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE application_name = $1 OR backend_type NOT IN ('client backend', 'walsender')`, app)
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	b := Backends{}
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // ended meanwhile, or the server is not on this machine
		}
		if ticks, ok := postgresTicks(stat); ok {
			b[int(pid)] = ticks
		}
	}
	return b, nil
}

// Since is the CPU time the backends used after an earlier reading: for
// each backend read now, its time less what it had then (all of it, when
// it started since). A backend that ended in between is not counted.
func (b Backends) Since(earlier Backends) time.Duration {
	var ticks int64
	for pid, n := range b {
		if n >= earlier[pid] { // a reused process id starts again from zero
			ticks += n - earlier[pid]
		} else {
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}
