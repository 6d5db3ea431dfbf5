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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// The receiver of bench deliver runs in a process of its own by default, as
// a real receiver does: what courier costs is then measured apart from what
// receiving costs. The parent starts this executable as `bench sink`, reads
// the address it listens on from its first line of output, and asks it
// for its counts over HTTP.

// sinkStats is what the receiver process tells of itself.
type sinkStats struct {
	Count int64   `json:"count"`
	P50ms float64 `json:"p50_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
	CPUus int64   `json:"cpu_us"` // user and system CPU time of the process so far
}

const sinkStatsPath = "/_bench/stats"

func newBenchSinkCmd(g *globals) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "sink",
		Short: "Run the receiver of bench deliver (it starts one by itself)",
		Long: `Run the receiver that bench deliver sends to: it answers 204 to every POST,
notes the time from the X-Bench-Sent header to arrival, and tells its counts,
latencies and CPU time at ` + sinkStatsPath + `. It prints the address it listens
on, and stops when its standard input closes. bench deliver starts one by
itself; run it by hand only to watch it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			rc := &benchSink{}
			mux := http.NewServeMux()
			mux.HandleFunc("GET "+sinkStatsPath, func(w http.ResponseWriter, r *http.Request) {
				st := sinkStats{Count: rc.count.Load(), CPUus: processCPU().Microseconds()}
				st.P50ms, st.P99ms, st.MaxMs = rc.latencies()
				json.NewEncoder(w).Encode(st)
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

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchReceiver is where bench deliver's endpoints point: in this process, or
// in one of its own.
type benchReceiver interface {
	Addr() string
	Stats(ctx context.Context) (sinkStats, error)
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
func (r *localReceiver) Stats(context.Context) (sinkStats, error) {
	st := sinkStats{Count: r.rc.count.Load()}
	st.P50ms, st.P99ms, st.MaxMs = r.rc.latencies()
	return st, nil
}

// processReceiver is a receiver in a process of its own.
type processReceiver struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	addr   string
	client *http.Client
}

func startProcessReceiver(ctx context.Context) (*processReceiver, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this executable to start the receiver: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, "bench", "sink")
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
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("the receiver did not say where it listens: %w", err)
	}
	return &processReceiver{cmd: cmd, stdin: stdin, addr: strings.TrimSpace(line),
		client: &http.Client{Timeout: 10 * time.Second}}, nil
}

func (r *processReceiver) Addr() string { return r.addr }

func (r *processReceiver) Stats(ctx context.Context) (sinkStats, error) {
	var st sinkStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.addr+sinkStatsPath, nil)
	if err != nil {
		return st, err
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return st, fmt.Errorf("ask the receiver for its counts: %w", err)
	}
	defer resp.Body.Close()
	return st, json.NewDecoder(resp.Body).Decode(&st)
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
