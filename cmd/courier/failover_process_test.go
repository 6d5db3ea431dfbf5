package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/testenv"
	"github.com/courier-gw/courier/postgres"
	"github.com/jackc/pgx/v5"
)

// pgBin is the environment variable naming the directory of PostgreSQL's
// programs (initdb, pg_ctl, pg_basebackup) for the tests that run servers
// of their own.
var pgBin = testenv.ServiceVar{Name: "COURIER_TEST_PG_BIN", Example: "$(pg_config --bindir)"}

// pgServers runs PostgreSQL servers of a test's own, in a directory of its
// own, from the programs in bin. initdb and pg_ctl refuse to run as root:
// when the test runs as root they run as the postgres user, who owns the
// directory.
type pgServers struct {
	t    *testing.T
	bin  string
	dir  string
	cred *syscall.Credential // nil: as the test's own user
	all  []*pgServer
}

// pgServer is one server of pgServers.
type pgServer struct {
	name string
	data string // its data directory
	log  string // its log file
	port int
}

func newPGServers(t *testing.T) *pgServers {
	t.Helper()
	skipIfShort(t)
	ps := &pgServers{t: t, bin: pgBin.URL(t)}
	dir, err := os.MkdirTemp("", "courier-pg-")
	if err != nil {
		t.Fatal(err)
	}
	ps.dir = dir
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root, the PostgreSQL servers run as the user postgres: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		ps.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	// The servers stop with the test, however it ends; a server stopped
	// already makes pg_ctl fail, which is no matter here.
	t.Cleanup(func() {
		for _, s := range ps.all {
			ps.run("pg_ctl", "stop", "-D", s.data, "-m", "immediate", "-w")
		}
	})
	return ps
}

// run runs one of PostgreSQL's programs and returns what it printed.
func (ps *pgServers) run(program string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(ps.bin, program), args...)
	cmd.Dir = ps.dir
	cmd.Env = append(os.Environ(), "PGHOST="+ps.dir, "LC_ALL=C")
	if ps.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: ps.cred}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// must runs a program as run does, failing the test (with the servers'
// logs) if it fails.
func (ps *pgServers) must(program string, args ...string) {
	ps.t.Helper()
	if out, err := ps.run(program, args...); err != nil {
		ps.t.Fatalf("%s %s: %v\n%s%s", program, strings.Join(args, " "), err, out, ps.logs())
	}
}

// logs returns the servers' logs, for a failure's message.
func (ps *pgServers) logs() string {
	var b strings.Builder
	for _, s := range ps.all {
		text, _ := os.ReadFile(s.log)
		fmt.Fprintf(&b, "\n--- log of the %s:\n%s", s.name, text)
	}
	return b.String()
}

// server names a server of the directory, on a free loopback port.
func (ps *pgServers) server(name string) *pgServer {
	ps.t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(ps.t))
	p, _ := strconv.Atoi(port)
	s := &pgServer{name: name, data: filepath.Join(ps.dir, name), log: filepath.Join(ps.dir, name+".log"), port: p}
	ps.all = append(ps.all, s)
	return s
}

// start starts the server and waits until it takes connections. It listens
// on loopback and on a socket in the directory only. fsync is off: the
// kills of the tests leave the files whole (the machine does not crash), and
// what is tested is the replication, not the disk.
func (ps *pgServers) start(s *pgServer, settings ...string) {
	ps.t.Helper()
	opts := []string{"-c port=" + strconv.Itoa(s.port), "-c listen_addresses=127.0.0.1",
		"-c unix_socket_directories=" + ps.dir, "-c fsync=off", "-c max_connections=60"}
	for _, set := range settings {
		opts = append(opts, "-c "+set)
	}
	ps.must("pg_ctl", "start", "-D", s.data, "-l", s.log, "-w", "-t", "120", "-o", strings.Join(opts, " "))
}

// dsn is the address of the server's database postgres as its superuser.
func (s *pgServer) dsn() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// query runs sql on the server and returns the first column of each row.
func (s *pgServer) query(t *testing.T, sql string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.dsn())
	if err != nil {
		t.Fatalf("connect to the %s: %v", s.name, err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql)
	if err != nil {
		t.Fatalf("%s on the %s: %v", sql, s.name, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var v string
		err := r.Scan(&v)
		return v, err
	})
	if err != nil {
		t.Fatalf("%s on the %s: %v", sql, s.name, err)
	}
	return out
}

// primaryAndStandby runs a primary and a streaming standby of it, made by
// pg_basebackup -R, that is synchronous: the primary's commits wait until
// the standby has them on disk.
func primaryAndStandby(t *testing.T) (ps *pgServers, primary, standby *pgServer) {
	t.Helper()
	ps = newPGServers(t)
	primary, standby = ps.server("primary"), ps.server("standby")
	ps.must("initdb", "-D", primary.data, "-U", "postgres", "--auth=trust", "--no-sync")
	ps.start(primary)
	ps.must("pg_basebackup", "-D", standby.data, "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port),
		"-U", "postgres", "-R", "-X", "stream", "--no-sync")
	// The standby's walreceiver is known to the primary by its
	// cluster_name, which synchronous_standby_names then names. It is set
	// on the primary only (ALTER SYSTEM, after the copy): the standby,
	// promoted, has no standby of its own to wait for.
	ps.startStandby(standby)
	primary.query(t, `ALTER SYSTEM SET synchronous_standby_names = 'standby'`)
	primary.query(t, `SELECT pg_reload_conf()::text`)
	ps.waitSync(primary)
	return ps, primary, standby
}

// startStandby starts the standby, as the walreceiver named standby.
func (ps *pgServers) startStandby(standby *pgServer) {
	ps.t.Helper()
	ps.start(standby, "cluster_name=standby")
}

// waitSync waits until the standby streams from primary as its
// synchronous standby.
func (ps *pgServers) waitSync(primary *pgServer) {
	ps.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		state := primary.query(ps.t, `SELECT state || '/' || sync_state FROM pg_stat_replication WHERE application_name = 'standby'`)
		if len(state) == 1 && state[0] == "streaming/sync" {
			return
		}
		if time.Now().After(deadline) {
			ps.t.Fatalf("the standby is not a streaming synchronous standby within a minute: %v%s", state, ps.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startPGNode starts a node on the database of dsn, configured in a file
// of its own in dir, with the route r to the endpoint ep at the sink.
func startPGNode(t *testing.T, dir, dsn string, sk *sink.Sink) *process {
	t.Helper()
	cfg, err := os.CreateTemp(dir, "node-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Close()
	writeFile(t, cfg.Name(), nodeConfig(freeAddr(t), fmt.Sprintf("{driver: postgres, dsn: %q}", dsn))+
		fmt.Sprintf("endpoints:\n  ep: {transport: http, url: \"%s/ep\", timeout: 5s}\nroutes:\n  r: {endpoints: [ep]}\n", sk.URL()))
	return startServerWith(t, cfg.Name())
}

// TestClusterPostgresFailover: two nodes take single ingests on a
// multi-host DSN (target_session_attrs=read-write) of a primary and a
// synchronous standby that the test runs. The primary is killed (pg_ctl
// stop -m immediate), then the standby promoted. While no server takes
// writes, ingest and readiness answer 503, never a 201; after the
// promotion the nodes take writes again by themselves; every message
// acknowledged with 201, before, during or after, is in the new primary's
// store and is delivered.
func TestClusterPostgresFailover(t *testing.T) {
	ps, primary, standby := primaryAndStandby(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		primary.port, standby.port)
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	dir := t.TempDir()
	nodes := []*process{startPGNode(t, dir, dsn, sk), startPGNode(t, dir, dsn, sk)}

	// The sender: four workers each PUT one new message after another, to
	// the two nodes in turn, recording every answer. A 503 is followed by
	// a short pause, as a client's retry would be.
	var mu sync.Mutex
	var answers []putAnswer
	stopSender := putEach(nodes, 4, 30*time.Second, func(a putAnswer) {
		mu.Lock()
		answers = append(answers, a)
		mu.Unlock()
	})
	defer stopSender()
	// count counts the answers with a status, of node (-1: any), to
	// requests sent after since.
	count := func(status, node int, since time.Time) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, a := range answers {
			if a.status == status && (node < 0 || a.node == node) && !a.sent.Before(since) {
				n++
			}
		}
		return n
	}
	// await waits for cond as waitUntil does, failing with the answers of
	// node since then, by status, besides the node's log.
	await := func(node int, since time.Time, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				byStatus := map[int]int{}
				mu.Lock()
				for _, a := range answers {
					if a.node == node && !a.sent.Before(since) {
						byStatus[a.status]++
					}
				}
				mu.Unlock()
				t.Fatalf("timed out waiting for %s; answers of node %d by status (0: none): %v\n%s", what, node, byStatus, nodes[node].log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	client := &http.Client{Timeout: 30 * time.Second}
	ready := func(p *process) int {
		resp, err := client.Get(p.url + "/readyz")
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	await(0, time.Time{}, "200 messages taken before the kill", func() bool {
		return count(http.StatusCreated, -1, time.Time{}) >= 200
	})
	ps.must("pg_ctl", "stop", "-D", primary.data, "-m", "immediate", "-w")
	killed := time.Now()
	// No server takes writes now: both nodes answer 503, to ingest and to
	// readiness.
	for i, p := range nodes {
		await(i, killed, "503 to ingest and readiness after the kill", func() bool {
			return count(http.StatusServiceUnavailable, i, killed) >= 10 && ready(p) == http.StatusServiceUnavailable
		})
	}
	promoting := time.Now()
	ps.must("pg_ctl", "promote", "-D", standby.data, "-w", "-t", "120")
	promoted := time.Now()
	for i, p := range nodes {
		await(i, promoted, "201 and readiness after the promotion", func() bool {
			return count(http.StatusCreated, i, promoted) >= 50 && ready(p) == http.StatusOK
		})
	}
	stopSender()

	mu.Lock()
	defer mu.Unlock()
	var acked []string
	var before, during, after, refused int
	firstAfter := map[int]time.Time{}
	for _, a := range answers {
		switch {
		case a.err != nil:
			t.Errorf("%s to node %d: no answer within %v: %v", a.id, a.node, client.Timeout, a.err)
		case a.status == http.StatusServiceUnavailable:
			refused++
		case a.status != http.StatusCreated:
			t.Errorf("%s to node %d: %d %s, want 201 or 503", a.id, a.node, a.status, a.body)
		case a.sent.After(killed) && a.done.Before(promoting):
			t.Errorf("%s to node %d: 201 while no server took writes (sent %v after the kill, answered %v before the promotion)",
				a.id, a.node, a.sent.Sub(killed), promoting.Sub(a.done))
		default:
			acked = append(acked, a.id)
			switch {
			case a.done.Before(killed):
				before++
			case a.sent.Before(promoting):
				during++
			default:
				after++
				if f, ok := firstAfter[a.node]; !ok || a.done.Before(f) {
					firstAfter[a.node] = a.done
				}
			}
		}
	}

	// Every acknowledged message is in the new primary's store...
	store, err := postgres.Open(context.Background(), standby.dsn(), postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatalf("open the store on the promoted standby: %v", err)
	}
	defer store.Close()
	for _, id := range acked {
		if _, err := store.Message(context.Background(), id); err != nil {
			t.Errorf("%s was acknowledged with 201 but is not in the promoted standby's store: %v", id, err)
		}
	}
	// ... and arrives at the receiver.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		seen := countByID(sk.All())
		var missing []string
		for _, id := range acked {
			if seen[id] == 0 {
				missing = append(missing, id)
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged messages not delivered within 2 minutes, such as %s\n%s",
				len(missing), len(acked), missing[0], nodes[0].log())
		}
		time.Sleep(100 * time.Millisecond)
	}
	var gaps []string
	for i := range nodes {
		gaps = append(gaps, fmt.Sprintf("node %d %v", i, firstAfter[i].Sub(promoting).Round(time.Millisecond)))
	}
	fmt.Printf("postgres failover: %d messages acknowledged (%d before the kill, %d answered during the outage, %d after the promotion), all in the new primary and delivered; %d ingests answered 503; no server took writes for %v; `pg_ctl promote` took %v; first 201 after it was issued: %s\n",
		len(acked), before, during, after, refused, promoting.Sub(killed).Round(time.Millisecond),
		promoted.Sub(promoting).Round(time.Millisecond), strings.Join(gaps, ", "))
}

// TestClusterPostgresStandbyLost: with the synchronous standby gone, the
// primary's commits wait for it. When such a wait is cancelled (an
// operator's pg_cancel_backend; a statement_timeout does not reach a
// commit), PostgreSQL reports the commit, which is on the primary only, a
// success with a warning. The node answers 503, not 201. Once the standby
// is back, the node takes writes again, and the message sent again is
// acknowledged.
func TestClusterPostgresStandbyLost(t *testing.T) {
	ps, primary, standby := primaryAndStandby(t)
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", primary.port)
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	node := startPGNode(t, t.TempDir(), dsn, sk)
	body := func(id string) string { return `{"type":"order","route":"r","payload":{"id":"` + id + `"}}` }
	node.create(t, "before", body("before"))

	ps.must("pg_ctl", "stop", "-D", standby.data, "-m", "immediate", "-w")
	answer := make(chan int, 1)
	go func() {
		client := &http.Client{Timeout: 2 * time.Minute}
		req, _ := http.NewRequest(http.MethodPut, node.url+"/v1/messages/unreplicated", strings.NewReader(body("unreplicated")))
		resp, err := client.Do(req)
		if err != nil {
			answer <- 0
			return
		}
		resp.Body.Close()
		answer <- resp.StatusCode
	}()
	// The ingest's commit waits for the standby: every wait is cancelled
	// until the ingest is answered.
	deadline := time.Now().Add(time.Minute)
	var got int
	for got == 0 {
		select {
		case got = <-answer:
			if got == 0 {
				t.Fatalf("no answer to the ingest\n%s", node.log())
			}
			continue
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ingest was not answered within a minute of cancelling its commit's wait\n%s", node.log())
		}
		primary.query(t, `SELECT pg_cancel_backend(pid)::text FROM pg_stat_activity WHERE wait_event = 'SyncRep'`)
	}
	if got != http.StatusServiceUnavailable {
		t.Errorf("ingest whose commit's wait for the standby was cancelled: %d, want 503\n%s", got, node.log())
	}
	waitUntil(t, node, time.Minute, "the node's warning of the cancelled wait", func() bool {
		return strings.Contains(node.log(), "wait for a synchronous standby was cancelled")
	})

	ps.startStandby(standby)
	ps.waitSync(primary)
	node.create(t, "after", body("after"))
	// Sent again, the message refused before is taken: created, or found
	// as the primary kept it (and the standby, back, has it now).
	if got := node.put(t, "unreplicated", body("unreplicated")); got != http.StatusCreated && got != http.StatusOK {
		t.Errorf("the refused message sent again: %d, want 201 or 200\n%s", got, node.log())
	}
	arrivalsByID(t, sk, 3, time.Minute)
}
