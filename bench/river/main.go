// Command river measures River on PostgreSQL on courier's workload, so that
// courier's figures can be set beside it in the same run on the same
// machine: jobs of one HTTP POST of a JSON payload each to a receiver in a
// process of its own (courier bench sink), done on 2xx.
//
// It enqueues the jobs in batches (River's InsertManyFast, its fastest
// insert) into a fresh schema, then starts the workers and measures the
// drain until the receiver has counted every job, and the CPU time spent
// per job by this process and by PostgreSQL (when the server runs on this
// machine and nothing else uses it). The schema is dropped at the end.
//
//	go run . --sink http://127.0.0.1:18426 --messages 100000
//
// It is a module of its own, so that courier does not depend on River.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/courier-gw/courier/internal/cpustat"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// postArgs is one job: a payload to POST to the receiver.
type postArgs struct {
	Payload json.RawMessage `json:"payload"`
}

func (postArgs) Kind() string { return "post" }

// postWorker posts a job's payload to the receiver; anything but 2xx is
// an error, which River retries.
type postWorker struct {
	river.WorkerDefaults[postArgs]
	client *http.Client
	url    string
}

func (w *postWorker) Work(ctx context.Context, job *river.Job[postArgs]) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(job.Args.Payload))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Bench-Sent", strconv.FormatInt(job.CreatedAt.UnixNano(), 10))
	resp, err := w.client.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("receiver answered %s", resp.Status)
	}
	return nil
}

// sinkStats is what courier bench sink tells of itself.
type sinkStats struct {
	Count     int64 `json:"count"`
	ReachedAt int64 `json:"reached_unix_nano"`
}

func main() {
	dsn := flag.String("dsn", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL database for a fresh schema")
	sink := flag.String("sink", "http://127.0.0.1:18426", "base URL of the receiver (courier bench sink)")
	messages := flag.Int("messages", 100000, "jobs to enqueue and drain")
	size := flag.Int("size", 1024, "payload bytes")
	workers := flag.Int("workers", 100, "River's MaxWorkers")
	batch := flag.Int("batch", 1000, "jobs per InsertManyFast")
	// River's defaults (100 ms, 1 s) suit a queue of slow jobs; with jobs
	// of a millisecond, 100 workers then wait for the next fetch most of
	// the time. The defaults here give it its best drain on this workload.
	cooldown := flag.Duration("fetch-cooldown", 5*time.Millisecond, "River's FetchCooldown")
	poll := flag.Duration("fetch-poll", 50*time.Millisecond, "River's FetchPollInterval")
	flag.Parse()
	cfg := &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: *workers}},
		FetchCooldown:     *cooldown,
		FetchPollInterval: *poll,
	}
	if err := run(cfg, *dsn, strings.TrimRight(*sink, "/"), *messages, *size, *batch); err != nil {
		fmt.Fprintln(os.Stderr, "river bench:", err)
		os.Exit(1)
	}
}

func run(cfg *river.Config, dsn, sink string, messages, size, batch int) error {
	workers := cfg.Queues[river.QueueDefault].MaxWorkers
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	schema := fmt.Sprintf("river_bench_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return err
	}
	defer pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	driver := riverpgxv5.New(pool)
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: quiet})
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	ws := river.NewWorkers()
	transport := &http.Transport{MaxIdleConns: workers, MaxIdleConnsPerHost: workers}
	river.AddWorker(ws, &postWorker{client: &http.Client{Transport: transport, Timeout: 30 * time.Second}, url: sink + "/river"})
	cfg.Schema, cfg.Logger, cfg.Workers = schema, quiet, ws
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return err
	}

	payload := json.RawMessage(`{"data":"` + strings.Repeat("x", max(size-11, 0)) + `"}`)
	start := time.Now()
	for first := 0; first < messages; first += batch {
		params := make([]river.InsertManyParams, min(batch, messages-first))
		for i := range params {
			params[i] = river.InsertManyParams{Args: postArgs{Payload: payload}}
		}
		if _, err := client.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
	ingest := time.Since(start)

	if err := post(sink+"/_bench/reset?target="+strconv.Itoa(messages), nil); err != nil {
		return err
	}
	cpu := cpustat.Process()
	dbCPU, dbKnown := databaseCPU(dsn)
	start = time.Now()
	if err := client.Start(ctx); err != nil {
		return err
	}
	var st sinkStats
	for {
		if err := get(sink+"/_bench/stats", &st); err != nil {
			return err
		}
		if st.Count >= int64(messages) {
			break
		}
		if time.Since(start) > 10*time.Minute {
			return fmt.Errorf("only %d of %d jobs arrived in 10 minutes", st.Count, messages)
		}
		time.Sleep(20 * time.Millisecond)
	}
	elapsed := time.Since(start)
	if st.ReachedAt > start.UnixNano() {
		elapsed = time.Duration(st.ReachedAt - start.UnixNano())
	}
	riverCPU := cpustat.Process() - cpu
	dbAfter, dbStill := databaseCPU(dsn)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	client.Stop(stopCtx)

	fmt.Printf("river on PostgreSQL: %d jobs of %d bytes, %d workers, fetch cooldown %v, poll %v\n",
		messages, size, workers, cfg.FetchCooldown, cfg.FetchPollInterval)
	fmt.Printf("  ingest %.0f jobs/s (InsertManyFast, batches of %d), delivery %.0f jobs/s (%d delivered in %.2fs)\n",
		float64(messages)/ingest.Seconds(), batch, float64(messages)/elapsed.Seconds(), messages, elapsed.Seconds())
	line := fmt.Sprintf("  CPU per delivered job: river %.1f µs", us(riverCPU, messages))
	if dbKnown && dbStill {
		line += fmt.Sprintf(", PostgreSQL %.1f µs", us(dbAfter-dbCPU, messages))
	}
	fmt.Println(line)
	return nil
}

func databaseCPU(dsn string) (time.Duration, bool) {
	if !cpustat.LocalDatabase(dsn) {
		return 0, false
	}
	return cpustat.Database()
}

func us(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }

func post(url string, body io.Reader) error {
	resp, err := http.Post(url, "application/json", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", url, resp.Status)
	}
	return nil
}

func get(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
