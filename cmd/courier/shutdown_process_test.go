package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/tcpproxy"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// stopSlack is what a process may take beyond its shutdown_timeout to
// exit: closing the store and the runtime's own exit. The tests below
// would take minutes without the timeout, so a generous slack still tells.
const stopSlack = 8 * time.Second

// stopWithin sends SIGTERM and fails unless the process exits within
// shutdown_timeout and the slack; it returns how long the exit took.
func stopWithin(t *testing.T, p *process, shutdownTimeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	p.terminate(t, shutdownTimeout+stopSlack)
	took := time.Since(start)
	t.Logf("exited %v after SIGTERM (shutdown_timeout %v)", took.Round(time.Millisecond), shutdownTimeout)
	return took
}

// TestStopWhileStoreIsGone: PostgreSQL goes away (the proxy courier reaches
// it through is cut) while attempts are under way, so that their outcomes
// cannot be written; SIGTERM then ends the process within shutdown_timeout
// instead of retrying the writes for minutes. A node started afterwards
// delivers every acknowledged message.
func TestStopWhileStoreIsGone(t *testing.T) {
	const timeout = 2 * time.Second
	c := newCluster(t, func(sinkURL string) string {
		return fmt.Sprintf("shutdown_timeout: %v\nendpoints:\n  ep: {transport: http, url: \"%s/ep\", timeout: 3s}\nroutes:\n  r: {endpoints: [ep]}\n",
			timeout, sinkURL)
	})
	direct := c.dsn
	u, err := url.Parse(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := tcpproxy.Start("127.0.0.1:0", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	u.Host = proxy.Addr()
	c.dsn = u.String()
	// Slow answers keep attempts under way when the store goes.
	c.sink.Script("/ep", sink.Delay(time.Second, http.StatusNoContent), sink.Repeat)
	p := c.start()
	ids := messageIDs(200)
	c.ingest(ids, func(int) string { return "r" })
	waitUntil(t, p, 30*time.Second, "attempts under way", func() bool { return c.sink.Count("/ep") > 0 })

	proxy.Close()
	stopWithin(t, p, timeout)

	c.dsn = direct
	c.sink.Script("/ep", sink.Respond(http.StatusNoContent), sink.Repeat)
	c.start()
	seen := c.arrivals(len(ids), 2*time.Minute)
	for _, id := range ids {
		if seen[id] == 0 {
			t.Errorf("%s was acknowledged but never delivered", id)
		}
	}
}

// TestStopWhileAttemptsHang: every attempt hangs at the receiver, far
// longer than shutdown_timeout; SIGTERM cuts them off in time, and after a
// restart every message is delivered.
func TestStopWhileAttemptsHang(t *testing.T) {
	skipIfShort(t)
	const timeout = 2 * time.Second
	sk := sink.MustStart(t, sink.Options{})
	sk.Script("/ep", sink.BlackHole(), sink.Repeat)
	p := startNode(t, t.TempDir(), fmt.Sprintf(`shutdown_timeout: %v
endpoints:
  ep: {transport: http, url: "%s/ep", timeout: 5m}
routes:
  r: {endpoints: [ep]}
`, timeout, sk.URL()))
	const n = 12 // fewer than max_concurrency: every one hangs at once
	for i := range n {
		p.create(t, fmt.Sprintf("h-%02d", i), `{"type":"order","route":"r","payload":{"n":1}}`)
	}
	waitUntil(t, p, 30*time.Second, "every attempt hanging at the receiver", func() bool { return sk.Count("/ep") >= n })

	stopWithin(t, p, timeout)
	if !strings.Contains(p.log(), "cut off") {
		t.Errorf("the log does not say that attempts were cut off:\n%s", p.log())
	}

	sk.Script("/ep", sink.Respond(http.StatusNoContent), sink.Repeat)
	p = startServerWith(t, p.config)
	waitUntil(t, p, time.Minute, "every message delivered after the restart", func() bool {
		return sk.StatusCount(http.StatusNoContent) >= n
	})
	delivered := map[string]bool{}
	for _, a := range sk.Arrivals("/ep") {
		if a.Status == http.StatusNoContent {
			delivered[a.Header.Get("webhook-id")] = true
		}
	}
	for i := range n {
		if id := fmt.Sprintf("h-%02d", i); !delivered[id] {
			t.Errorf("%s was not delivered after the restart", id)
		}
	}
}

// TestServeWritesCPUProfile: serve --cpuprofile writes a profile of the
// run, complete when the process stops on SIGTERM (a gzipped protobuf, as
// go tool pprof reads it).
func TestServeWritesCPUProfile(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "cpu.pprof")
	p := startServerWith(t, writeConfig(t, dir, freeAddr(t), ""), "--cpuprofile", prof)
	if err := p.terminate(t, 30*time.Second); err != nil {
		t.Fatalf("serve exited with %v\n%s", err, p.log())
	}
	f, err := os.Open(prof)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the profile is not gzipped: %v", err)
	}
	body, err := io.ReadAll(z)
	if err != nil || len(body) == 0 {
		t.Fatalf("the profile reads %d bytes: %v", len(body), err)
	}
	// A profile names its sample type: CPU time in nanoseconds.
	if !bytes.Contains(body, []byte("nanoseconds")) {
		t.Errorf("the profile names no CPU time (%d bytes)", len(body))
	}
}
