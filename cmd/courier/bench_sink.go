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
}

const (
	sinkStatsPath = "/_bench/stats" // GET; ?latency=1 adds the percentiles
	sinkResetPath = "/_bench/reset" // POST ?target=N: counts from zero, noting when N arrived
)

func newBenchSinkCmd(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Run the receiver of bench deliver (it starts one by itself)",
		Long: `Run the receiver that bench deliver sends to: it answers 204 to every POST
(and never answers on /hole), and notes the time from the X-Bench-Sent header
to arrival. GET ` + sinkStatsPath + ` tells its count and CPU time as JSON (with
?latency=1 also the latency percentiles); POST ` + sinkResetPath + `?target=N counts
from zero again and notes when the Nth message arrives.

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
				rc.reset(target)
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

// benchSink answers 204 and notes, per arrival, the time since the message
// was sent (from the X-Bench-Sent header). On /hole it never answers.
type benchSink struct {
	count   atomic.Int64
	target  atomic.Int64 // 0: none
	reached atomic.Int64 // Unix nanoseconds when count reached target

	mu      sync.Mutex
	latency []time.Duration
}

func (rc *benchSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/hole" {
		<-r.Context().Done() // the sender's timeout ends it
		return
	}
	io.Copy(io.Discard, r.Body)
	if sent, err := strconv.ParseInt(r.Header.Get("X-Bench-Sent"), 10, 64); err == nil {
		d := time.Since(time.Unix(0, sent))
		rc.mu.Lock()
		rc.latency = append(rc.latency, d)
		rc.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
	if n := rc.count.Add(1); n == rc.target.Load() {
		rc.reached.Store(time.Now().UnixNano())
	}
}

// reset counts from zero, forgets the latencies and notes when target
// messages will have arrived (0: never).
func (rc *benchSink) reset(target int64) {
	rc.mu.Lock()
	rc.latency = nil
	rc.mu.Unlock()
	rc.reached.Store(0)
	rc.target.Store(target)
	rc.count.Store(0)
}

// stats tells the count, and with latency the percentiles of the times
// from send to arrival.
func (rc *benchSink) stats(latency bool) sinkStats {
	st := sinkStats{Count: rc.count.Load(), ReachedAt: rc.reached.Load()}
	if latency {
		rc.mu.Lock()
		l := slices.Clone(rc.latency)
		rc.mu.Unlock()
		st.P50ms, st.P99ms, st.MaxMs = percentiles(l)
	}
	return st
}

// benchReceiver is where bench deliver's endpoints point: in this process, or
// in one of its own.
type benchReceiver interface {
	Addr() string
	Stats(ctx context.Context, latency bool) (sinkStats, error)
	Reset(ctx context.Context, target int64) error
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

func (r *localReceiver) Reset(_ context.Context, target int64) error {
	r.rc.reset(target)
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

func (r *processReceiver) Reset(ctx context.Context, target int64) error {
	return r.call(ctx, http.MethodPost, "http://"+r.addr+sinkResetPath+"?target="+strconv.FormatInt(target, 10), nil)
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
