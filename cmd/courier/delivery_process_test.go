package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/sink"
	"github.com/courier-gw/courier/sqlite"
)

// TestKillDuringDelivery: SIGKILL while 20,000 messages are being delivered
// to a slow receiver. After a restart every message arrives at least once,
// and the only messages that arrive twice are ones the store had in flight
// at the kill.
func TestKillDuringDelivery(t *testing.T) {
	if testing.Short() {
		t.Skip("process test; runs without -short")
	}
	sk, err := sink.StartWith("127.0.0.1:0", sink.Options{DiscardBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	sk.Script("/in", sink.Delay(5*time.Millisecond, 204), sink.Repeat)

	dir := t.TempDir()
	cfg := filepath.Join(dir, "courier.yaml")
	db := filepath.Join(dir, "data", "courier.db")
	addr := freeAddr(t)
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
store: {driver: sqlite, path: %s}
outbound: {allow_networks: [127.0.0.0/8]}
endpoints:
  slow: {transport: http, url: "%s/in", max_concurrency: 64, timeout: 5s}
routes:
  slow: {endpoints: [slow]}
`, addr, db, sk.URL())), 0o600)
	p := startServerWith(t, cfg)

	const total = 20000
	client := &http.Client{Timeout: 30 * time.Second}
	for b := 0; b < total/1000; b++ {
		var items []string
		for i := 0; i < 1000; i++ {
			items = append(items, fmt.Sprintf(`{"id":"m-%05d","type":"order","route":"slow","payload":{"n":%d}}`, b*1000+i, b*1000+i))
		}
		resp, err := client.Post(p.url+"/v1/messages/batch", "application/json", strings.NewReader(`{"messages":[`+strings.Join(items, ",")+`]}`))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("batch %d: %v %v", b, resp, err)
		}
		resp.Body.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sk.Wait(ctx, "/in", total/4); err != nil {
		t.Fatalf("deliveries before the kill: %d, %v", sk.Count("/in"), err)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	arrivedBeforeKill := sk.Count("/in")

	// What the store had in flight at the kill: the only messages allowed
	// to arrive twice.
	store, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inflight := map[string]bool{}
	for _, m := range inflightMessages(t, store) {
		inflight[m.ID] = true
	}
	store.Close()

	startServerWith(t, cfg)
	if err := sk.Wait(ctx, "/in", total); err != nil {
		t.Fatalf("after restart: %d arrivals, %v", sk.Count("/in"), err)
	}
	// Let stragglers arrive, then count per id.
	deadline := time.Now().Add(30 * time.Second)
	seen := map[string]int{}
	for {
		clear(seen)
		for _, a := range sk.Arrivals("/in") {
			seen[a.Header.Get("webhook-id")]++
		}
		if len(seen) == total || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(seen) != total {
		t.Fatalf("%d of %d messages arrived", len(seen), total)
	}
	dups := 0
	for id, n := range seen {
		if n > 1 {
			dups += n - 1
			if !inflight[id] {
				t.Errorf("%s arrived %d times but was not in flight at the kill", id, n)
			}
		}
	}
	t.Logf("%d arrivals before SIGKILL, %d messages in flight at the kill, %d duplicates after restart", arrivedBeforeKill, len(inflight), dups)
	fmt.Printf("kill during delivery: %d of %d delivered before SIGKILL; %d in flight at the kill; %d delivered twice\n",
		arrivedBeforeKill, total, len(inflight), dups)
}
