package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/sink"
)

// TestClusterClocksDisagree: three nodes on one database, one clock 30 s
// fast, one 30 s slow and one true (the test build shifts a node's clock by
// COURIER_CLOCK_SHIFT). Every node judges time on the database's clock, so
// no scheduled message is delivered more than 1 s early by the true clock,
// no retry starts sooner than its schedule less 1 s after the failed
// attempt, and no message arrives once more than it should (a fast node
// judging the others' leases lapsed would send theirs again). The nodes
// whose clocks are off say so in /readyz and courier_clock_offset_seconds.
func TestClusterClocksDisagree(t *testing.T) {
	const scheduled, retried, retry = 60, 30, 3 * time.Second
	c := newCluster(t, func(sinkURL string) string {
		return fmt.Sprintf(`endpoints:
  ep: {transport: http, url: "%s/ep", timeout: 2s, timeout_on: [timeout]}
routes:
  r: {endpoints: [ep]}
policies:
  order:
    schedule: [%s]
`, sinkURL, retry)
	})
	// The failed first attempts (503) are retried without counting against
	// the endpoint's health, which would suspend it.
	c.sink.Script("/ep", sink.Delay(50*time.Millisecond, 204), sink.Repeat)
	fast, slow, _ := c.start("COURIER_CLOCK_SHIFT=30s"), c.start("COURIER_CLOCK_SHIFT=-30s"), c.start()

	// Messages whose first attempt fails, and scheduled ones, sent through
	// every node.
	var items []string
	for i := range retried {
		id := fmt.Sprintf("retry-%02d", i)
		c.sink.ScriptMessage(id, sink.Respond(503))
		items = append(items, fmt.Sprintf(`{"id":%q,"type":"order","route":"r","payload":{}}`, id))
	}
	due := map[string]time.Time{}
	start := time.Now().Add(4 * time.Second)
	for i := range scheduled {
		id := fmt.Sprintf("later-%02d", i)
		due[id] = start.Add(time.Duration(i) * 50 * time.Millisecond)
		items = append(items, fmt.Sprintf(`{"id":%q,"type":"order","route":"r","deliver_after":%q,"payload":{}}`, id, due[id].UTC().Format(time.RFC3339Nano)))
	}
	for i, node := range c.nodes {
		var batch []string
		for j := i; j < len(items); j += len(c.nodes) {
			batch = append(batch, items[j])
		}
		resp, err := http.Post(node.url+"/v1/messages/batch", "application/json", strings.NewReader(`{"messages":[`+strings.Join(batch, ",")+`]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("batch to node %d: %s", i, resp.Status)
		}
	}
	if err := c.sink.Wait(ctxWithin(t, 30*time.Second), "/ep", 2*retried+scheduled); err != nil {
		for i, n := range c.nodes {
			t.Logf("node %d:\n%s", i, n.log())
		}
		t.Fatalf("%d of %d requests arrived: %v", c.sink.Count("/ep"), 2*retried+scheduled, err)
	}
	byID := map[string][]time.Time{}
	for _, a := range c.sink.Arrivals("/ep") {
		id := a.Header.Get("webhook-id")
		byID[id] = append(byID[id], a.Time)
	}
	var early []time.Duration
	for id, at := range due {
		got := byID[id]
		if len(got) != 1 {
			t.Errorf("%s arrived %d times, want once", id, len(got))
			continue
		}
		if d := at.Sub(got[0]); d > time.Second {
			t.Errorf("%s, due at %s, arrived %v early", id, at.Format(time.StampMilli), d)
		}
		early = append(early, at.Sub(got[0]))
	}
	var gaps []time.Duration
	for i := range retried {
		id := fmt.Sprintf("retry-%02d", i)
		got := byID[id]
		sort.Slice(got, func(i, j int) bool { return got[i].Before(got[j]) })
		if len(got) != 2 {
			t.Errorf("%s arrived %d times, want twice: the failed attempt and its retry", id, len(got))
			continue
		}
		if gap := got[1].Sub(got[0]); gap < retry-time.Second {
			t.Errorf("%s was retried %v after its failed attempt, want at least %v", id, gap, retry-time.Second)
		} else {
			gaps = append(gaps, gap)
		}
	}
	for _, n := range []struct {
		p     *process
		shift float64
	}{{fast, -30}, {slow, 30}} {
		resp, err := http.Get(n.p.url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), "clock") {
			t.Errorf("/readyz of a node %gs off: %d %s, want ready with a note of its clock", -n.shift, resp.StatusCode, body)
		}
		if got := clockOffset(t, n.p); got < n.shift-1 || got > n.shift+1 {
			t.Errorf("courier_clock_offset_seconds of a node %gs off: %g, want about %g", -n.shift, got, n.shift)
		}
	}
	sort.Slice(early, func(i, j int) bool { return early[i] < early[j] })
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	if len(early) > 0 && len(gaps) > 0 {
		fmt.Printf("clocks +30 s, -30 s and true: scheduled messages arrived %v to %v after they were due (negative: early); retries %v to %v after the failed attempt (schedule %v)\n",
			-early[len(early)-1], -early[0], gaps[0], gaps[len(gaps)-1], retry)
	}
}

// clockOffset reads courier_clock_offset_seconds from a node's metrics.
func clockOffset(t *testing.T, p *process) float64 {
	t.Helper()
	_, body := getMetrics(t, p.url, "")
	m := regexp.MustCompile(`(?m)^courier_clock_offset_seconds (\S+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no courier_clock_offset_seconds in the metrics")
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
