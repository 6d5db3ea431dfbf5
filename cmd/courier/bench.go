package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/sqlite"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newBenchCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure courier on this machine",
	}
	cmd.AddCommand(newBenchIngestCmd(g), newBenchDeliverCmd(g), newBenchFairCmd(g), newBenchTenantsCmd(g), newBenchSinkCmd(g), newBenchSwitchCmd(g))
	return cmd
}

// benchFlags declares the flags several benchmarks take, each with one
// meaning and one description.
type benchFlags struct{ *pflag.FlagSet }

// postgres is --postgres: the database of the store, a temporary SQLite
// one when it is empty.
func (f benchFlags) postgres(dst *string) {
	f.StringVar(dst, "postgres", "", "use a fresh schema in this PostgreSQL database (dropped afterwards) instead of a temporary SQLite store")
}

// workers is --workers: the engine's attempts in flight.
func (f benchFlags) workers(dst *int) { f.IntVar(dst, "workers", 256, "attempts in flight at once") }

// size is --size: the bytes of each message's payload.
func (f benchFlags) size(dst *int, value int) { f.IntVar(dst, "size", value, "payload bytes") }

// clients is --clients: the API's callers at once.
func (f benchFlags) clients(dst *int, value int) {
	f.IntVar(dst, "clients", value, "concurrent clients, each with a keep-alive connection")
}

// cpuProfile is --cpuprofile: the file a CPU profile of what is measured
// (of) is written to.
func (f benchFlags) cpuProfile(dst *string, of string) {
	f.StringVar(dst, "cpuprofile", "", "write a CPU profile of "+of+" to this file")
}

// benchIngest is one ingest benchmark's settings.
type benchIngest struct {
	server   string // empty: an in-process server on a temporary store
	route    string
	clients  int
	duration time.Duration
	size     int
	batch    int // 0: one PUT per message
}

// benchResult is what an ingest benchmark measured.
type benchResult struct {
	Mode       string  `json:"mode"`
	Clients    int     `json:"clients"`
	Batch      int     `json:"batch,omitempty"`
	Size       int     `json:"payload_bytes"`
	Seconds    float64 `json:"seconds"`
	Messages   int64   `json:"messages"`
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	MsgsPerSec float64 `json:"msgs_per_sec"`
	P50ms      float64 `json:"p50_ms"`
	P99ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`
}

func newBenchIngestCmd(g *globals) *cobra.Command {
	b := benchIngest{}
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "Measure durable ingest: messages/s and request latency",
		Long: `Measure durable ingest: concurrent clients send messages for a while, each
request waiting for its 201; then the rate and the latency percentiles are
printed. By default the server runs inside this process on a temporary SQLite
store (removed afterwards); with --target it measures a running server, whose
--route must exist.`,
		Example: `  courier bench ingest                      # single PUTs, 64 clients, 1 KiB
  courier bench ingest --batch 1000 --clients 4`,
		Args: cobra.NoArgs,
		RunE: benchRun(g, func() error {
			if b.clients < 1 || b.size < 0 || b.batch < 0 || b.batch > api.MaxBatchItems || b.duration <= 0 {
				return fmt.Errorf("--clients must be at least 1, --batch from 0 to %d, --duration positive", api.MaxBatchItems)
			}
			return nil
		}, func(ctx context.Context) (*benchResult, error) {
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				return nil, err
			}
			defer stop()
			return b.run(ctx, g)
		}, func(res *benchResult) {
			fmt.Fprintf(g.stdout, "%s: %d clients, %d-byte payloads, %.1fs\n", res.Mode, res.Clients, res.Size, res.Seconds)
			fmt.Fprintf(g.stdout, "  %d messages in %d requests, %d errors\n", res.Messages, res.Requests, res.Errors)
			fmt.Fprintf(g.stdout, "  %.0f msgs/s; request latency p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
				res.MsgsPerSec, res.P50ms, res.P99ms, res.MaxMs)
		}),
	}
	f := benchFlags{cmd.Flags()}
	f.StringVar(&b.server, "target", "", "a running courier server to measure (default: one in this process)")
	f.StringVar(&b.route, "route", "bench", "route of the messages (must exist on --target)")
	f.clients(&b.clients, 64)
	f.DurationVar(&b.duration, "duration", 10*time.Second, "how long to send")
	f.size(&b.size, 1024)
	f.IntVar(&b.batch, "batch", 0, "messages per batch request (0: one PUT per message)")
	f.cpuProfile(&cpuProfile, "the run")
	return cmd
}

func (b benchIngest) run(ctx context.Context, g *globals) (*benchResult, error) {
	base := b.server
	if base == "" {
		url, stop, err := startBenchServer(b.route)
		if err != nil {
			return nil, err
		}
		defer stop()
		base = url
	} else if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	client := &http.Client{Transport: &http.Transport{
		MaxIdleConns: b.clients, MaxIdleConnsPerHost: b.clients, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	// The payload is a JSON string of exactly b.size bytes, quotes included.
	payloadJSON := `"` + strings.Repeat("x", max(b.size-2, 0)) + `"`
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	var messages, requests, errs atomic.Int64
	deadline := time.Now().Add(b.duration)
	ctx, cancel := context.WithDeadline(ctx, deadline.Add(30*time.Second))
	defer cancel()

	progressDone := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		start, last := time.Now(), int64(0)
		for {
			select {
			case <-progressDone:
				return
			case <-t.C:
				n := messages.Load()
				fmt.Fprintf(g.stderr, "  %4.0fs  %9d messages  %8.0f/s\n", time.Since(start).Seconds(), n, float64(n-last))
				last = n
			}
		}
	}()

	all, elapsed := runClients(b.clients, func(c int, took func(time.Duration)) {
		var body bytes.Buffer
		for i := 0; time.Now().Before(deadline); i++ {
			var req *http.Request
			n := 1
			body.Reset()
			if b.batch == 0 {
				fmt.Fprintf(&body, `{"type":"bench","route":%q,"payload":%s}`, b.route, payloadJSON)
				req, _ = http.NewRequestWithContext(ctx, http.MethodPut,
					base+"/v1/messages/bench-"+run+"-"+strconv.Itoa(c)+"-"+strconv.Itoa(i), bytes.NewReader(body.Bytes()))
			} else {
				n = b.batch
				body.WriteString(`{"messages":[`)
				for j := 0; j < n; j++ {
					if j > 0 {
						body.WriteByte(',')
					}
					fmt.Fprintf(&body, `{"id":"bench-%s-%d-%d-%d","type":"bench","route":%q,"payload":%s}`, run, c, i, j, b.route, payloadJSON)
				}
				body.WriteString(`]}`)
				req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages/batch", bytes.NewReader(body.Bytes()))
			}
			req.Header.Set("Content-Type", "application/json")
			t0 := time.Now()
			resp, err := client.Do(req)
			if err != nil {
				errs.Add(1)
				continue
			}
			ok := resp.StatusCode == http.StatusCreated || (b.batch > 0 && resp.StatusCode == http.StatusOK)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			took(time.Since(t0))
			requests.Add(1)
			if !ok {
				errs.Add(1)
				continue
			}
			messages.Add(int64(n))
		}
	})
	close(progressDone)
	p50, p99, maxMs := percentiles(all)
	mode := "single PUTs"
	if b.batch > 0 {
		mode = fmt.Sprintf("batches of %d", b.batch)
	}
	return &benchResult{
		Mode: mode, Clients: b.clients, Batch: b.batch, Size: b.size, Seconds: elapsed.Seconds(),
		Messages: messages.Load(), Requests: requests.Load(), Errors: errs.Load(),
		MsgsPerSec: float64(messages.Load()) / elapsed.Seconds(), P50ms: p50, P99ms: p99, MaxMs: maxMs,
	}, nil
}

// startBenchServer runs the API on loopback over a temporary SQLite store
// with one route, and returns its URL and a function that removes it all.
func startBenchServer(route string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "courier-bench-")
	if err != nil {
		return "", nil, err
	}
	store, err := sqlite.Open(filepath.Join(dir, "courier.db"), sqlite.Options{})
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	topology := &courier.Topology{
		Endpoints: map[string]*courier.Endpoint{"bench": {Name: "bench", Transport: courier.TransportHTTP}},
		Routes:    map[string]*courier.Route{route: {Name: route, Endpoints: []string{"bench"}, Strategy: courier.StrategySingle}},
		Policies:  map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}
	srv, base, err := serveLoopback(api.NewServer(api.Options{Store: store, Topology: topology}))
	if err != nil {
		store.Close()
		os.RemoveAll(dir)
		return "", nil, err
	}
	return base, func() {
		srv.Close()
		store.Close()
		os.RemoveAll(dir)
	}, nil
}

// serveLoopback serves h on a free port of the loopback interface, and
// returns the server, for its Close, and its base URL.
func serveLoopback(h http.Handler) (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String(), nil
}

// percentiles returns the median, the 99th percentile and the largest of
// durations, in milliseconds; it sorts them.
// runClients runs client(c, took) for each of n clients at once, and
// returns how long each of their requests took, as they told took, and how
// long they ran.
func runClients(n int, client func(c int, took func(time.Duration))) (latencies []time.Duration, elapsed time.Duration) {
	lat := make([][]time.Duration, n) // a slice each, so that clients append without a lock
	var wg sync.WaitGroup
	start := time.Now()
	for c := range n {
		wg.Go(func() { client(c, func(d time.Duration) { lat[c] = append(lat[c], d) }) })
	}
	wg.Wait()
	elapsed = time.Since(start)
	for _, l := range lat {
		latencies = append(latencies, l...)
	}
	return latencies, elapsed
}

func percentiles(l []time.Duration) (p50, p99, maxMs float64) {
	if len(l) == 0 {
		return 0, 0, 0
	}
	slices.Sort(l)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(l[len(l)/2]), ms(l[int(0.99*float64(len(l)-1))]), ms(l[len(l)-1])
}

// benchRun is the RunE of a benchmark: the global flags are checked and
// then the benchmark's own (invalid says what is wrong with them), the
// runtime is tuned as serve tunes it, an interrupt ends the run the way an
// error does (the receiver process stopped, the temporary store removed),
// and the result is printed as JSON, or by show.
func benchRun[R any](g *globals, invalid func() error, run func(context.Context) (R, error), show func(R)) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := g.check(); err != nil {
			return err
		}
		if err := invalid(); err != nil {
			return err
		}
		tuneRuntime()
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		res, err := run(ctx)
		if err != nil {
			return err
		}
		if g.output == "json" {
			return g.printJSON(res)
		}
		show(res)
		return nil
	}
}
