package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/postgres"
	"github.com/jackc/pgx/v5"
)

// TestClusterTakesOverADeadNodesSlots: three nodes deliver to one endpoint
// with max_concurrency 8 (one node often holds all eight slots). Again and
// again the node that holds most of them is SIGKILLed and a new one
// started. Its session with the database ends with it, so the others take
// its slots and its messages at once, not when its hold lapses (30 s
// after its last renewal): each time its hold is gone before it would have
// lapsed, and deliveries go on (the gaps are printed). Every message
// arrives; only those of attempts a dead node had under way, which show an
// abandoned attempt, arrive twice. COURIER_TEST_KILLS sets the number of
// kills (default 5).
func TestClusterTakesOverADeadNodesSlots(t *testing.T) {
	kills := 5
	if v := os.Getenv("COURIER_TEST_KILLS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("COURIER_TEST_KILLS=%q: want a number of kills", v)
		}
		kills = n
	}
	total := 2000 + 1000*kills
	c := newCluster(t, func(sinkURL string) string {
		return fmt.Sprintf("endpoints:\n  ep: {transport: http, url: \"%s/ep\", timeout: 2s, max_concurrency: 8}\nroutes:\n  r: {endpoints: [ep]}\n", sinkURL)
	})
	c.sink.Script("/ep", sink.Delay(20*time.Millisecond, 204), sink.Repeat)
	for range 3 {
		c.start()
	}
	ids := messageIDs(total)
	c.ingest(ids, func(int) string { return "r" })
	ctx := ctxWithin(t, 5*time.Minute)
	db, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())

	var gaps []time.Duration
	var killedAts []time.Time
	dead := map[*process]bool{}
	for k := range kills {
		if err := c.sink.Wait(ctx, "/ep", c.sink.Count("/ep")+300); err != nil {
			t.Fatalf("kill %d: deliveries did not go on: %v", k, err)
		}
		victim, owner, until := c.holder(ctx, db, "ep", dead)
		killedAt := time.Now()
		victim.kill(t)
		dead[victim] = true
		killedAts = append(killedAts, killedAt)
		// The dead node's hold goes at once, long before it would lapse.
		for {
			var n int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM endpoint_holds WHERE owner = $1`, owner).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(until) {
				t.Fatalf("kill %d: the hold of %s, the dead node, was still there when it lapsed at %s", k, owner, until.Format(time.RFC3339Nano))
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := c.sink.Wait(ctx, "/ep", c.sink.Count("/ep")+1); err != nil {
			t.Fatalf("kill %d: no delivery after the kill: %v", k, err)
		}
		gaps = append(gaps, firstArrivalAfter(c.sink.Arrivals("/ep"), killedAt).Sub(killedAt))
		c.start()
	}
	seen := c.arrivals(total, 3*time.Minute)
	if len(seen) != total {
		t.Errorf("%d of %d messages arrived", len(seen), total)
	}
	s, err := postgres.Open(context.Background(), c.dsn, postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// How long before the kill that sent it again each duplicate's first
	// delivery came: an attempt under way at the kill, or one answered
	// but whose outcome was not yet written (at most some 150 ms).
	first := map[string]time.Time{}
	for _, a := range c.sink.Arrivals("/ep") {
		id := a.Header.Get("webhook-id")
		if at, ok := first[id]; !ok || a.Time.Before(at) {
			first[id] = a.Time
		}
	}
	twice, late := 0, 0
	var before time.Duration
	for id, n := range seen {
		if n < 2 {
			continue
		}
		twice++
		for _, k := range killedAts {
			if d := k.Sub(first[id]); d >= 0 && d < 10*time.Second {
				before = max(before, d)
				if d > 150*time.Millisecond {
					late++
				}
				break
			}
		}
		attempts, err := s.Attempts(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(attempts, func(a courier.Attempt) bool { return a.Outcome == courier.OutcomeAbandoned }) {
			t.Errorf("%s arrived %d times, but no node that had it under way died", id, n)
		}
	}
	// The wait from the receiver's answer to the outcome written, over
	// the nodes alive at the end, by the buckets of their histograms.
	buckets := map[float64]float64{}
	for _, p := range c.nodes {
		if dead[p] {
			continue
		}
		for le, n := range histogramBuckets(t, p, "courier_outcome_wait_seconds") {
			buckets[le] += n
		}
	}
	slices.Sort(gaps)
	fmt.Printf("cluster of 3, the slots' holder killed %d times: gaps before the next delivery %v (median %v, max %v); %d of %d messages arrived twice (%.1f a kill, max_concurrency 8), first sent at most %v before their kill, %d of them more than 150 ms before\n",
		kills, gaps, gaps[len(gaps)/2], gaps[len(gaps)-1], twice, total, float64(twice)/float64(kills), before.Round(time.Millisecond), late)
	fmt.Printf("answer to outcome written on the nodes alive at the end: p50 within %gs, p99 within %gs\n", quantileBound(buckets, 0.5), quantileBound(buckets, 0.99))
}

// holder returns the live node (not one of dead) that holds most of endpoint's slots, its
// owner name, and when its hold lapses unless renewed.
func (c *cluster) holder(ctx context.Context, db *pgx.Conn, endpoint string, dead map[*process]bool) (*process, string, time.Time) {
	c.t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var owner string
		var until time.Time
		err := db.QueryRow(ctx, `SELECT owner, until FROM endpoint_holds WHERE endpoint = $1 AND n > 0 ORDER BY n DESC LIMIT 1`, endpoint).Scan(&owner, &until)
		if err == nil {
			// owner is host:pid, or host:pid/N once the node joined again.
			name, _, _ := strings.Cut(owner, "/")
			for _, p := range c.nodes {
				if strings.HasSuffix(name, fmt.Sprintf(":%d", p.cmd.Process.Pid)) && !dead[p] {
					return p, owner, until
				}
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no live node holds slots of %s (%v)", endpoint, err)
		}
	}
}

// firstArrivalAfter is the time of the first arrival after at.
func firstArrivalAfter(arrivals []sink.Arrival, at time.Time) time.Time {
	first := time.Time{}
	for _, a := range arrivals {
		if a.Time.After(at) && (first.IsZero() || a.Time.Before(first)) {
			first = a.Time
		}
	}
	return first
}

// histogramBuckets reads the cumulative buckets of a histogram from a
// node's metrics: upper bound (le) to count.
func histogramBuckets(t *testing.T, p *process, name string) map[float64]float64 {
	t.Helper()
	_, body := getMetrics(t, p.url, "")
	out := map[float64]float64{}
	re := regexp.MustCompile(`(?m)^` + name + `_bucket\{le="([^"]+)"\} (\S+)$`)
	for _, m := range re.FindAllSubmatch(body, -1) {
		le, err1 := strconv.ParseFloat(string(m[1]), 64)
		n, err2 := strconv.ParseFloat(string(m[2]), 64)
		if err1 == nil && err2 == nil {
			out[le] = n
		}
	}
	return out
}

// quantileBound is the upper bound of the first bucket that holds the
// quantile q of cumulative buckets.
func quantileBound(buckets map[float64]float64, q float64) float64 {
	les := slices.Sorted(maps.Keys(buckets))
	if len(les) == 0 {
		return 0
	}
	total := buckets[les[len(les)-1]]
	for _, le := range les {
		if buckets[le] >= q*total {
			return le
		}
	}
	return les[len(les)-1]
}
