package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/spf13/cobra"
)

// benchSwitch is one switching benchmark's settings.
type benchSwitch struct {
	endpoints  int
	clients    int
	rate       int    // messages a second delivered meanwhile
	postgres   string // a fresh schema in this PostgreSQL database instead of SQLite
	cpuProfile string
}

// switchPhase is what one phase of the switching benchmark measured.
type switchPhase struct {
	Phase     string  `json:"phase"`
	Requests  int     `json:"requests"`
	Switches  int     `json:"switches"`
	Errors    int64   `json:"errors"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"switches_per_sec"`
	P50ms     float64 `json:"p50_ms,omitempty"`
	P99ms     float64 `json:"p99_ms,omitempty"`
}

// switchResult is what the switching benchmark measured.
type switchResult struct {
	Store     string        `json:"store"`
	Endpoints int           `json:"endpoints"`
	Clients   int           `json:"clients"`
	Delivered int64         `json:"delivered_meanwhile"`
	Phases    []switchPhase `json:"phases"`
}

func newBenchSwitchCmd(g *globals) *cobra.Command {
	b := benchSwitch{}
	cmd := &cobra.Command{
		Use:   "switch",
		Short: "Measure switching endpoints off and on through the API: switches/s",
		Long: `Measure how fast endpoints are switched off and on through the API while
courier delivers: the API, the engine and a temporary SQLite store (or a fresh
PostgreSQL schema) in this process, --endpoints HTTP endpoints (one route each)
to a receiver on loopback, and --rate messages a second sent to them all along.

Every endpoint is switched off, then on again, one request each from --clients
concurrent clients (POST /v1/endpoints/NAME/off and /on); then all of them
off and on again by one request with a filter. The switches a second of each
phase are printed.`,
		Example: `  courier bench switch
  courier bench switch --postgres postgres://localhost/courier`,
		Args: cobra.NoArgs,
		RunE: benchRun(g, func() error {
			if b.endpoints < 1 || b.clients < 1 || b.rate < 0 {
				return fmt.Errorf("--endpoints and --clients must be at least 1, --rate at least 0")
			}
			return nil
		}, func(ctx context.Context) (*switchResult, error) { return b.run(ctx, g) }, func(res *switchResult) {
			fmt.Fprintf(g.stdout, "%s: %d endpoints, %d clients, %d messages delivered meanwhile\n", res.Store, res.Endpoints, res.Clients, res.Delivered)
			for _, p := range res.Phases {
				fmt.Fprintf(g.stdout, "  %-22s %6d switches in %5d requests, %.2fs: %8.0f switches/s", p.Phase, p.Switches, p.Requests, p.Seconds, p.PerSecond)
				if p.Requests > 1 {
					fmt.Fprintf(g.stdout, "; request p50 %.2f ms, p99 %.2f ms", p.P50ms, p.P99ms)
				}
				if p.Errors > 0 {
					fmt.Fprintf(g.stdout, "; %d errors", p.Errors)
				}
				fmt.Fprintln(g.stdout)
			}
		}),
	}
	f := benchFlags{cmd.Flags()}
	f.IntVar(&b.endpoints, "endpoints", 10000, "endpoints to switch (one route each)")
	f.clients(&b.clients, 32)
	f.IntVar(&b.rate, "rate", 200, "messages a second sent to the endpoints meanwhile, round robin")
	f.postgres(&b.postgres)
	f.cpuProfile(&b.cpuProfile, "the switching")
	return cmd
}

func (b benchSwitch) run(ctx context.Context, g *globals) (*switchResult, error) {
	stores, limits, cleanup, err := benchDeliver{postgres: b.postgres}.openStores(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	store := stores[0]
	rcv, err := startLocalReceiver()
	if err != nil {
		return nil, err
	}
	defer rcv.Close()
	top := benchTopology{b: benchDeliver{endpoints: b.endpoints, concurrency: 4}, rcvAddr: rcv.Addr()}.file()
	tr := loopbackTransport()
	defer tr.Close()
	eng := engine.New(engine.Options{Store: store, Topology: top, Limits: limits[0],
		Senders: map[courier.Transport]courier.Sender{courier.TransportHTTP: tr}, Owner: "bench-switch"})
	// Wired as serve wires them: a switch on may start re-drives.
	bulk := engine.NewBulk(store, nil, nil, eng.Wake, nil)
	eng.Redrive(bulk)
	handler := api.NewServer(api.Options{Store: store, Topology: top, DueFunc: eng.Due, ScheduledFunc: eng.Scheduled,
		ActivityFunc: eng.Activity, HealthSwitchedFunc: eng.HealthSwitched, Bulk: bulk})
	srv, base, err := serveLoopback(handler)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	if err := bulk.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		bulk.Stop(sctx)
		eng.Stop(sctx)
	}()
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: b.clients + 1, MaxIdleConnsPerHost: b.clients + 1}}

	// Deliveries go on beside the switching, as on a server at work.
	lctx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	loadDone := make(chan struct{})
	go func() {
		defer close(loadDone)
		if b.rate == 0 {
			return
		}
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		per := max(1, b.rate/10)
		for first := 0; lctx.Err() == nil; first += per {
			postBatch(lctx, client, base, first, per, func(i int) int { return i % b.endpoints }, 0, `"x"`)
			select {
			case <-lctx.Done():
			case <-tick.C:
			}
		}
	}()

	res := &switchResult{Store: "sqlite", Endpoints: b.endpoints, Clients: b.clients}
	if b.postgres != "" {
		res.Store = "postgres"
	}
	stopProfile, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		return nil, err
	}
	ac := api.NewClientWith(base, "", client)
	for _, phase := range []func() (switchPhase, error){
		func() (switchPhase, error) { return b.oneByOne(ctx, client, base, "off") },
		func() (switchPhase, error) { return b.oneByOne(ctx, client, base, "on") },
		func() (switchPhase, error) { return b.byFilter(ctx, ac, false) },
		func() (switchPhase, error) { return b.byFilter(ctx, ac, true) },
	} {
		p, err := phase()
		if err != nil {
			stopProfile()
			return nil, err
		}
		res.Phases = append(res.Phases, p)
		fmt.Fprintf(g.stderr, "  %s: %.0f switches/s\n", p.Phase, p.PerSecond)
	}
	stopProfile()
	stopLoad()
	<-loadDone
	st, _ := rcv.Stats(ctx, false)
	res.Delivered = st.Count
	return res, nil
}

// oneByOne switches every endpoint with a request of its own, from the
// clients at once.
func (b benchSwitch) oneByOne(ctx context.Context, client *http.Client, base, verb string) (switchPhase, error) {
	next := atomic.Int64{}
	var errs atomic.Int64
	var firstErr atomic.Value
	all, elapsed := runClients(b.clients, func(_ int, took func(time.Duration)) {
		for {
			i := int(next.Add(1)) - 1
			if i >= b.endpoints {
				return
			}
			t0 := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/endpoints/"+url.PathEscape(endpointName(i))+"/"+verb, nil)
			resp, err := client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("switch %s %s: HTTP %d", endpointName(i), verb, resp.StatusCode)
				}
			}
			if err != nil {
				errs.Add(1)
				firstErr.CompareAndSwap(nil, err)
				continue
			}
			took(time.Since(t0))
		}
	})
	if err, _ := firstErr.Load().(error); err != nil && errs.Load() == int64(b.endpoints) {
		return switchPhase{}, err
	}
	p50, p99, _ := percentiles(all)
	return switchPhase{Phase: verb + ", one request each", Requests: b.endpoints, Switches: len(all), Errors: errs.Load(),
		Seconds: elapsed.Seconds(), PerSecond: float64(len(all)) / elapsed.Seconds(), P50ms: p50, P99ms: p99}, nil
}

// byFilter switches every endpoint with one request, by their names'
// prefix.
func (b benchSwitch) byFilter(ctx context.Context, c *api.Client, on bool) (switchPhase, error) {
	start := time.Now()
	res, err := c.SwitchEndpoints(ctx, on, api.EndpointFilter{NamePrefix: "receiver-"})
	if err != nil {
		return switchPhase{}, err
	}
	took := time.Since(start)
	if res.Count != b.endpoints {
		return switchPhase{}, fmt.Errorf("switched %d endpoints by the filter, want %d", res.Count, b.endpoints)
	}
	return switchPhase{Phase: switchVerb(on) + ", by filter", Requests: 1, Switches: res.Count, Seconds: took.Seconds(),
		PerSecond: float64(res.Count) / took.Seconds()}, nil
}

func switchVerb(on bool) string {
	if on {
		return "on"
	}
	return "off"
}
