package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/cpustat"
	"github.com/courier-gw/courier/internal/otlpsink"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/sqlite"
	"github.com/courier-gw/courier/topology"
	"github.com/courier-gw/courier/tracing"
	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

// benchDeliver is one delivery benchmark's settings.
type benchDeliver struct {
	messages    int
	backlog     int
	rate        int
	duration    time.Duration
	size        int
	workers     int
	concurrency int
	endpoints   int    // messages are spread over this many endpoints, one route each
	dead        bool   // the first endpoint refuses connections, the second never answers
	postgres    string // deliver from a fresh schema in this PostgreSQL database instead of SQLite
	nodes       int    // engines competing for the work (PostgreSQL)
	keys        int    // ordering keys the messages are spread over; 0: unordered
	cpuProfile  string // write a CPU profile of the delivery to this file
	inProcess   bool   // run the receiver in this process
	tracing     bool   // trace every request and attempt, exporting to an OTLP/HTTP receiver on loopback
	held        int    // endpoints switched off before the drain
	subs        int    // publish the messages to this many subscriptions instead of sending them to routes
	heldShare   float64
	heldBacklog int // with held: messages queued for the held endpoints before the others, the backlog they hold
	// topologyIn is where the server keeps the topology: "file", built in
	// this process, or "store", created through the API before the run.
	topologyIn    string
	topologyBatch int  // with the topology in the store: objects per PUT /v1/topology (0: all)
	oneByOne      bool // with the topology in the store: one PUT per object instead
	// topologyProfile is where to write a CPU profile of the topology's
	// creation.
	topologyProfile string
	withFloor       bool       // after the drain, measure sending and the store's part each alone
	keyHolds        *durations // with ordering keys on PostgreSQL: how long writes of outcomes held their keys' locks
}

// deliverResult is what a delivery benchmark measured.
type deliverResult struct {
	Mode          string  `json:"mode"`
	Messages      int     `json:"messages"`
	Backlog       int     `json:"backlog"`
	Delivered     int64   `json:"delivered"` // arrivals counted by the receiver: to the endpoints that are neither dead nor off
	Seconds       float64 `json:"delivery_seconds"`
	IngestPerSec  float64 `json:"ingest_per_sec"`
	DeliverPerSec float64 `json:"deliveries_per_sec"`
	OfferedRate   int     `json:"offered_rate,omitempty"`
	P50ms         float64 `json:"ingest_to_delivered_p50_ms"`
	P99ms         float64 `json:"ingest_to_delivered_p99_ms"`
	MaxMs         float64 `json:"ingest_to_delivered_max_ms"`
	// From a receiver's answer to its outcome written (what a crash in
	// between would send again), over every attempt of the run.
	OutcomeP50ms float64 `json:"answer_to_outcome_written_p50_ms"`
	OutcomeP99ms float64 `json:"answer_to_outcome_written_p99_ms"`
	OutcomeMaxMs float64 `json:"answer_to_outcome_written_max_ms"`
	// On PostgreSQL with ordering keys: how long each write of outcomes
	// held its keys' locks, from the locks taken to the commit.
	KeyLocksP50ms  float64 `json:"key_locks_held_p50_ms,omitempty"`
	KeyLocksP99ms  float64 `json:"key_locks_held_p99_ms,omitempty"`
	KeyLocksMaxMs  float64 `json:"key_locks_held_max_ms,omitempty"`
	KeyLockBatches int     `json:"key_lock_batches,omitempty"`
	// CPU per delivered message during the drain, in µs: courier's own
	// (this process's, the receiver apart when it runs in its own), and
	// the receiver's.
	CourierCPUus  float64 `json:"courier_cpu_us_per_message,omitempty"`
	ReceiverCPUus float64 `json:"receiver_cpu_us_per_message,omitempty"`
	// DatabaseCPUus is what PostgreSQL's processes spent per delivered
	// message, when the database runs on this machine.
	DatabaseCPUus float64 `json:"database_cpu_us_per_message,omitempty"`
	HeldQueued    int     `json:"held_queued"` // with --held: still queued for the endpoints that are off at the end
	Topology      string  `json:"topology"`    // where the topology lived: file or store
	// Creation is what creating the topology through the API took, with
	// the topology in the store.
	Creation *topologyCreation `json:"topology_creation,omitempty"`
	// Spans is how many spans the loopback OTLP receiver got, with
	// --tracing.
	Spans int `json:"spans,omitempty"`
	// Floor is what the parts of a delivery cost each alone, with --floor.
	Floor *floorResult `json:"floor,omitempty"`
}

func newBenchDeliverCmd(g *globals) *cobra.Command {
	b := benchDeliver{}
	cmd := &cobra.Command{
		Use:   "deliver",
		Short: "Measure delivery: ingest, deliver to a local receiver answering 204, report rates, latency and CPU",
		Long: `Measure delivery end to end: the API, the engine and a temporary SQLite store
(or a fresh PostgreSQL schema) in this process, and a receiver on loopback that
answers 204 in a process of its own (this executable as "bench sink"), as a
user deploys them; --in-process-receiver runs it in this process instead.

Without --rate (drain): --messages are ingested in batches through the API,
then the engine delivers them; the ingest and delivery rates are printed, and
the CPU time (user and system) this process and the receiver's spent per
delivered message during the delivery; with --postgres on this machine, also
PostgreSQL's (from /proc: the CPU of the backends serving the run's own
connections and of the server's own processes, such as its WAL writer). With --backlog, that many older messages are queued
first on the same routes, so the run shows whether claiming costs more with
a deep queue. With --held, that many endpoints are
switched off before the delivery and --held-share of the messages go to them:
the rates count the others, and the messages left queued for those that are
off are counted at the end.

With --rate: messages are offered at that rate for --duration while the engine
delivers, and the time from ingest to arrival at the receiver is reported.

With --topology store, the server keeps the topology in the store, as a
configuration file without endpoints and routes has it, and the benchmark
creates the endpoints, routes and subscriptions through the API before it
sends anything: by PUT /v1/topology, --topology-batch objects a request, or
with --one-by-one one PUT per object. How long that took is printed first.

With --floor, after the drain the two parts of a delivery are measured each
alone, in the same run: as many sends of the same payload through the same
HTTP transport to the same receiver, without the engine or a store; and as
many messages queued in the same store, claimed and written delivered 100 at
a time, without sending. Their sum is the least a delivered message costs on
this machine with this store; what courier spent in the drain above it is
the engine's own (its claims and outcomes in smaller batches, scheduling,
bookkeeping).`,
		Example: `  courier bench deliver --messages 200000
  courier bench deliver --messages 200000 --backlog 1000000
  courier bench deliver --messages 100000 --endpoints 10000 --held 10
  courier bench deliver --rate 10000 --duration 10s
  courier bench deliver --messages 100000 --ordering-keys 200
  courier bench deliver --messages 50000 --endpoints 10000 --topology store --one-by-one
  courier bench deliver --messages 100000 --floor`,
		Args: cobra.NoArgs,
		RunE: benchRun(g, func() error { return b.validate() }, func(ctx context.Context) (*deliverResult, error) {
			return b.run(ctx, g)
		}, func(res *deliverResult) {
			if c := res.Creation; c != nil {
				fmt.Fprintf(g.stdout, "topology in the store: %d objects created in %.2fs, %.0f objects/s (%s, %d requests)\n",
					c.Objects, c.Seconds, c.PerSec, c.How, c.Puts)
			}
			fmt.Fprintf(g.stdout, "%s: %d messages of %d bytes", res.Mode, res.Messages, b.size)
			if b.endpoints > 1 {
				fmt.Fprintf(g.stdout, " over %d endpoints", b.endpoints)
			}
			if b.dead {
				fmt.Fprintf(g.stdout, " (2 dead: rates count the healthy ones only)")
			}
			if b.held > 0 {
				if b.heldBacklog > 0 {
					fmt.Fprintf(g.stdout, " (%d off, with a backlog of %d queued for them first and %.0f%% of these: rates count the others only)",
						b.held, b.heldBacklog, 100*b.heldShare)
				} else {
					fmt.Fprintf(g.stdout, " (%d off, holding %.0f%%: rates count the others only)", b.held, 100*b.heldShare)
				}
			}
			if b.subs > 0 {
				fmt.Fprintf(g.stdout, " published to %d subscriptions (%d deliveries: delivery rates count deliveries)", b.subs, res.Messages*b.subs)
			}
			if res.Backlog > 0 {
				fmt.Fprintf(g.stdout, " behind a backlog of %d", res.Backlog)
			}
			if b.keys > 0 {
				fmt.Fprintf(g.stdout, " in order over %d ordering keys", b.keys)
			}
			fmt.Fprintln(g.stdout)
			if res.OfferedRate > 0 {
				fmt.Fprintf(g.stdout, "  offered %d msgs/s, ingested %.0f/s, delivered %.0f/s\n", res.OfferedRate, res.IngestPerSec, res.DeliverPerSec)
			} else {
				fmt.Fprintf(g.stdout, "  ingest %.0f msgs/s (batches of 1000), delivery %.0f msgs/s (%d delivered in %.2fs)\n",
					res.IngestPerSec, res.DeliverPerSec, res.Delivered, res.Seconds)
			}
			fmt.Fprintf(g.stdout, "  ingest to delivered: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", res.P50ms, res.P99ms, res.MaxMs)
			fmt.Fprintf(g.stdout, "  answer to outcome written: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", res.OutcomeP50ms, res.OutcomeP99ms, res.OutcomeMaxMs)
			if res.KeyLockBatches > 0 {
				fmt.Fprintf(g.stdout, "  ordering keys' locks held by a write of outcomes: p50 %.1f ms, p99 %.1f ms, max %.1f ms (%d writes)\n",
					res.KeyLocksP50ms, res.KeyLocksP99ms, res.KeyLocksMaxMs, res.KeyLockBatches)
			}
			if res.CourierCPUus > 0 {
				fmt.Fprintf(g.stdout, "  CPU per delivered message: courier %.1f µs", res.CourierCPUus)
				if !b.inProcess {
					fmt.Fprintf(g.stdout, ", receiver (its own process) %.1f µs", res.ReceiverCPUus)
				} else {
					fmt.Fprintf(g.stdout, " (with the receiver, in this process)")
				}
				if res.DatabaseCPUus > 0 {
					fmt.Fprintf(g.stdout, ", PostgreSQL %.1f µs", res.DatabaseCPUus)
				}
				fmt.Fprintln(g.stdout)
			}
			if b.tracing {
				fmt.Fprintf(g.stdout, "  tracing on: %d spans exported to the OTLP/HTTP receiver on loopback\n", res.Spans)
			}
			if b.held > 0 {
				fmt.Fprintf(g.stdout, "  still queued for the endpoints that are off: %d\n", res.HeldQueued)
			}
			if f := res.Floor; f != nil {
				printFloor(g, res, f)
			}
		}),
	}
	f := benchFlags{cmd.Flags()}
	f.IntVar(&b.messages, "messages", 100000, "messages to deliver (drain)")
	f.IntVar(&b.backlog, "backlog", 0, "older messages queued ahead of them (drain)")
	f.IntVar(&b.rate, "rate", 0, "offer messages at this rate per second instead of draining")
	f.DurationVar(&b.duration, "duration", 10*time.Second, "how long to offer messages (with --rate)")
	f.size(&b.size, 1024)
	f.workers(&b.workers)
	f.IntVar(&b.concurrency, "concurrency", 0, "max_concurrency of each endpoint (default: 256 for one endpoint, else 16)")
	f.IntVar(&b.endpoints, "endpoints", 1, "spread the messages over this many endpoints (one route each)")
	f.BoolVar(&b.dead, "dead", false, "make two of the endpoints dead: one refuses connections, one never answers (5 s timeout); only deliveries to the others count")
	f.postgres(&b.postgres)
	f.IntVar(&b.nodes, "nodes", 1, "with --postgres: engines in this process competing for the messages as nodes do, each with its own connections")
	f.IntVar(&b.keys, "ordering-keys", 0, "give the messages ordering keys, round robin over this many (0: unordered)")
	f.StringVar(&b.cpuProfile, "cpuprofile", "", "write a CPU profile to this file: of the delivery when draining, of the whole run with --rate")
	f.BoolVar(&b.tracing, "tracing", false, "trace every ingest, attempt, claim and commit (sample 1.0), exporting to an OTLP/HTTP receiver on loopback in this process")
	f.BoolVar(&b.inProcess, "in-process-receiver", false, "run the receiver in this process instead of one of its own")
	f.IntVar(&b.subs, "subscriptions", 0, "publish each message (without a route) to this many subscriptions, round robin over the endpoints: rates count deliveries")
	f.IntVar(&b.held, "held", 0, "switch this many of the endpoints off before the drain; only deliveries to the others count")
	f.Float64Var(&b.heldShare, "held-share", 0.9, "with --held: the share of the messages that go to the endpoints that are off")
	f.IntVar(&b.heldBacklog, "held-backlog", 0, "with --held: messages queued for the endpoints that are off before all others, round robin over them: the backlog they built up while off")
	f.StringVar(&b.topologyIn, "topology", topologyInFile, "where the server keeps the topology: file (built in this process) or store (created through the API first)")
	f.IntVar(&b.topologyBatch, "topology-batch", 1000, "with --topology store: objects per PUT /v1/topology (0: all in one)")
	f.BoolVar(&b.oneByOne, "one-by-one", false, "with --topology store: create each object with a PUT of its own")
	f.StringVar(&b.topologyProfile, "topology-cpuprofile", "", "with --topology store: write a CPU profile of the topology's creation to this file")
	f.BoolVar(&b.withFloor, "floor", false, "after the drain, measure sending (without the engine and the store) and the store's claims and outcomes (without sending) each alone, and print what courier spent above their sum")
	return cmd
}

func (b benchDeliver) run(ctx context.Context, g *globals) (*deliverResult, error) {
	var spans func() int // with --tracing: the spans received once all is flushed
	b.keyHolds = &durations{}
	stores, limits, cleanup, err := b.openStores(ctx)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	store := stores[0]
	if b.tracing {
		collector, err := otlpsink.Start(true)
		if err != nil {
			return nil, err
		}
		defer collector.Close()
		stop, err := tracing.Setup(ctx, tracing.Config{Endpoint: collector.URL(), Sample: 1})
		if err != nil {
			return nil, err
		}
		defer stop(context.Background())
		spans = func() int {
			sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			stop(sctx) // flushes what is buffered
			n, _ := collector.Count()
			return n
		}
	}

	var rcv benchReceiver
	if b.inProcess {
		rcv, err = startLocalReceiver()
	} else {
		rcv, err = startProcessReceiver(ctx)
	}
	if err != nil {
		return nil, err
	}
	defer rcv.Close()
	if b.concurrency <= 0 {
		// One endpoint takes every worker; many get the design's default,
		// which also keeps the idle connections of all of them in bounds.
		b.concurrency = 16
		if b.endpoints == 1 {
			b.concurrency = 256
		}
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	bt := benchTopology{b: b, rcvAddr: rcv.Addr(), closedAddr: closed.Addr().String()}
	closed.Close() // nothing listens here: connections are refused
	// With the topology in the store, the engines and the API start with
	// the store's (empty) one and take in each change as a server does.
	top := bt.file()
	var cat *topology.Keeper
	var onTopology atomic.Pointer[func(*courier.Topology)]
	if b.topologyIn == topologyInStore {
		cat, err = topology.Open(ctx, topology.Options{Store: store, OnChange: func(t *courier.Topology) {
			if f := onTopology.Load(); f != nil {
				(*f)(t)
			}
		}})
		if err != nil {
			return nil, fmt.Errorf("open the topology in the store: %w", err)
		}
		top = cat.Topology()
	}
	tr := loopbackTransport()
	defer tr.Close()
	var engines []*engine.Engine
	waits := &outcomeWaits{}
	for i, st := range stores {
		engines = append(engines, engine.New(engine.Options{Store: st, Topology: top, Workers: b.workers,
			Senders: map[courier.Transport]courier.Sender{courier.TransportHTTP: tr},
			Owner:   fmt.Sprintf("bench-node-%d", i), Limits: limits[i], Observer: waits}))
	}

	eng := &nodes{engines}
	apiOpts := api.Options{Store: store, Topology: top, DueFunc: eng.Due, ScheduledFunc: eng.Scheduled}
	if cat != nil {
		apiOpts.Objects = cat
	}
	handler := api.NewServer(apiOpts)
	setTopology := func(t *courier.Topology) {
		handler.SetTopology(t)
		for _, e := range engines {
			e.SetTopology(t)
		}
	}
	onTopology.Store(&setTopology)
	srv, base, err := serveLoopback(handler)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	payload := `"` + string(bytes.Repeat([]byte("x"), max(b.size-2, 0))) + `"`

	res := &deliverResult{Messages: b.messages, Backlog: b.backlog, Topology: b.topologyIn}
	defer waits.into(res, b.keyHolds)
	if cat != nil {
		fmt.Fprintf(g.stderr, "creating the topology through the API...\n")
		stopProfile, err := startCPUProfile(b.topologyProfile)
		if err != nil {
			return nil, err
		}
		res.Creation, err = createTopology(ctx, g, client, base, bt.objects(), b.topologyBatch, b.oneByOne)
		stopProfile()
		if err != nil {
			return nil, err
		}
		if t := cat.Topology(); len(t.Endpoints) != b.endpoints || len(t.Routes) != b.endpoints || len(t.Subscriptions) != b.subs {
			return nil, fmt.Errorf("the topology created has %d endpoints, %d routes and %d subscriptions, want %d, %d and %d",
				len(t.Endpoints), len(t.Routes), len(t.Subscriptions), b.endpoints, b.endpoints, b.subs)
		}
	}
	if b.heldBacklog > 0 {
		fmt.Fprintf(g.stderr, "queueing a backlog of %d messages for the endpoints that are off...\n", b.heldBacklog)
		if err := fillBacklog(ctx, store, "held-backlog", b.heldBacklog, func(i int) int { return i % b.held }, []byte(payload)); err != nil {
			return nil, err
		}
	}
	if b.backlog > 0 {
		fmt.Fprintf(g.stderr, "queueing a backlog of %d messages...\n", b.backlog)
		if err := fillBacklog(ctx, store, "backlog", b.backlog, b.routeOf, []byte(payload)); err != nil {
			return nil, err
		}
	}
	for i := 0; i < b.held; i++ {
		// Off as an operator switches it off: its messages stay queued.
		if _, err := store.UpdateHealth(ctx, fmt.Sprintf("receiver-%02d", i), func(h courier.EndpointHealth) courier.EndpointHealth {
			return h.SwitchedOff(time.Now())
		}, nil); err != nil {
			return nil, err
		}
	}

	if b.rate > 0 {
		return b.offered(ctx, g, eng, client, base, payload, rcv, res)
	}
	// Drain: ingest everything first, then let the engine go.
	res.Mode = "drain"
	target := int64(b.healthy(b.messages) + b.healthy(b.backlog))
	start := time.Now()
	var wg sync.WaitGroup
	var ingestErr atomic.Value
	batches := make(chan int)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first := range batches {
				if err := postBatch(ctx, client, base, first, min(1000, b.messages-first), b.route(), b.keys, payload); err != nil {
					ingestErr.Store(err)
				}
			}
		}()
	}
	for first := 0; first < b.messages; first += 1000 {
		batches <- first
	}
	close(batches)
	wg.Wait()
	if err, _ := ingestErr.Load().(error); err != nil {
		return nil, err
	}
	res.IngestPerSec = float64(b.messages) / time.Since(start).Seconds()
	fmt.Fprintf(g.stderr, "ingested %d messages; delivering...\n", b.messages)

	stopProfile, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		return nil, err
	}
	if err := rcv.Reset(ctx, target, 0); err != nil {
		stopProfile()
		return nil, err
	}
	before, err := rcv.Stats(ctx, false)
	if err != nil {
		stopProfile()
		return nil, err
	}
	cpu := cpustat.Process()
	dbCPU, dbKnown := b.databaseCPU(ctx)
	start = time.Now()
	if err := eng.Start(ctx); err != nil {
		stopProfile()
		return nil, err
	}
	stopProgress := progress(g, rcv)
	_, err = waitDelivered(ctx, rcv, target, 0)
	courierCPU := cpustat.Process() - cpu
	dbAfter, dbStill := b.databaseCPU(ctx)
	elapsed := time.Since(start)
	stopProgress()
	stopProfile()
	if err != nil {
		eng.Stop(context.Background())
		return nil, err
	}
	after, err := rcv.Stats(ctx, true)
	if err != nil {
		eng.Stop(context.Background())
		return nil, err
	}
	if after.ReachedAt > start.UnixNano() {
		elapsed = time.Duration(after.ReachedAt - start.UnixNano()) // exact, not rounded up to the next poll
	}
	res.Delivered, res.Seconds = after.Count, elapsed.Seconds()
	if target > 0 {
		res.DeliverPerSec = float64(target) / elapsed.Seconds()
		res.CourierCPUus = float64(courierCPU.Nanoseconds()) / 1e3 / float64(target)
		res.ReceiverCPUus = float64(after.CPUus-before.CPUus) / float64(target)
		if dbKnown && dbStill {
			res.DatabaseCPUus = float64(dbAfter.Since(dbCPU).Nanoseconds()) / 1e3 / float64(target)
		}
	}
	if err := eng.Stop(context.Background()); err != nil {
		return nil, fmt.Errorf("stop the engine: %w", err)
	}
	res.P50ms, res.P99ms, res.MaxMs = after.P50ms, after.P99ms, after.MaxMs
	if b.held > 0 {
		var routes []string
		for i := 0; i < b.held; i++ {
			routes = append(routes, routeName(i))
		}
		if res.HeldQueued, err = store.CountQueued(ctx, routes); err != nil {
			return nil, err
		}
	}
	if spans != nil {
		res.Spans = spans()
	}
	if b.withFloor {
		fmt.Fprintf(g.stderr, "measuring sending and the store's part each alone...\n")
		if res.Floor, err = b.floor(ctx, store, tr, top.Endpoints[endpointName(0)], routeName(0), rcv, []byte(payload)); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// benchApplication is the application_name of the run's connections to
// PostgreSQL, by which its backends are told from those of anyone else.
var benchApplication = fmt.Sprintf("courier-bench-%d", os.Getpid())

// databaseCPU reads the backends that serve the run's connections, when
// its database is on this machine; the difference of two readings is the
// database's CPU in between.
func (b benchDeliver) databaseCPU(ctx context.Context) (cpustat.Backends, bool) {
	if b.postgres == "" || !cpustat.LocalDatabase(b.postgres) {
		return nil, false
	}
	backends, err := cpustat.ReadBackends(ctx, b.postgres, benchApplication)
	return backends, err == nil && len(backends) > 0
}

// validate checks the settings before anything is opened or started.
func (b benchDeliver) validate() error {
	if b.messages < 0 || b.backlog < 0 || b.rate < 0 || b.size < 0 || b.workers < 1 {
		return fmt.Errorf("--messages, --backlog, --rate and --size cannot be negative, and --workers must be at least 1")
	}
	if b.endpoints < 1 || b.dead && b.endpoints < 3 {
		return fmt.Errorf("--endpoints must be at least 1, and at least 3 with --dead")
	}
	if b.held < 0 || b.held > 0 && (b.held >= b.endpoints || b.dead || b.heldShare < 0 || b.heldShare >= 1) {
		return fmt.Errorf("--held must leave at least one endpoint on, goes without --dead, and --held-share is from 0 to below 1")
	}
	if b.heldBacklog < 0 || b.heldBacklog > 0 && b.held == 0 {
		return fmt.Errorf("--held-backlog cannot be negative, and needs --held")
	}
	if b.subs < 0 || b.subs > 0 && (b.held > 0 || b.dead || b.backlog > 0) {
		return fmt.Errorf("--subscriptions cannot be negative, and goes without --held, --dead and --backlog")
	}
	if b.topologyIn != topologyInFile && b.topologyIn != topologyInStore {
		return fmt.Errorf("--topology is %s or %s, not %q", topologyInFile, topologyInStore, b.topologyIn)
	}
	if b.topologyBatch < 0 || (b.oneByOne || b.topologyProfile != "") && b.topologyIn != topologyInStore {
		return fmt.Errorf("--topology-batch cannot be negative, and --one-by-one and --topology-cpuprofile go with --topology store")
	}
	if b.withFloor && (b.rate > 0 || b.endpoints != 1 || b.dead || b.held > 0 || b.subs > 0 || b.keys > 0 || b.backlog > 0 ||
		b.nodes > 1 || b.topologyIn != topologyInFile || b.messages == 0) {
		return fmt.Errorf("--floor measures the plain drain of one endpoint: it goes without --rate, --endpoints, --dead, --held, " +
			"--subscriptions, --ordering-keys, --backlog, --nodes and --topology store, and needs --messages")
	}
	return nil
}

// waitDelivered waits until the receiver got n messages, asking it every
// 20 ms, and returns its count then; with a positive limit, it gives up
// once that long passed without an arrival.
func waitDelivered(ctx context.Context, rcv benchReceiver, n int64, limit time.Duration) (sinkStats, error) {
	last, lastAt := int64(-1), time.Now()
	for {
		st, err := rcv.Stats(ctx, false)
		if err != nil {
			return st, err
		}
		if st.Count >= n {
			return st, nil
		}
		if st.Count != last {
			last, lastAt = st.Count, time.Now()
		} else if limit > 0 && time.Since(lastAt) > limit {
			return st, fmt.Errorf("only %d of %d messages delivered, none in the last %s", st.Count, n, limit)
		}
		select {
		case <-ctx.Done():
			return st, context.Cause(ctx)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// offered sends messages at the rate, in small batches every 10 ms, while
// the engine delivers.
func (b benchDeliver) offered(ctx context.Context, g *globals, eng *nodes, client *http.Client, base, payload string, rcv benchReceiver, res *deliverResult) (*deliverResult, error) {
	res.Mode, res.OfferedRate = "offered load", b.rate
	total := int(float64(b.rate) * b.duration.Seconds())
	res.Messages = total
	target := int64(b.healthy(total) + b.healthy(b.backlog))
	if err := rcv.Reset(ctx, target, 0); err != nil {
		return nil, err
	}
	stopProfile, err := startCPUProfile(b.cpuProfile)
	if err != nil {
		return nil, err
	}
	defer stopProfile()
	if err := eng.Start(ctx); err != nil {
		return nil, err
	}
	defer eng.Stop(context.Background())
	stopProgress := progress(g, rcv)
	defer stopProgress()
	const tick = 10 * time.Millisecond
	perTick := max(b.rate/100, 1)
	start := time.Now()
	sent := 0
	var wg sync.WaitGroup
	for sent < total {
		n := min(perTick, total-sent)
		wg.Add(1)
		go func(first, n int) {
			defer wg.Done()
			postBatch(ctx, client, base, first, n, b.route(), b.keys, payload)
		}(sent, n)
		sent += n
		if wait := time.Until(start.Add(time.Duration(sent/perTick) * tick)); wait > 0 {
			time.Sleep(wait)
		}
	}
	wg.Wait()
	res.IngestPerSec = float64(total) / time.Since(start).Seconds()
	if _, err := waitDelivered(ctx, rcv, target, time.Minute); err != nil {
		return nil, err
	}
	elapsed := time.Since(start)
	after, err := rcv.Stats(ctx, true)
	if err != nil {
		return nil, err
	}
	if after.ReachedAt > start.UnixNano() {
		elapsed = time.Duration(after.ReachedAt - start.UnixNano())
	}
	res.Delivered, res.Seconds = after.Count, elapsed.Seconds()
	res.DeliverPerSec = float64(target) / elapsed.Seconds()
	res.P50ms, res.P99ms, res.MaxMs = after.P50ms, after.P99ms, after.MaxMs
	return res, nil
}

// postBatch ingests n messages through the batch API, each stamped with the
// time it was sent, and with an ordering key when keys > 0; message i goes
// to the route of endpoint routeOf(i).
// postBatch sends messages first to first+n-1 in one batch, each to the
// route routeOf names, or published when routeOf is nil.
func postBatch(ctx context.Context, client *http.Client, base string, first, n int, routeOf func(int) int, keys int, payload string) error {
	var body bytes.Buffer
	body.WriteString(`{"messages":[`)
	sent := strconv.FormatInt(time.Now().UnixNano(), 10)
	for i := 0; i < n; i++ {
		if i > 0 {
			body.WriteByte(',')
		}
		key := ""
		if keys > 0 {
			key = fmt.Sprintf(`"ordering_key":"key-%d",`, (first+i)%keys)
		}
		route := ""
		if routeOf != nil {
			route = `"route":"` + routeName(routeOf(first+i)) + `",`
		}
		fmt.Fprintf(&body, `{"id":"d-%d","type":"bench",%s%s"headers":{"X-Bench-Sent":"%s"},"payload":%s}`,
			first+i, route, key, sent, payload)
	}
	body.WriteString(`]}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages/batch", &body)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("batch ingest: HTTP %d", resp.StatusCode)
	}
	return nil
}

// fillBacklog queues n messages straight into the store, in big batches.
func fillBacklog(ctx context.Context, store courier.Store, prefix string, n int, routeOf func(int) int, payload []byte) error {
	now := time.Now()
	for first := 0; first < n; first += 10000 {
		msgs := make([]*courier.Message, min(10000, n-first))
		for i := range msgs {
			m := &courier.Message{ID: fmt.Sprintf("%s-%d", prefix, first+i), Type: "bench", Route: routeName(routeOf(first + i)),
				Payload: payload, ContentType: "application/json"}
			courier.Accept(m, courier.DefaultPolicy(), false, now)
			msgs[i] = m
		}
		if _, err := store.Ingest(ctx, msgs); err != nil {
			return err
		}
	}
	return nil
}

func progress(g *globals, rcv benchReceiver) (stop func()) {
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last, start := int64(0), time.Now()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				st, err := rcv.Stats(context.Background(), false)
				if err != nil {
					continue
				}
				n := st.Count
				fmt.Fprintf(g.stderr, "  %4.0fs  %9d delivered  %8d/s\n", time.Since(start).Seconds(), n, n-last)
				last = n
			}
		}
	}()
	return func() { close(done) }
}

// routeOf is the endpoint (and route) of message i: round robin over the
// endpoints, or with --held, the held share of the messages round robin
// over the endpoints that are off and the rest round robin over the others.
// Each side counts its own messages, so that every endpoint of it gets its
// part whatever the numbers.
func (b benchDeliver) routeOf(i int) int {
	if b.held <= 0 {
		return i % b.endpoints
	}
	heldBefore := int(float64(i) * b.heldShare) // of messages 0 to i-1, how many are held
	if int(float64(i+1)*b.heldShare) > heldBefore {
		return heldBefore % b.held
	}
	return b.held + (i-heldBefore)%(b.endpoints-b.held)
}

// route is what postBatch sends messages to: routeOf, or nil to publish
// them.
func (b benchDeliver) route() func(int) int {
	if b.subs > 0 {
		return nil
	}
	return b.routeOf
}

// healthy is how many deliveries n messages make to endpoints that can
// take them.
func (b benchDeliver) healthy(n int) int {
	if b.subs > 0 {
		return n * b.subs
	}
	out := 0
	for i := 0; i < n; i++ {
		r := b.routeOf(i)
		if !(b.dead && r < 2) && r >= b.held {
			out++
		}
	}
	return out
}

// openStores opens the store of the run, once per node: a temporary SQLite
// file, or a fresh schema in PostgreSQL (with its shared limits).
func (b benchDeliver) openStores(ctx context.Context) (stores []courier.Store, limits []courier.SharedLimits, cleanup func(), err error) {
	if b.postgres == "" {
		if b.nodes > 1 {
			return nil, nil, nil, fmt.Errorf("--nodes needs --postgres: a SQLite store serves one node")
		}
		dir, err := os.MkdirTemp("", "courier-bench-")
		if err != nil {
			return nil, nil, nil, err
		}
		s, err := sqlite.Open(filepath.Join(dir, "courier.db"), sqlite.Options{})
		if err != nil {
			os.RemoveAll(dir)
			return nil, nil, nil, err
		}
		return []courier.Store{s}, []courier.SharedLimits{nil}, func() { s.Close(); os.RemoveAll(dir) }, nil
	}
	schema := fmt.Sprintf("courier_bench_%d", time.Now().UnixNano())
	var opened []*postgres.Store
	cleanup = func() {
		for _, s := range opened {
			s.Close()
		}
		if conn, err := pgx.Connect(context.Background(), b.postgres); err == nil {
			conn.Exec(context.Background(), postgres.DropSchemaSQL(schema))
			conn.Close(context.Background())
		}
	}
	for i := 0; i < max(b.nodes, 1); i++ {
		s, err := postgres.Open(ctx, b.postgres, postgres.Options{Schema: schema, ApplicationName: benchApplication,
			KeyLocksHeld: b.keyHolds.add})
		if err != nil {
			cleanup()
			return nil, nil, nil, err
		}
		opened = append(opened, s)
		stores, limits = append(stores, s), append(limits, s)
	}
	return stores, limits, cleanup, nil
}

// nodes are the engines of a run, started, woken and stopped together.
type nodes struct{ engines []*engine.Engine }

func (n *nodes) Start(ctx context.Context) error {
	for _, e := range n.engines {
		if err := e.Start(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (n *nodes) Stop(ctx context.Context) error {
	var errs []error
	for _, e := range n.engines {
		errs = append(errs, e.Stop(ctx))
	}
	return errors.Join(errs...)
}

// Due tells every node of due routes, as the store's notifications would.
func (n *nodes) Due(routes []string) {
	for _, e := range n.engines {
		e.Due(routes)
	}
}

func (n *nodes) Scheduled(route string, at time.Time) {
	for _, e := range n.engines {
		e.Scheduled(route, at)
	}
}

// durations collects times from many goroutines.
type durations struct {
	mu sync.Mutex
	l  []time.Duration
}

func (d *durations) add(x time.Duration) {
	d.mu.Lock()
	d.l = append(d.l, x)
	d.mu.Unlock()
}

// percentiles returns the p50, p99 and max in ms, and how many there were.
func (d *durations) percentiles() (p50, p99, maxMs float64, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p50, p99, maxMs = percentiles(d.l)
	return p50, p99, maxMs, len(d.l)
}

// outcomeWaits keeps how long after the receivers' answers the outcomes
// were written.
type outcomeWaits struct {
	engine.NopObserver
	durations
}

func (o *outcomeWaits) OutcomeWritten(wait time.Duration) { o.add(wait) }

// into puts the waits' percentiles into res, and those of the keys' locks
// held.
func (o *outcomeWaits) into(res *deliverResult, holds *durations) {
	if res == nil {
		return
	}
	res.OutcomeP50ms, res.OutcomeP99ms, res.OutcomeMaxMs, _ = o.percentiles()
	res.KeyLocksP50ms, res.KeyLocksP99ms, res.KeyLocksMaxMs, res.KeyLockBatches = holds.percentiles()
}
