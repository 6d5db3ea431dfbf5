package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/courier-gw/courier/internal/cpustat"
	"github.com/spf13/cobra"
)

// The receiver of bench deliver runs in a process of its own by default, as
// a real receiver does: what courier costs is then measured apart from what
// receiving costs. The parent starts this executable as `bench sink`, reads
// the address it listens on from its first line of output, and asks it
// for its counts over HTTP.

// sinkStats is what the receiver tells of itself. The latency percentiles
// are there only when asked for: sorting every arrival on each poll would
// cost the receiver more than receiving.
type sinkStats struct {
	Count     int64   `json:"count"`
	CPUus     int64   `json:"cpu_us"`                      // user and system CPU time of its process so far; 0 in courier's own
	ReachedAt int64   `json:"reached_unix_nano,omitempty"` // when the count reached the target of the last reset
	P50ms     float64 `json:"p50_ms,omitempty"`
	P99ms     float64 `json:"p99_ms,omitempty"`
	MaxMs     float64 `json:"max_ms,omitempty"`
	// Tenants tells, of messages with an X-Bench-Tenant header, per
	// tenant: how many arrived, how many of the first arrivals of the last
	// reset's window, and with latency their percentiles.
	Tenants map[string]sinkTenant `json:"tenants,omitempty"`
}

// sinkTenant is what the receiver saw of one tenant's messages.
type sinkTenant struct {
	Count   int64   `json:"count"`
	InFirst int64   `json:"in_first"`
	P50ms   float64 `json:"p50_ms,omitempty"`
	P99ms   float64 `json:"p99_ms,omitempty"`
	MaxMs   float64 `json:"max_ms,omitempty"`
}

const (
	sinkStatsPath = "/_bench/stats" // GET; ?latency=1 adds the percentiles
	sinkResetPath = "/_bench/reset" // POST ?target=N&window=W: counts from zero, noting when N arrived and whose the first W were
)

func newBenchSinkCmd(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Run the receiver of bench deliver (it starts one by itself)",
		Long: `Run the receiver that bench deliver sends to: it answers 204 to every POST
(and never answers on /hole, and under ` + slowPath + ` only after ` + slowDelay.String() + `), and notes the time from the X-Bench-Sent header
to arrival. GET ` + sinkStatsPath + ` tells its count and CPU time as JSON (with
?latency=1 also the latency percentiles); POST ` + sinkResetPath + `?target=N counts
from zero again and notes when the Nth message arrives. Messages with an
X-Bench-Tenant header are also counted per tenant (with ?window=W on the reset,
also those among the first W arrivals), with their own latencies.

It prints the address it listens on, and stops when its standard input
closes. bench deliver starts one by itself; run it by hand only to watch it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			rc := &benchSink{}
			mux := http.NewServeMux()
			mux.HandleFunc("GET "+sinkStatsPath, func(w http.ResponseWriter, r *http.Request) {
				cpu := cpustat.Process() // before the sorting of the latencies, which is no receiving
				st := rc.stats(r.URL.Query().Get("latency") != "")
				st.CPUus = cpu.Microseconds()
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(st)
			})
			mux.HandleFunc("POST "+sinkResetPath, func(w http.ResponseWriter, r *http.Request) {
				target, err := strconv.ParseInt(r.URL.Query().Get("target"), 10, 64)
				if err != nil && r.URL.Query().Has("target") {
					http.Error(w, "target must be a number", http.StatusBadRequest)
					return
				}
				window, err := strconv.ParseInt(r.URL.Query().Get("window"), 10, 64)
				if err != nil && r.URL.Query().Has("window") {
					http.Error(w, "window must be a number", http.StatusBadRequest)
					return
				}
				rc.reset(target, window)
				w.WriteHeader(http.StatusNoContent)
			})
			mux.Handle("/", rc)
			srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
			go srv.Serve(ln)
			fmt.Fprintln(g.stdout, ln.Addr().String())
			io.Copy(io.Discard, cmd.InOrStdin()) // until the parent goes
			return srv.Close()
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	return cmd
}

// slowPath is where the receiver is slow: it answers each POST there
// after slowDelay.
const (
	slowPath  = "/slow/"
	slowDelay = time.Second
)

// benchSink answers 204 and notes, per arrival, the time since the message
// was sent (from the X-Bench-Sent header). On /hole it never answers, and
// under slowPath it answers after slowDelay.
type benchSink struct {
	count   atomic.Int64
	target  atomic.Int64 // 0: none
	reached atomic.Int64 // Unix nanoseconds when count reached target

	mu      sync.Mutex
	latency []time.Duration
	window  int64                      // the first arrivals counted per tenant apart
	tenants map[string]*tenantArrivals // by X-Bench-Tenant
}

// tenantArrivals is what arrived of one tenant's messages.
type tenantArrivals struct {
	count, inFirst int64
	latency        []time.Duration
}

func (rc *benchSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hole" {
		<-r.Context().Done() // the sender's timeout ends it
		return
	}
	if strings.HasPrefix(r.URL.Path, slowPath) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(slowDelay):
		}
	}
	io.Copy(io.Discard, r.Body)
	tenant := r.Header.Get("X-Bench-Tenant")
	if sent, err := strconv.ParseInt(r.Header.Get("X-Bench-Sent"), 10, 64); err == nil {
		d := time.Since(time.Unix(0, sent))
		rc.mu.Lock()
		rc.latency = append(rc.latency, d)
		if tenant != "" {
			rc.tenant(tenant).latency = append(rc.tenant(tenant).latency, d)
		}
		rc.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
	n := rc.count.Add(1)
	if n == rc.target.Load() {
		rc.reached.Store(time.Now().UnixNano())
	}
	if tenant != "" {
		rc.mu.Lock()
		ta := rc.tenant(tenant)
		ta.count++
		if n <= rc.window {
			ta.inFirst++
		}
		rc.mu.Unlock()
	}
}

// tenant returns what arrived of a tenant's messages; rc.mu is held.
func (rc *benchSink) tenant(name string) *tenantArrivals {
	if rc.tenants == nil {
		rc.tenants = map[string]*tenantArrivals{}
	}
	ta := rc.tenants[name]
	if ta == nil {
		ta = &tenantArrivals{}
		rc.tenants[name] = ta
	}
	return ta
}

// reset counts from zero, forgets the latencies and notes when target
// messages will have arrived (0: never), and whose the first window are.
func (rc *benchSink) reset(target, window int64) {
	rc.mu.Lock()
	rc.latency, rc.tenants, rc.window = nil, nil, window
	rc.mu.Unlock()
	rc.reached.Store(0)
	rc.target.Store(target)
	rc.count.Store(0)
}

// stats tells the count, and with latency the percentiles of the times
// from send to arrival.
func (rc *benchSink) stats(latency bool) sinkStats {
	st := sinkStats{Count: rc.count.Load(), ReachedAt: rc.reached.Load()}
	rc.mu.Lock()
	var l []time.Duration
	if latency {
		l = slices.Clone(rc.latency)
	}
	tenants := map[string]tenantArrivals{}
	for name, ta := range rc.tenants {
		t := tenantArrivals{count: ta.count, inFirst: ta.inFirst}
		if latency {
			t.latency = slices.Clone(ta.latency)
		}
		tenants[name] = t
	}
	rc.mu.Unlock()
	if latency {
		st.P50ms, st.P99ms, st.MaxMs = percentiles(l)
	}
	for name, ta := range tenants {
		if st.Tenants == nil {
			st.Tenants = map[string]sinkTenant{}
		}
		t := sinkTenant{Count: ta.count, InFirst: ta.inFirst}
		if latency {
			t.P50ms, t.P99ms, t.MaxMs = percentiles(ta.latency)
		}
		st.Tenants[name] = t
	}
	return st
}

// benchReceiver is where bench deliver's endpoints point: in this process, or
// in one of its own.
type benchReceiver interface {
	Addr() string
	Stats(ctx context.Context, latency bool) (sinkStats, error)
	// Reset counts from zero, noting when target messages arrived and
	// whose the first window were.
	Reset(ctx context.Context, target, window int64) error
	Close()
}

// localReceiver is a receiver in this process.
type localReceiver struct {
	rc  *benchSink
	srv *http.Server
	ln  net.Listener
}

func startLocalReceiver() (*localReceiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &localReceiver{rc: &benchSink{}, ln: ln}
	r.srv = &http.Server{Handler: r.rc, ReadHeaderTimeout: 10 * time.Second}
	go r.srv.Serve(ln)
	return r, nil
}

func (r *localReceiver) Addr() string { return r.ln.Addr().String() }
func (r *localReceiver) Close()       { r.srv.Close() }

// Stats of a receiver in this process count no CPU of their own: it is
// in courier's.
func (r *localReceiver) Stats(_ context.Context, latency bool) (sinkStats, error) {
	return r.rc.stats(latency), nil
}

func (r *localReceiver) Reset(_ context.Context, target, window int64) error {
	r.rc.reset(target, window)
	return nil
}

// processReceiver is a receiver in a process of its own.
type processReceiver struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	addr   string
	client *http.Client
}

// startProcessReceiver starts this executable as `bench sink`. The child
// ends when its standard input closes, so it goes with this process even
// when this one is killed; ctx ending kills it at once.
func startProcessReceiver(ctx context.Context) (*processReceiver, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable to start the receiver: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, "bench", "sink", "--listen", "127.0.0.1:0")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the receiver: %w", err)
	}
	r := &processReceiver{cmd: cmd, stdin: stdin, client: &http.Client{Timeout: 10 * time.Second}}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("the receiver did not say where it listens: %w", err)
	}
	r.addr = strings.TrimSpace(line)
	return r, nil
}

func (r *processReceiver) Addr() string { return r.addr }

func (r *processReceiver) Stats(ctx context.Context, latency bool) (sinkStats, error) {
	var st sinkStats
	u := "http://" + r.addr + sinkStatsPath
	if latency {
		u += "?latency=1"
	}
	err := r.call(ctx, http.MethodGet, u, &st)
	return st, err
}

func (r *processReceiver) Reset(ctx context.Context, target, window int64) error {
	return r.call(ctx, http.MethodPost, fmt.Sprintf("http://%s%s?target=%d&window=%d", r.addr, sinkResetPath, target, window), nil)
}

// call makes one request of the receiver and decodes its JSON answer into
// out, if not nil.
func (r *processReceiver) call(ctx context.Context, method, u string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("ask the receiver: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("ask the receiver: %s %s: HTTP %d", method, u, resp.StatusCode)
	}
	if out == nil {
		io.Copy(io.Discard, resp.Body)
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Close ends the receiver process: its standard input closes, and should
// it not stop by itself, it is killed.
func (r *processReceiver) Close() {
	r.stdin.Close()
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
}
