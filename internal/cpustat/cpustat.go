// Package cpustat tells the CPU time that a measured run cost: this
// process's, and that of a PostgreSQL server on the same machine, so that
// the benchmarks can say what one delivered message costs each of them.
package cpustat

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Process is the user and system CPU time this process has used.
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// The CPU of the database, when PostgreSQL runs on this machine: read from
// /proc, the sum over its processes of their own CPU time and that of the
// children they reaped (the postmaster reaps the backends that ended, so
// their time is not lost). Every other client of the same server counts as
// well: run the benchmark on a server nothing else uses, or read Backends
// instead.

// clockTicks is the unit of the times in /proc/PID/stat (USER_HZ), 100 on
// every Linux that courier runs on.
const clockTicks = 100

// LocalDatabase reports whether the DSN names a server on this machine: a
// Unix socket or a loopback address.
func LocalDatabase(dsn string) bool {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return false
	}
	if strings.HasPrefix(cfg.Host, "/") || cfg.Host == "localhost" {
		return true
	}
	ip := net.ParseIP(cfg.Host)
	return ip != nil && ip.IsLoopback()
}

// Database returns the CPU time the processes named postgres have used,
// and whether any was found.
func Database() (time.Duration, bool) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return 0, false
	}
	var ticks int64
	found := false
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // ended meanwhile
		}
		n, ok := postgresTicks(b)
		if ok {
			ticks += n
			found = true
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, found
}

// postgresTicks reads utime, stime, cutime and cstime from the contents of
// /proc/PID/stat when its command is postgres.
func postgresTicks(stat []byte) (int64, bool) {
	open, end := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
	if open < 0 || end < open || string(stat[open+1:end]) != "postgres" {
		return 0, false
	}
	// After the command: state, then the fields from ppid on; utime is
	// field 14 of the line, so the 12th after the command.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 15 {
		return 0, false
	}
	var sum int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, false
		}
		sum += n
	}
	return sum, true
}
