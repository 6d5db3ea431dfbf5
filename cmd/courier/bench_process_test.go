package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/cpustat"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
)

// benchJSON runs `courier bench <kind>` with args as a process and returns
// what it measured.
func benchJSON[R any](t *testing.T, kind string, args ...string) R {
	t.Helper()
	cmd := exec.Command(courierBin, append([]string{"bench", kind, "--output", "json"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bench %s %v: %v\n%s%s", kind, args, err, out, stderr.String())
	}
	var res R
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("bench %s %v printed %q: %v", kind, args, out, err)
	}
	return res
}

// The delivery benchmark runs its receiver in a process of its own, counts
// every message there, and tells the CPU each process spent per message;
// with the receiver in this process, its CPU is in courier's.
func TestBenchDeliverWithReceiverProcess(t *testing.T) {
	t.Parallel()
	res := benchJSON[deliverResult](t, "deliver", "--messages", "2000", "--endpoints", "3")
	if res.Messages != 2000 || res.Delivered != 2000 || res.DeliverPerSec <= 0 {
		t.Fatalf("measured %+v; want 2000 messages, all delivered", res)
	}
	if res.CourierCPUus <= 0 || res.ReceiverCPUus <= 0 {
		t.Errorf("CPU per message: courier %v µs, receiver %v µs; want both measured", res.CourierCPUus, res.ReceiverCPUus)
	}

	res = benchJSON[deliverResult](t, "deliver", "--messages", "2000", "--endpoints", "3", "--in-process-receiver")
	if res.Delivered != 2000 || res.CourierCPUus <= 0 || res.ReceiverCPUus != 0 {
		t.Errorf("with the receiver in process, measured %+v; want 2000 delivered and only courier's CPU", res)
	}
}

// On PostgreSQL on this machine, the benchmark tells the database's CPU
// per delivered message as well.
func TestBenchDeliverOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	res := benchJSON[deliverResult](t, "deliver", "--messages", "2000", "--endpoints", "3", "--postgres", dsn)
	if res.Delivered != 2000 {
		t.Fatalf("measured %+v; want 2000 delivered", res)
	}
	if cpustat.LocalDatabase(dsn) && res.DatabaseCPUus <= 0 {
		t.Errorf("database CPU per message %v µs; want it measured for a database on this machine", res.DatabaseCPUus)
	}
	if res.KeyLockBatches != 0 {
		t.Errorf("without ordering keys, %d writes of outcomes held keys' locks; want none", res.KeyLockBatches)
	}

	// With ordering keys, how long writes of outcomes held the keys'
	// locks: every write of keyed outcomes takes them.
	res = benchJSON[deliverResult](t, "deliver", "--messages", "2000", "--ordering-keys", "50", "--postgres", dsn)
	if res.Delivered != 2000 || res.KeyLockBatches == 0 || res.KeyLocksP50ms <= 0 || res.KeyLocksMaxMs < res.KeyLocksP99ms {
		t.Errorf("measured %+v; want 2000 delivered in order and the keys' locks held measured", res)
	}
}

// With --floor, the drain is followed by sending and the store's part each
// alone, with as many messages as the drain, on either store; it measures
// the plain drain of one endpoint only, and says so for any other.
func TestBenchDeliverFloor(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, store := range []string{"sqlite", "postgres"} {
		args := []string{"--messages", "2000", "--floor"}
		if store == "postgres" {
			args = append(args, "--postgres", dsn)
		}
		res := benchJSON[deliverResult](t, "deliver", args...)
		f := res.Floor
		if res.Delivered != 2000 || f == nil {
			t.Fatalf("%s: measured %+v; want 2000 delivered and a floor", store, res)
		}
		if f.Sends != 2000 || f.StoreMessages != 2000 || f.StoreBatch != 100 {
			t.Errorf("%s: floor of %d sends and %d messages in batches of %d; want 2000, 2000 and 100", store, f.Sends, f.StoreMessages, f.StoreBatch)
		}
		if f.SendsPerSec <= 0 || f.SendCPUus <= 0 || f.SendReceiverCPUus <= 0 || f.StorePerSec <= 0 || f.StoreCPUus <= 0 {
			t.Errorf("%s: floor %+v; want every rate and CPU measured", store, *f)
		}
		if store == "postgres" && cpustat.LocalDatabase(dsn) && f.StoreDatabaseCPUus <= 0 {
			t.Errorf("floor on a database on this machine: its CPU per message %v µs; want it measured", f.StoreDatabaseCPUus)
		}
	}
	out, err := exec.Command(courierBin, "bench", "deliver", "--messages", "2000", "--floor", "--endpoints", "2").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--floor measures the plain drain of one endpoint") {
		t.Errorf("--floor with two endpoints: %v, %s; want it refused, saying why", err, out)
	}
}

// With --topology store, the endpoints and routes are created through the
// API first, in batches or one by one, on either store, and then used.
func TestBenchDeliverTopologyInStore(t *testing.T) {
	t.Parallel()
	res := benchJSON[deliverResult](t, "deliver", "--messages", "2000", "--endpoints", "3", "--topology", "store", "--topology-batch", "2")
	if c := res.Creation; res.Topology != "store" || c == nil || c.Objects != 6 || c.Puts != 3 || c.PerSec <= 0 {
		t.Errorf("topology %q, creation %+v; want 6 objects created in 3 requests", res.Topology, c)
	}
	if res.Delivered != 2000 {
		t.Errorf("measured %+v; want 2000 delivered", res)
	}
	res = benchJSON[deliverResult](t, "deliver", "--messages", "2000", "--endpoints", "3", "--topology", "store", "--one-by-one", "--postgres", pgtest.DSN(t))
	if c := res.Creation; c == nil || c.Objects != 6 || c.Puts != 6 || res.Delivered != 2000 {
		t.Errorf("one by one on PostgreSQL: creation %+v, %d delivered; want 6 objects in 6 requests, 2000 delivered", c, res.Delivered)
	}
}

// With an endpoint switched off, the others are delivered and the messages
// of the one that is off stay queued, every one.
func TestBenchDeliverHeld(t *testing.T) {
	t.Parallel()
	res := benchJSON[deliverResult](t, "deliver", "--messages", "2000", "--endpoints", "3", "--held", "1") // 90% on the one held
	if got, want := res.HeldQueued, 1800; got != want {
		t.Errorf("%d messages left queued for the endpoint that is off, want %d", got, want)
	}
	if got, want := res.Delivered, int64(200); got != want {
		t.Errorf("%d messages delivered, want %d (those of the endpoints that are on)", got, want)
	}
	// A backlog queued for the held endpoints first, and their round-robin
	// share of the rest (1 of 3): all of it stays, the others go.
	res = benchJSON[deliverResult](t, "deliver", "--messages", "3000", "--endpoints", "3", "--held", "1", "--held-backlog", "5000", "--held-share", "0.3333334")
	if got, want := res.HeldQueued, 6000; got != want {
		t.Errorf("with a held backlog: %d messages left queued for the endpoint that is off, want %d", got, want)
	}
	if got, want := res.Delivered, int64(2000); got != want {
		t.Errorf("with a held backlog: %d messages delivered, want %d", got, want)
	}
}

// The receiver process says where it listens, answers 204, counts, resets,
// and ends when its standard input closes.
func TestBenchSink(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(courierBin, "bench", "sink")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("bench sink printed no address: %v", err)
	}
	base := "http://" + strings.TrimSpace(line)

	mustDo := func(method, path string, header map[string]string, want int) []byte {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("%s %s: HTTP %d, want %d", method, path, resp.StatusCode, want)
		}
		return body
	}
	stats := func(path string) sinkStats {
		t.Helper()
		var st sinkStats
		if err := json.Unmarshal(mustDo(http.MethodGet, path, nil, http.StatusOK), &st); err != nil {
			t.Fatal(err)
		}
		return st
	}

	mustDo(http.MethodPost, sinkResetPath+"?target=2", nil, http.StatusNoContent)
	sent := map[string]string{"X-Bench-Sent": strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10)}
	mustDo(http.MethodPost, "/in/00", sent, http.StatusNoContent)
	if st := stats(sinkStatsPath); st.Count != 1 || st.ReachedAt != 0 {
		t.Fatalf("after one of two: %+v", st)
	}
	mustDo(http.MethodPost, "/in/01", sent, http.StatusNoContent)
	st := stats(sinkStatsPath + "?latency=1")
	if st.Count != 2 || st.ReachedAt == 0 || st.MaxMs < 1000 || st.CPUus <= 0 {
		t.Fatalf("after two of two: %+v; want the target reached, latencies and CPU time", st)
	}
	mustDo(http.MethodPost, sinkResetPath, nil, http.StatusNoContent)
	if st := stats(sinkStatsPath); st.Count != 0 || st.ReachedAt != 0 {
		t.Fatalf("after a reset: %+v", st)
	}

	stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("bench sink ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("bench sink still runs 10 s after its standard input closed")
	}
}

// The fair-share benchmark runs small on either store: tenants a (many
// routes) and b (one) share the system endpoint about evenly, c's messages
// arrive meanwhile, and a's drain alone is measured.
func TestBenchFair(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	const backlog = 6000 // each tenant's: enough to outlast the second c sends on a quiet machine
	for _, store := range []string{"sqlite", "postgres"} {
		args := []string{"--routes", "20", "--backlog", strconv.Itoa(backlog), "--window", "500", "--duration", "1s"}
		if store == "postgres" {
			args = append(args, "--postgres", dsn)
		}
		res := benchJSON[fairResult](t, "fair", args...)
		if res.BShare < 0.3 || res.AShare+res.BShare > 1 {
			t.Errorf("%s: of the first %d deliveries b got %.0f%%, a %.0f%%; want b about half", store, res.Window, 100*res.BShare, 100*res.AShare)
		}
		if res.CDelivered < 1 || res.CP99ms <= 0 || res.AloneMessages != backlog || res.AlonePerSec <= 0 {
			t.Errorf("%s: measured %+v; want c's messages delivered and a's drain alone measured", store, res)
		}
	}
}

// The tenants benchmark runs small on either store: both drains deliver
// every message and are compared, and with --queued the messages stay
// queued while this process's memory is read.
func TestBenchTenants(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	for _, store := range []string{"sqlite", "postgres"} {
		args := []string{"--tenants", "20", "--endpoints", "3", "--messages", "1000", "--queued", "3000", "--hold", "500ms"}
		if store == "postgres" {
			args = append(args, "--postgres", dsn)
		}
		res := benchJSON[tenantsResult](t, "tenants", args...)
		if res.Tenants != 20 || res.EndpointsPerTenant != 3 || res.One.PerSec <= 0 || res.Many.PerSec <= 0 || res.Ratio <= 0 {
			t.Errorf("%s: measured %+v; want both drains measured and compared", store, res)
		}
		m := res.Memory
		if m == nil || m.Queued != 3000 || m.Delivered >= 3000 || m.RSSMB <= 0 || m.PeakRSSMB < m.RSSMB {
			t.Errorf("%s: memory %+v; want 3000 queued, most still queued, and the RSS and its peak read", store, m)
		}
	}
}
