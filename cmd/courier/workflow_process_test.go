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

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/sink"
	"github.com/courier-gw/courier/sqlite"
)

// TestWorkflowSurvivesKill: 1,000 four-step workflows, courier killed with
// SIGKILL while they run. After the restart every step of every workflow
// was done, in order, and a step was sent twice only where it was in flight
// at the kill (counted by webhook-id, which is <id>.<step>).
func TestWorkflowSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("process test; runs without -short")
	}
	sk, err := sink.StartWith("127.0.0.1:0", sink.Options{DiscardBodies: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sk.Close()
	steps := []string{"accounts", "packages", "drones", "deliveries"}
	for _, s := range steps {
		sk.Script("/"+s, sink.Delay(3*time.Millisecond, 200).WithBody(`{"ok":true}`), sink.Repeat)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "courier.yaml")
	db := filepath.Join(dir, "data", "courier.db")
	var eps strings.Builder
	for _, s := range steps {
		fmt.Fprintf(&eps, "  %s: {transport: http, url: \"%s/%s\", max_concurrency: 32}\n", s, sk.URL(), s)
	}
	os.WriteFile(cfg, []byte(fmt.Sprintf(`
listen: %s
store: {driver: sqlite, path: %s}
outbound: {allow_networks: [127.0.0.0/8]}
endpoints:
%sroutes:
  schedule:
    workflow:
      - {endpoint: accounts}
      - {endpoint: packages}
      - {endpoint: drones}
      - {endpoint: deliveries}
`, freeAddr(t), db, eps.String())), 0o600)
	p := startServerWith(t, cfg)

	const total = 1000
	var items []string
	for i := 0; i < total; i++ {
		items = append(items, fmt.Sprintf(`{"id":"w-%04d","type":"delivery","route":"schedule","payload":{"n":%d}}`, i, i))
	}
	resp, err := http.Post(p.url+"/v1/messages/batch", "application/json", strings.NewReader(`{"messages":[`+strings.Join(items, ",")+`]}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("batch: %v %v", resp, err)
	}
	resp.Body.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := sk.Wait(ctx, "/packages", total/2); err != nil {
		t.Fatalf("before the kill: %v", err)
	}
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
	before := sk.Total()

	// The steps in flight at the kill: the only ones allowed twice.
	store, err := sqlite.Open(db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inflight := map[string]bool{}
	for _, m := range inflightMessages(t, store) {
		inflight[fmt.Sprintf("%s.%d", m.ID, m.Step)] = true
	}
	store.Close()

	p2 := startServerWith(t, cfg)
	waitUntil(t, p2, 2*time.Minute, "every workflow's last step", func() bool {
		last := map[string]bool{}
		for _, a := range sk.Arrivals("/deliveries") {
			last[a.Header.Get("webhook-id")] = true
		}
		return len(last) == total
	})
	seen := map[string]int{}
	first := map[string]int{}
	for _, a := range sk.All() {
		id := a.Header.Get("webhook-id")
		seen[id]++
		if _, ok := first[id]; !ok {
			first[id] = a.Seq
		}
	}
	dups := 0
	for i := 0; i < total; i++ {
		prev := 0
		for k := range steps {
			id := fmt.Sprintf("w-%04d.%d", i, k+1)
			switch n := seen[id]; {
			case n == 0:
				t.Fatalf("step %s was never sent", id)
			case n > 1 && !inflight[id]:
				t.Fatalf("step %s was sent %d times but was not in flight at the kill", id, n)
			case n > 1:
				dups += n - 1
			}
			if first[id] < prev {
				t.Fatalf("step %s was sent before the step before it", id)
			}
			prev = first[id]
		}
	}
	t.Logf("%d requests before SIGKILL, %d steps in flight at the kill, %d sent twice after the restart", before, len(inflight), dups)
	// Every workflow ends delivered.
	client := api.NewClient(p2.url, "")
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < total; i++ {
		for {
			m, err := client.Message(context.Background(), fmt.Sprintf("w-%04d", i))
			if err == nil && m.State == courier.StateDelivered {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("w-%04d: %+v, %v", i, m, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
