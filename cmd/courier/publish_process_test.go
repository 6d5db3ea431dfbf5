package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// TestKillWhilePublishing: 10,000 messages published to 5 subscriptions,
// the server killed with SIGKILL while it delivers them; after a restart
// every delivery arrives, each at its own subscription's receiver.
func TestKillWhilePublishing(t *testing.T) {
	skipIfShort(t)
	const total, subs = 10000, 5
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	var cfg strings.Builder
	cfg.WriteString("endpoints:\n")
	for i := range subs {
		fmt.Fprintf(&cfg, "  r%d: {transport: http, url: \"%s/r%d\", max_concurrency: 32, timeout: 5s}\n", i, sk.URL(), i)
		sk.Script(fmt.Sprintf("/r%d", i), sink.Delay(2*time.Millisecond, 204), sink.Repeat)
	}
	cfg.WriteString("routes:\n")
	for i := range subs {
		fmt.Fprintf(&cfg, "  r%d: {endpoints: [r%d]}\n", i, i)
	}
	cfg.WriteString("subscriptions:\n")
	for i := range subs {
		fmt.Fprintf(&cfg, "  s%d: {types: [order.*], route: r%d}\n", i, i)
	}
	dir := t.TempDir()
	p := startNode(t, dir, cfg.String())

	ids := messageIDs(total)
	ingest(t, []*process{p}, "order.created", ids, func(int) string { return "" })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := sk.Wait(ctx, "/r0", total/5); err != nil {
		t.Fatalf("deliveries before the kill: %d, %v", sk.Total(), err)
	}
	p.kill(t)
	before := sk.Total()

	startServerWith(t, p.config)
	for i := range subs {
		path := fmt.Sprintf("/r%d", i)
		if err := sk.Wait(ctx, path, total); err != nil {
			t.Fatalf("%s after the restart: %d arrivals, %v", path, sk.Count(path), err)
		}
	}
	time.Sleep(time.Second) // anything sent twice would arrive now
	dups := 0
	for i := range subs {
		path := fmt.Sprintf("/r%d", i)
		seen := countByID(sk.Arrivals(path))
		for _, id := range ids {
			switch n := seen[id]; {
			case n == 0:
				t.Fatalf("%s never got %s", path, id)
			case n > 1:
				dups += n - 1
			}
		}
		if len(seen) != total {
			t.Fatalf("%s got %d distinct messages, want %d", path, len(seen), total)
		}
		for _, a := range sk.Arrivals(path)[:1] {
			if got := a.Header.Get("Courier-Subscription"); got != fmt.Sprintf("s%d", i) {
				t.Fatalf("%s got a delivery of subscription %q", path, got)
			}
		}
	}
	t.Logf("%d of %d deliveries arrived before SIGKILL; %d arrived twice", before, total*subs, dups)
}

// TestReplayAfterKill: a subscription added later (by a reload) is given
// the earlier messages by a replay started from the command line; the
// server is killed in the middle of it and the replay goes on after the
// restart: every message arrives, and none twice but what was in flight.
func TestReplayAfterKill(t *testing.T) {
	skipIfShort(t)
	const total = 20000
	sk := sink.MustStart(t, sink.Options{DiscardBodies: true})
	sk.Script("/late", sink.Delay(time.Millisecond, 204), sink.Repeat)
	base := fmt.Sprintf(`endpoints:
  first: {transport: http, url: "%s/first", max_concurrency: 32}
  late: {transport: http, url: "%s/late", max_concurrency: 32}
routes:
  first: {endpoints: [first]}
  late: {endpoints: [late]}
subscriptions:
  first: {types: [order.*], route: first}
`, sk.URL(), sk.URL())
	p := startNode(t, t.TempDir(), base)
	since := time.Now().UTC().Add(-time.Second)
	ids := messageIDs(total)
	client := &http.Client{Timeout: 60 * time.Second}
	ingest(t, []*process{p}, "order.created", ids, func(int) string { return "" })
	writeFile(t, p.config, strings.Replace(readFile(t, p.config), "subscriptions:\n", "subscriptions:\n  late: {types: [order.created], route: late}\n", 1))
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, p, 10*time.Second, "the subscription added by the reload", func() bool {
		resp, err := client.Get(p.url + "/v1/types")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var l api.TypeList
		return json.NewDecoder(resp.Body).Decode(&l) == nil && len(l.Types) == 1 && len(l.Types[0].Subscriptions) == 2
	})

	// Started through the API under a known id, to kill the server while
	// the operation is under way.
	resp, err := client.Post(p.url+"/v1/subscriptions/late/replay", "application/json",
		strings.NewReader(`{"since":"`+since.Format(time.RFC3339Nano)+`","operation_id":"replay-1"}`))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("replay: %v %v", resp, err)
	}
	resp.Body.Close()
	midway := false
	for deadline := time.Now().Add(time.Minute); ; {
		if time.Now().After(deadline) {
			t.Fatalf("the replay neither began nor ended within a minute\n%s", p.log())
		}
		resp, err := client.Get(p.url + "/v1/operations/replay-1")
		if err != nil {
			t.Fatal(err)
		}
		var op api.Operation
		json.NewDecoder(resp.Body).Decode(&op)
		resp.Body.Close()
		if op.Done {
			break
		}
		if op.Count > 0 {
			midway = true
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	p.kill(t)
	if !midway {
		t.Log("the replay was done before the kill: only the deliveries were under way")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before := sk.Count("/late")

	p2 := startServerWith(t, p.config)
	if err := sk.Wait(ctx, "/late", total); err != nil {
		t.Fatalf("after the restart: %d replayed deliveries arrived, %v", sk.Count("/late"), err)
	}
	time.Sleep(time.Second)
	seen := countByID(sk.Arrivals("/late"))
	dups := 0
	for _, id := range ids {
		switch n := seen[id]; {
		case n == 0:
			t.Fatalf("%s never arrived at the late subscription", id)
		case n > 1:
			dups += n - 1
		}
	}
	if dups > 32*2 { // at most what was in flight at the kill
		t.Errorf("%d replayed deliveries arrived twice: the replay repeated work", dups)
	}
	t.Logf("%d of %d replayed deliveries arrived before SIGKILL (the replay midway: %v); %d twice", before, total, midway, dups)

	// From the command line, with progress: the messages it has are left.
	out, err := exec.Command(courierBin, "subscriptions", "replay", "late", "--since", since.Format(time.RFC3339Nano), "--server", p2.url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "100.0%") || !strings.Contains(string(out), "replayed 0 deliveries to late") {
		t.Fatalf("courier subscriptions replay: %v\n%s", err, out)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
