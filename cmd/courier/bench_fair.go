package main

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
	httptransport "github.com/courier-gw/courier/transport/http"
	"github.com/spf13/cobra"
)

// benchFair is one fair-share benchmark's settings.
type benchFair struct {
	routes      int // tenant a's routes
	backlog     int // messages queued for each of a and b
	window      int // b's share is counted over the first this many deliveries
	concurrency int // max_concurrency of the shared endpoint
	rate        int // tenant c's messages per second
	duration    time.Duration
	workers     int
	postgres    string
}

// fairResult is what a fair-share benchmark measured.
type fairResult struct {
	Window int `json:"window"`
	// BShare is b's part of the first Window deliveries, a and b both
	// waiting.
	BShare float64 `json:"b_share"`
	AShare float64 `json:"a_share"`
	// C's messages, sent at a steady rate meanwhile: how many arrived and
	// the time from ingest to arrival.
	CDelivered int64   `json:"c_delivered"`
	CP50ms     float64 `json:"c_ingest_to_delivered_p50_ms"`
	CP99ms     float64 `json:"c_ingest_to_delivered_p99_ms"`
	CMaxMs     float64 `json:"c_ingest_to_delivered_max_ms"`
	// A's backlog drained with no other tenant waiting.
	AloneMessages int     `json:"a_alone_messages"`
	AloneSeconds  float64 `json:"a_alone_seconds"`
	AlonePerSec   float64 `json:"a_alone_per_sec"`
}

// The tenants of the benchmark and the endpoint they share.
const (
	fairEndpoint = "system/peppol-ap"
	fairA        = "a"
	fairB        = "b"
	fairC        = "c"
)

func newBenchFairCmd(g *globals) *cobra.Command {
	b := benchFair{}
	cmd := &cobra.Command{
		Use:   "fair",
		Short: "Measure fair shares: tenants of equal weight sharing an endpoint of the system tenant",
		Long: `Measure how tenants share scarce capacity (docs/design.md §20, Fair shares).
Tenant a has --routes routes and b one, all to one endpoint of the system
tenant (` + fairEndpoint + `) with max_concurrency --concurrency, and each has
--backlog messages queued; the receiver answers 204 in a process of its own, as
in bench deliver. While both wait, tenant c sends --rate messages a second to
the same endpoint for --duration. Printed: b's share of the first --window
deliveries (equal weights: about half), c's time from ingest to delivery, and
then, on a fresh store, how fast a's backlog drains alone, to compare with a
build before fair shares.

The API does not take tenants' messages yet: the benchmark queues them in the
store directly, with qualified ids and routes, and tells the engine of their
routes (Engine.Due), as the API does after an ingest.`,
		Example: `  courier bench fair
  courier bench fair --postgres postgres://localhost/courier`,
		Args: cobra.NoArgs,
		RunE: benchRun(g, func() error {
			if b.routes < 1 || b.backlog < 1 || b.window < 1 || b.concurrency < 1 || b.rate < 0 || b.workers < 1 {
				return fmt.Errorf("--routes, --backlog, --window, --concurrency and --workers must be at least 1, --rate at least 0")
			}
			return nil
		}, func(ctx context.Context) (*fairResult, error) { return b.run(ctx, g) }, func(res *fairResult) {
			fmt.Fprintf(g.stdout, "fair shares: a (%d routes) and b (1 route), %d queued each, on %s (max_concurrency %d)\n",
				b.routes, b.backlog, fairEndpoint, b.concurrency)
			fmt.Fprintf(g.stdout, "  first %d deliveries: b %.1f%%, a %.1f%%\n", res.Window, 100*res.BShare, 100*res.AShare)
			fmt.Fprintf(g.stdout, "  c at %d msgs/s meanwhile: %d delivered, ingest to delivered p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
				b.rate, res.CDelivered, res.CP50ms, res.CP99ms, res.CMaxMs)
			fmt.Fprintf(g.stdout, "  a alone: %d messages drained in %.2fs, %.0f msgs/s\n", res.AloneMessages, res.AloneSeconds, res.AlonePerSec)
		}),
	}
	f := benchFlags{cmd.Flags()}
	f.IntVar(&b.routes, "routes", 100, "tenant a's routes")
	f.IntVar(&b.backlog, "backlog", 20000, "messages queued for each of a and b")
	f.IntVar(&b.window, "window", 4000, "count b's share over the first this many deliveries")
	f.IntVar(&b.concurrency, "concurrency", 8, "max_concurrency of the shared endpoint")
	f.IntVar(&b.rate, "rate", 10, "tenant c's messages per second while a and b wait")
	f.DurationVar(&b.duration, "duration", 5*time.Second, "how long c sends (the first part ends when both this passed and --window were delivered)")
	f.workers(&b.workers)
	f.postgres(&b.postgres)
	return cmd
}

func (b benchFair) run(ctx context.Context, g *globals) (*fairResult, error) {
	rcv, err := startProcessReceiver(ctx)
	if err != nil {
		return nil, err
	}
	defer rcv.Close()
	res := &fairResult{Window: b.window}
	fmt.Fprintf(g.stderr, "a and b wait, c sends...\n")
	if err := b.shared(ctx, rcv, res); err != nil {
		return nil, err
	}
	fmt.Fprintf(g.stderr, "a alone...\n")
	if err := b.alone(ctx, rcv, res); err != nil {
		return nil, err
	}
	return res, nil
}

// fairRoute is tenant's route i.
func fairRoute(tenant string, i int) string {
	return courier.Qualify(tenant, fmt.Sprintf("r-%03d", i))
}

// topology is the shared endpoint and the tenants' routes to it.
func (b benchFair) topology(rcvAddr string) *courier.Topology {
	top := &courier.Topology{Endpoints: map[string]*courier.Endpoint{}, Routes: map[string]*courier.Route{},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}}
	ep := courier.NewEndpoint(fairEndpoint, courier.TransportHTTP)
	ep.Timeout, ep.MaxConcurrency = 10*time.Second, b.concurrency
	ep.Settings = &httptransport.Settings{URL: "http://" + rcvAddr + "/in", Method: http.MethodPost}
	top.Endpoints[ep.Name] = ep
	for _, r := range b.routeNames() {
		top.Routes[r] = &courier.Route{Name: r, Endpoints: []string{ep.Name}, Strategy: courier.StrategySingle}
	}
	top.Prepare()
	return top
}

func (b benchFair) routeNames() []string {
	var out []string
	for i := 0; i < b.routes; i++ {
		out = append(out, fairRoute(fairA, i))
	}
	return append(out, fairRoute(fairB, 0), fairRoute(fairC, 0))
}

// queue stores n messages of a tenant, round robin over its first routes,
// each telling the receiver its tenant and when it was queued.
func queue(ctx context.Context, store courier.Store, tenant string, first, n, routes int, payload []byte) error {
	return queueSpread(ctx, store, first, n, func(k int) (string, int) { return tenant, k % routes }, true, payload)
}

// queueSpread stores messages first to first+n-1 in batches of 10,000,
// message k for tenant's route r (fairRoute) as at(k) tells, each
// telling the receiver when it was queued and, if tagged, its tenant
// (which the receiver then counts apart).
func queueSpread(ctx context.Context, store courier.Store, first, n int, at func(k int) (tenant string, r int), tagged bool, payload []byte) error {
	for done := 0; done < n; done += 10000 {
		now := time.Now()
		sent := strconv.FormatInt(now.UnixNano(), 10)
		msgs := make([]*courier.Message, min(10000, n-done))
		for i := range msgs {
			k := first + done + i
			tenant, r := at(k)
			m := &courier.Message{ID: courier.QualifyID(tenant, fmt.Sprintf("f-%d", k)), Type: "bench", Route: fairRoute(tenant, r),
				Payload: payload, ContentType: "application/json", Headers: map[string]string{"X-Bench-Sent": sent}}
			if tagged {
				m.Headers["X-Bench-Tenant"] = tenant
			}
			courier.Accept(m, courier.DefaultPolicy(), false, now)
			msgs[i] = m
		}
		if _, err := store.Ingest(ctx, msgs); err != nil {
			return err
		}
	}
	return nil
}

// start opens a fresh store with the tenants' backlogs queued and starts an
// engine on it.
func (b benchFair) start(ctx context.Context, rcv benchReceiver, withB bool) (store courier.Store, eng *engine.Engine, stop func(), err error) {
	stores, limits, cleanup, err := benchDeliver{postgres: b.postgres}.openStores(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	store = stores[0]
	payload := []byte(`"fair"`)
	if err := queue(ctx, store, fairA, 0, b.backlog, b.routes, payload); err != nil {
		cleanup()
		return nil, nil, nil, err
	}
	if withB {
		if err := queue(ctx, store, fairB, 0, b.backlog, 1, payload); err != nil {
			cleanup()
			return nil, nil, nil, err
		}
	}
	eng, stopEngine := newBenchEngine(store, limits[0], b.topology(rcv.Addr()), b.workers, "bench-fair")
	stop = func() {
		stopEngine()
		cleanup()
	}
	return store, eng, stop, nil
}

// newBenchEngine makes an engine on store that sends over HTTP to the
// receiver on loopback; stop stops it and closes its transport.
func newBenchEngine(store courier.Store, limits courier.SharedLimits, top *courier.Topology, workers int, owner string) (eng *engine.Engine, stop func()) {
	tr := loopbackTransport()
	eng = engine.New(engine.Options{Store: store, Topology: top, Workers: workers, Owner: owner,
		Senders: map[courier.Transport]courier.Sender{courier.TransportHTTP: tr}, Limits: limits})
	return eng, func() {
		eng.Stop(context.Background())
		tr.Close()
	}
}

// loopbackTransport is the HTTP transport of the benchmarks: their
// receiver is on loopback, which the SSRF guard blocks unless allowed.
func loopbackTransport() *httptransport.Transport {
	return httptransport.New(httptransport.Options{AllowNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
}

// shared measures a and b waiting together while c sends.
func (b benchFair) shared(ctx context.Context, rcv benchReceiver, res *fairResult) error {
	store, eng, stop, err := b.start(ctx, rcv, true)
	if err != nil {
		return err
	}
	defer stop()
	if err := rcv.Reset(ctx, 0, int64(b.window)); err != nil {
		return err
	}
	if err := eng.Start(ctx); err != nil {
		return err
	}
	eng.Due(b.routeNames())
	began := time.Now()
	sent := 0
	tick := time.NewTicker(time.Second / time.Duration(max(b.rate, 1)))
	defer tick.Stop()
	for {
		st, err := rcv.Stats(ctx, false)
		if err != nil {
			return err
		}
		if st.Count >= int64(b.window) && time.Since(began) >= b.duration {
			break
		}
		if a, bb := st.Tenants[fairA], st.Tenants[fairB]; a.Count >= int64(b.backlog) || bb.Count >= int64(b.backlog) {
			return fmt.Errorf("a backlog ran out after %s (a %d, b %d delivered): raise --backlog", time.Since(began).Round(time.Millisecond), a.Count, bb.Count)
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
		if b.rate > 0 {
			if err := queue(ctx, store, fairC, sent, 1, 1, []byte(`"c"`)); err != nil {
				return err
			}
			sent++
			eng.Due([]string{fairRoute(fairC, 0)})
		}
	}
	// c's last messages arrive.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := rcv.Stats(ctx, false)
		if err != nil {
			return err
		}
		if st.Tenants[fairC].Count >= int64(sent) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err := rcv.Stats(ctx, true)
	if err != nil {
		return err
	}
	res.BShare = float64(st.Tenants[fairB].InFirst) / float64(b.window)
	res.AShare = float64(st.Tenants[fairA].InFirst) / float64(b.window)
	c := st.Tenants[fairC]
	res.CDelivered, res.CP50ms, res.CP99ms, res.CMaxMs = c.Count, c.P50ms, c.P99ms, c.MaxMs
	return nil
}

// alone measures a's backlog drained with no other tenant waiting.
func (b benchFair) alone(ctx context.Context, rcv benchReceiver, res *fairResult) error {
	_, eng, stop, err := b.start(ctx, rcv, false)
	if err != nil {
		return err
	}
	defer stop()
	if err := rcv.Reset(ctx, int64(b.backlog), 0); err != nil {
		return err
	}
	start := time.Now()
	if err := eng.Start(ctx); err != nil {
		return err
	}
	eng.Due(b.routeNames())
	st, err := waitDelivered(ctx, rcv, int64(b.backlog), time.Minute)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if st.ReachedAt > start.UnixNano() {
		elapsed = time.Duration(st.ReachedAt - start.UnixNano())
	}
	res.AloneMessages, res.AloneSeconds, res.AlonePerSec = b.backlog, elapsed.Seconds(), float64(b.backlog)/elapsed.Seconds()
	return nil
}
