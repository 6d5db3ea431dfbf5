package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/cpustat"
	httptransport "github.com/courier-gw/courier/transport/http"
	"github.com/spf13/cobra"
)

// benchTenants is one tenants-at-scale benchmark's settings.
type benchTenants struct {
	tenants    int
	endpoints  int // per tenant, one route each
	messages   int // drained in each of the two drains
	queued     int // queued for the memory phase; 0: no memory phase
	hold       time.Duration
	size       int
	workers    int
	postgres   string
	cpuProfile string // of the drain over every tenant
}

// tenantsResult is what a tenants-at-scale benchmark measured.
type tenantsResult struct {
	Tenants            int `json:"tenants"`
	EndpointsPerTenant int `json:"endpoints_per_tenant"`
	Messages           int `json:"messages"`
	PayloadBytes       int `json:"payload_bytes"`
	// One is the drain of Messages through one tenant with one endpoint,
	// Many the drain of as many over every tenant's endpoints.
	One  tenantsDrain `json:"one_tenant_one_endpoint"`
	Many tenantsDrain `json:"many"`
	// Ratio is Many's rate over One's.
	Ratio  float64        `json:"ratio"`
	Memory *tenantsMemory `json:"memory,omitempty"`
}

// tenantsDrain is one drain: how long its messages took to arrive.
type tenantsDrain struct {
	Seconds float64 `json:"seconds"`
	PerSec  float64 `json:"deliveries_per_sec"`
	Load    float64 `json:"load_average_1m"` // the machine's, when the drain ended
	// CPUus is what this process (courier; the receiver runs in its own)
	// spent per delivered message.
	CPUus float64 `json:"courier_cpu_us_per_message"`
}

// tenantsMemory is courier's memory with many messages queued over every
// tenant while the engine runs against a slow receiver.
type tenantsMemory struct {
	Queued       int     `json:"queued"`
	QueueSeconds float64 `json:"queue_seconds"` // storing them, straight into the store
	Seconds      float64 `json:"engine_seconds"`
	Delivered    int64   `json:"delivered"` // by the slow receiver meanwhile
	// RSS of this process (the engine and the store's client; the
	// receiver runs in its own) from /proc: before the engine started,
	// at the end, and the most it reached while the engine ran.
	RSSBeforeMB float64 `json:"rss_before_engine_mb"`
	RSSMB       float64 `json:"rss_mb"`
	PeakRSSMB   float64 `json:"peak_rss_mb"`
	// PeakRunMB is the most of the whole run, the storing of the
	// messages by the benchmark included.
	PeakRunMB float64 `json:"peak_rss_whole_run_mb"`
	HeapMB    float64 `json:"heap_in_use_mb"` // at the end
	Load      float64 `json:"load_average_1m"`
}

func newBenchTenantsCmd(g *globals) *cobra.Command {
	b := benchTenants{}
	cmd := &cobra.Command{
		Use:   "tenants",
		Short: "Measure tenants at scale: the drain over many tenants' endpoints against one's, and memory with a deep queue",
		Long: `Measure courier with many tenants (docs/design.md §20). --tenants tenants of
weight 1 have --endpoints endpoints each, one route per endpoint, all HTTP to a
receiver that answers 204 in a process of its own, as in bench deliver.

Drains, each on a fresh store: --messages messages queued for one tenant with
one endpoint (max_concurrency 256), then as many spread round robin over every
tenant's routes (max_concurrency 16 each), are delivered; both rates and the
second's ratio to the first are printed, each with the machine's load average.

With --queued, a fresh store then has that many messages queued over every
tenant's routes, and the engine runs for --hold against endpoints where the
receiver answers only after ` + slowDelay.String() + `, so that nearly all stay
queued: this process's resident memory (courier's engine and store, from
/proc) is printed before the engine started, at the end and at its peak.

The messages are queued in the store directly, with qualified ids and
routes, and the engine is told of their routes (Engine.Due), as the API
does after an ingest.`,
		Example: `  courier bench tenants
  courier bench tenants --tenants 1000 --endpoints 10 --messages 100000 --queued 1000000
  courier bench tenants --postgres postgres://localhost/courier`,
		Args: cobra.NoArgs,
		RunE: benchRun(g, func() error {
			if b.tenants < 1 || b.endpoints < 1 || b.messages < 1 || b.queued < 0 || b.size < 2 || b.workers < 1 || b.hold <= 0 {
				return fmt.Errorf("--tenants, --endpoints, --messages and --workers must be at least 1, --queued at least 0, --size at least 2, --hold positive")
			}
			return nil
		}, func(ctx context.Context) (*tenantsResult, error) { return b.run(ctx, g) }, func(res *tenantsResult) {
			fmt.Fprintf(g.stdout, "tenants: %d messages of %d bytes\n", res.Messages, res.PayloadBytes)
			for _, d := range []struct {
				what string
				d    tenantsDrain
			}{{"1 tenant, 1 endpoint", res.One}, {fmt.Sprintf("%d tenants, %d endpoints each", res.Tenants, res.EndpointsPerTenant), res.Many}} {
				fmt.Fprintf(g.stdout, "  %s: %.0f msgs/s (%.2fs), courier CPU %.0f µs per message; load %.2f\n",
					d.what, d.d.PerSec, d.d.Seconds, d.d.CPUus, d.d.Load)
			}
			fmt.Fprintf(g.stdout, "  ratio %.2f\n", res.Ratio)
			if m := res.Memory; m != nil {
				fmt.Fprintf(g.stdout, "memory: %d queued over every tenant (stored in %.1fs), engine running %.0fs against a slow receiver (%d delivered meanwhile)\n",
					m.Queued, m.QueueSeconds, m.Seconds, m.Delivered)
				fmt.Fprintf(g.stdout, "  RSS %.0f MB before the engine, %.0f MB at the end, peak %.0f MB (whole run %.0f MB); heap in use %.0f MB; load %.2f\n",
					m.RSSBeforeMB, m.RSSMB, m.PeakRSSMB, m.PeakRunMB, m.HeapMB, m.Load)
			}
		}),
	}
	f := benchFlags{cmd.Flags()}
	f.IntVar(&b.tenants, "tenants", 1000, "tenants")
	f.IntVar(&b.endpoints, "endpoints", 10, "endpoints of each tenant, one route each")
	f.IntVar(&b.messages, "messages", 100000, "messages of each drain")
	f.IntVar(&b.queued, "queued", 0, "then measure memory with this many messages queued over every tenant (0: do not)")
	f.DurationVar(&b.hold, "hold", 15*time.Second, "with --queued: how long the engine runs with them queued")
	f.size(&b.size, 256)
	f.workers(&b.workers)
	f.postgres(&b.postgres)
	f.cpuProfile(&b.cpuProfile, "the drain over every tenant")
	return cmd
}

func (b benchTenants) run(ctx context.Context, g *globals) (*tenantsResult, error) {
	rcv, err := startProcessReceiver(ctx)
	if err != nil {
		return nil, err
	}
	defer rcv.Close()
	res := &tenantsResult{Tenants: b.tenants, EndpointsPerTenant: b.endpoints, Messages: b.messages, PayloadBytes: b.size}
	fmt.Fprintf(g.stderr, "1 tenant, 1 endpoint: %d messages...\n", b.messages)
	if res.One, err = b.drain(ctx, rcv, 1, 1, ""); err != nil {
		return nil, err
	}
	fmt.Fprintf(g.stderr, "%d tenants, %d endpoints each: %d messages...\n", b.tenants, b.endpoints, b.messages)
	if res.Many, err = b.drain(ctx, rcv, b.tenants, b.endpoints, b.cpuProfile); err != nil {
		return nil, err
	}
	res.Ratio = res.Many.PerSec / res.One.PerSec
	if b.queued > 0 {
		fmt.Fprintf(g.stderr, "memory: %d messages queued over %d tenants...\n", b.queued, b.tenants)
		if res.Memory, err = b.memory(ctx, rcv); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// tenantName is tenant i of the benchmark.
func tenantName(i int) string { return fmt.Sprintf("t%04d", i) }

// spread is where message k goes with tenants tenants of endpoints
// endpoints: round robin over the tenants, and over each one's routes.
func spread(tenants, endpoints int) func(k int) (string, int) {
	return func(k int) (string, int) { return tenantName(k % tenants), (k / tenants) % endpoints }
}

// topology is tenants tenants of weight 1, each with endpoints endpoints
// to the receiver under path and a route to each (fairRoute).
func (b benchTenants) topology(rcvAddr, path string, tenants, endpoints, concurrency int) (*courier.Topology, []string) {
	top := &courier.Topology{Endpoints: map[string]*courier.Endpoint{}, Routes: map[string]*courier.Route{},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()}, Tenants: map[string]*courier.Tenant{}}
	var routes []string
	for t := 0; t < tenants; t++ {
		tenant := tenantName(t)
		top.Tenants[tenant] = &courier.Tenant{Name: tenant, Weight: 1}
		for i := 0; i < endpoints; i++ {
			ep := courier.NewEndpoint(courier.Qualify(tenant, fmt.Sprintf("ep-%03d", i)), courier.TransportHTTP)
			ep.Timeout, ep.MaxConcurrency = 10*time.Second, concurrency
			ep.Settings = &httptransport.Settings{URL: fmt.Sprintf("http://%s%s%s/%d", rcvAddr, path, tenant, i), Method: http.MethodPost}
			top.Endpoints[ep.Name] = ep
			r := fairRoute(tenant, i)
			top.Routes[r] = &courier.Route{Name: r, Endpoints: []string{ep.Name}, Strategy: courier.StrategySingle}
			routes = append(routes, r)
		}
	}
	top.Prepare()
	return top, routes
}

// drain queues b.messages over tenants tenants of endpoints endpoints on a
// fresh store, then starts an engine and times their arrival.
func (b benchTenants) drain(ctx context.Context, rcv benchReceiver, tenants, endpoints int, cpuProfile string) (tenantsDrain, error) {
	var d tenantsDrain
	stores, limits, cleanup, err := benchDeliver{postgres: b.postgres}.openStores(ctx)
	if err != nil {
		return d, err
	}
	defer cleanup()
	store := stores[0]
	// One endpoint takes every worker, as in bench deliver; many get the
	// design's default.
	concurrency := 16
	if tenants*endpoints == 1 {
		concurrency = b.workers
	}
	top, routes := b.topology(rcv.Addr(), "/in/", tenants, endpoints, concurrency)
	if err := queueSpread(ctx, store, 0, b.messages, spread(tenants, endpoints), false, b.payload()); err != nil {
		return d, err
	}
	eng, stop := newBenchEngine(store, limits[0], top, b.workers, "bench-tenants")
	defer stop()
	if err := rcv.Reset(ctx, int64(b.messages), 0); err != nil {
		return d, err
	}
	stopProfile, err := startCPUProfile(cpuProfile)
	if err != nil {
		return d, err
	}
	defer stopProfile()
	cpu := cpustat.Process()
	start := time.Now()
	if err := eng.Start(ctx); err != nil {
		return d, err
	}
	eng.Due(routes)
	st, err := waitDelivered(ctx, rcv, int64(b.messages), time.Minute)
	if err != nil {
		return d, err
	}
	d.CPUus = float64((cpustat.Process() - cpu).Microseconds()) / float64(b.messages)
	elapsed := time.Since(start)
	if st.ReachedAt > start.UnixNano() {
		elapsed = time.Duration(st.ReachedAt - start.UnixNano())
	}
	d.Seconds, d.PerSec, d.Load = elapsed.Seconds(), float64(b.messages)/elapsed.Seconds(), loadAverage()
	return d, nil
}

// memory queues b.queued messages over every tenant on a fresh store and
// runs an engine against the slow receiver for b.hold, reading this
// process's resident memory.
func (b benchTenants) memory(ctx context.Context, rcv benchReceiver) (*tenantsMemory, error) {
	m := &tenantsMemory{Queued: b.queued}
	stores, limits, cleanup, err := benchDeliver{postgres: b.postgres}.openStores(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	store := stores[0]
	top, routes := b.topology(rcv.Addr(), slowPath, b.tenants, b.endpoints, 16)
	start := time.Now()
	if err := queueSpread(ctx, store, 0, b.queued, spread(b.tenants, b.endpoints), false, b.payload()); err != nil {
		return nil, err
	}
	m.QueueSeconds = time.Since(start).Seconds()
	m.PeakRunMB = procStatusMB("VmHWM")
	// What the benchmark itself allocated to queue them is no courier's.
	runtime.GC()
	debug.FreeOSMemory()
	m.RSSBeforeMB = procStatusMB("VmRSS")
	resetPeakRSS()
	peakReset := procStatusMB("VmHWM") <= m.RSSBeforeMB+1
	if err := rcv.Reset(ctx, 0, 0); err != nil {
		return nil, err
	}
	eng, stop := newBenchEngine(store, limits[0], top, b.workers, "bench-tenants")
	defer stop()
	start = time.Now()
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	eng.Due(routes)
	peak := 0.0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for time.Since(start) < b.hold {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-tick.C:
		}
		peak = max(peak, procStatusMB("VmRSS"))
	}
	m.Seconds = time.Since(start).Seconds()
	m.RSSMB = procStatusMB("VmRSS")
	// The kernel's peak since the reset, where it could be reset, and the
	// most of the readings.
	m.PeakRSSMB = max(peak, m.RSSMB)
	if peakReset {
		m.PeakRSSMB = max(m.PeakRSSMB, procStatusMB("VmHWM"))
	}
	m.PeakRunMB = max(m.PeakRunMB, procStatusMB("VmHWM"))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m.HeapMB = float64(ms.HeapInuse) / (1 << 20)
	m.Load = loadAverage()
	st, err := rcv.Stats(ctx, false)
	if err != nil {
		return nil, err
	}
	m.Delivered = st.Count
	return m, nil
}

// payload is a JSON string of b.size bytes, quotes included.
func (b benchTenants) payload() []byte {
	return []byte(`"` + string(bytes.Repeat([]byte("x"), b.size-2)) + `"`)
}

// procStatusMB reads a field of this process's /proc status that is in
// kB (VmRSS, VmHWM), in MB; 0 where there is none.
func procStatusMB(field string) float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		if err != nil {
			return 0
		}
		return kb / 1024
	}
	return 0
}

// resetPeakRSS sets this process's VmHWM to its present RSS, where the
// kernel allows it.
func resetPeakRSS() {
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// loadAverage is the machine's load average over the last minute; 0
// where it cannot be read.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	one, _, _ := strings.Cut(string(b), " ")
	l, _ := strconv.ParseFloat(one, 64)
	return l
}
