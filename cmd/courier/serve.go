package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/config"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/blobs3"
	"github.com/courier-gw/courier/internal/certfile"
	"github.com/courier-gw/courier/lookup"
	"github.com/courier-gw/courier/metrics"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/sqlite"
	"github.com/courier-gw/courier/topology"
	"github.com/courier-gw/courier/tracing"
	"github.com/courier-gw/courier/transport"
	httptransport "github.com/courier-gw/courier/transport/http"
	"github.com/courier-gw/courier/web"
	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel"
)

func newServeCmd(g *globals) *cobra.Command {
	var configPath, cpuProfile string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the courier server",
		Long: `Run the courier server: the HTTP API and the background work.

Without --config, courier runs with its defaults: an embedded SQLite store in
./courier-data/ and the API on 127.0.0.1:8425. COURIER_* environment variables
override the top-level settings (COURIER_LISTEN, COURIER_STORE_PATH, ...).
SIGHUP reloads the API keys, the TLS files, outbound.allow_networks and the
topology (endpoints, routes, policies, subscriptions) the config file holds;
a file with errors is refused and the running configuration stays. SIGINT or
SIGTERM stops the server: the work under way gets shutdown_timeout to finish
(the engine, stopped last, keeps half of it for the attempts under way).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if configPath == "" {
				configPath = os.Getenv("COURIER_CONFIG")
			}
			cfg, err := loadConfig(configPath)
			if err != nil {
				return err
			}
			stopProfile, err := startCPUProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stopProfile()
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			err = serve(ctx, g, cfg)
			if err != nil && cfg.Log.Format == "json" {
				// As a line of the log, whose every line is JSON.
				slog.Error("courier serve stopped", "err", describe(err))
				return exitError(1)
			}
			return err
		},
	}
	cmd.Flags().StringVarP(&configPath, "config", "c", "", "configuration file (env COURIER_CONFIG)")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file (go tool pprof reads it)")
	return cmd
}

// loadConfig reads the file, or takes the defaults when there is none, and
// applies the environment's overrides.
func loadConfig(path string) (*config.Config, error) {
	if path != "" {
		return config.Load(path)
	}
	cfg := config.Default()
	if err := cfg.ApplyEnv(os.LookupEnv); err != nil {
		return nil, err
	}
	return cfg, nil
}

// newLogger returns the server's logger, and makes it the one of every
// library that logs (see routeLibraryLogs).
func newLogger(cfg *config.Config, w *os.File) *slog.Logger {
	level := map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}[cfg.Log.Level]
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if cfg.Log.Format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	// A line logged with a context that carries a span names its trace.
	logger := slog.New(tracing.NewHandler(h))
	routeLibraryLogs(logger)
	return logger
}

// durationText writes a duration as Go writes it ("20s", "1.5ms"), which
// the JSON handler would write as an integer of nanoseconds that nobody
// reads as a time; the text handler writes it so already.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// routeLibraryLogs sends what the libraries courier uses log through
// logger, so that the server's log is one format (every line JSON with
// log.format json): the standard log package's default logger (which
// slog.SetDefault takes over), slog's default, which the libraries of
// courier that have no logger of their own use, and OpenTelemetry's
// internal logger and error handler, which print an OTLP export that
// failed. pgx, amqp091-go and minio-go log nothing unless given a logger;
// the NATS client's asynchronous errors go to handlers that log through
// slog.
func routeLibraryLogs(logger *slog.Logger) {
	slog.SetDefault(logger)
	otel.SetLogger(logr.FromSlogHandler(logger.Handler()))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("tracing: OpenTelemetry error", "err", err)
	}))
}

// serve runs the server until ctx ends, then shuts down in order: stop
// taking requests and let those under way finish, stop background work,
// close the store.
func serve(ctx context.Context, g *globals, cfg *config.Config) error {
	logger := newLogger(cfg, os.Stderr)
	tuneRuntime()
	stopTracing, err := tracing.Setup(ctx, tracing.Config{Endpoint: cfg.Tracing.Endpoint, Sample: cfg.Tracing.Sample})
	if err != nil {
		return err
	}
	defer func() {
		// Spans still buffered go out, for a little while.
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(sctx); err != nil {
			logger.Warn("tracing: spans not sent at stop", "err", err)
		}
	}()
	if tracing.On() {
		logger.Info("tracing on: spans go over OTLP/HTTP", "sample", cfg.Tracing.Sample)
	}
	if err := checkListen(cfg, 0); err != nil && !cfg.KeysInStore {
		return err // else the store's keys decide, once it is open
	}
	var certs *certificate
	if cfg.TLS.Cert != "" {
		if certs, err = loadCertificate(cfg.TLS.Cert, cfg.TLS.Key); err != nil {
			return err
		}
	}
	st, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	store := st.store
	defer store.Close()
	// Every part judges time on one clock: on PostgreSQL the database's,
	// so that nodes whose own clocks disagree agree on what is due.
	clock, err := newNodeClock(ctx, st, logger)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	senders, httpSender, closeSenders := newSenders(cfg, logger)
	defer closeSenders()
	// The topology comes from the file, or from the store (docs/design.md §15):
	// then every change, whichever node made it, reaches the parts below
	// through onTopology.
	var onTopology atomic.Pointer[func(*courier.Topology)]
	cat, err := openTopology(ctx, cfg, st, clock, logger, func(t *courier.Topology) {
		if f := onTopology.Load(); f != nil {
			(*f)(t)
		}
	})
	if err != nil {
		return err
	}
	if !cfg.TopologyInStore {
		cat.SetFileSigningKeys(cfg.SigningKeys)
	}
	httpSender.SetSigningKeys(cat.SigningKeys())
	if err := checkListen(cfg, len(cat.Keys())); err != nil {
		return err
	}
	keys, err := apiKeys(cfg, cat)
	if err != nil {
		return err
	}
	// The topology in force, for the metrics; replaced on reload.
	var topology atomic.Pointer[courier.Topology]
	topology.Store(cat.Topology())
	// The tenants' caps that ingest checks, in force before the API takes
	// anything in, and given again with every topology (setTopology).
	store.SetTenantQuotas(cat.Topology().TenantQuotas())
	resolver := lookup.New(lookup.Options{Logger: logger})
	var eng *engine.Engine
	var handler *api.Server
	stats := metrics.New(metrics.Options{Source: store, TopologyFunc: topology.Load, Logger: logger, Clock: clock,
		InFlightFunc:         func(endpoint string) int { return eng.InFlight(endpoint) },
		ConcurrencyLimitFunc: func(endpoint string) int { return eng.ConcurrencyLimit(endpoint) },
		ThrottledFunc:        func(tenant string) bool { return handler.Throttled(tenant) },
		IngestInFlightFunc:   func() (int64, int64) { return handler.InFlight() }})
	eng = engine.New(engine.Options{
		Store: store, Topology: cat.Topology(), Logger: logger, Clock: clock,
		Senders:          senders,
		RescueAllOnStart: st.alone,
		Limits:           st.limits,
		Presence:         st.presence,
		Observer:         stats,
		Resolver:         resolver,
		Alerts:           alerts(cfg),
		PublicURL:        cfg.PublicURL,
	})
	receivers := newReceivers(cfg, store, topology.Load, clock, logger, eng.Due, eng.Event)
	stats.Registry().MustRegister(metrics.NewReceiverCollector(receivers.Statuses), metrics.NewLookupCollector(resolver.Stats), clock.collector())
	bulk := engine.NewBulk(store, clock, logger, eng.Wake, stats.Acted)
	eng.Redrive(bulk)
	// Reloads, by SIGHUP or through the API, are done one at a time by the
	// loop below; an API reload waits for its outcome.
	reloads := make(chan chan error)
	handler = api.NewServer(api.Options{
		Store: store, Topology: cat.Topology(), Logger: logger, Objects: cat, SigningKeys: cat, Clock: clock,
		MaxPayload: cfg.MaxPayload, MaxBatchBytes: cfg.MaxBatchBytes,
		DueFunc: eng.Due, ScheduledFunc: eng.Scheduled, Bulk: bulk, ActivityFunc: eng.Activity,
		Keys:     keys,
		Observer: stats, StatsFunc: stats.StatsFunc, Metrics: stats.Handler(),
		Receivers: receivers, Resolver: resolver,
		HealthSwitchedFunc: eng.HealthSwitched,
		ReadyFunc: func() ([]string, error) {
			if err := eng.Ready(); err != nil {
				return nil, err
			}
			return clock.ready()
		},
		IngestTokens: st.limits,
		ThrottledFunc: func(tenant string) (bool, string) {
			for _, sh := range eng.FairShares() {
				if sh.Tenant == tenant {
					return sh.Throttled, sh.Reason
				}
			}
			return false, ""
		},
		BlockedFunc: httpSender.Blocked,
		AuthFunc:    httpSender.AuthState,
		TestSendFunc: func(ctx context.Context, d courier.Delivery) courier.Result {
			if s := senders[d.Endpoint.Transport]; s != nil {
				return s.Send(ctx, d)
			}
			return courier.Result{Class: courier.ClassTransport, Error: "this version of courier has no " + string(d.Endpoint.Transport) + " transport"}
		},
		Admission: ingestAdmission(cfg.IngestInFlight),
		ReloadFunc: func(reqCtx context.Context) error {
			done := make(chan error, 1)
			select {
			case reloads <- done:
			case <-reqCtx.Done():
				return reqCtx.Err()
			case <-ctx.Done(): // shutting down: nobody takes reloads any more
				return courier.Errorf(courier.CodeUnavailable, "the server is shutting down")
			}
			select {
			case err := <-done:
				return err
			case <-reqCtx.Done():
				return reqCtx.Err()
			}
		},
	})
	// The dashboard under /ui/ (and / redirecting there) works through the
	// API handler; everything else is the API.
	routes := http.NewServeMux()
	ui := web.New(web.Options{API: handler, Auth: handler, PublicURL: cfg.PublicURL, Logger: logger, Clock: clock})
	routes.Handle("/ui/", ui)
	routes.Handle("GET /{$}", ui)
	routes.Handle("/", handler)
	srv := &http.Server{
		Handler:           routes,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	if certs != nil {
		// The certificate is looked up at each handshake, so that a renewed
		// one is taken in by a reload without a restart.
		srv.TLSConfig = &tls.Config{GetCertificate: certs.get, MinVersion: tls.VersionTLS12}
	}
	apiService := &httpService{srv: srv, ln: ln, tls: certs != nil, failed: make(chan error, 1)}
	// setTopology puts a topology in force in every part that uses one.
	setTopology := func(t *courier.Topology) {
		if cfg.KeysInStore {
			if keys, err := apiKeys(cfg, cat); err == nil {
				handler.SetKeys(keys)
			} else {
				logger.Error("the store's API keys cannot be used; keeping the ones in force", "err", err)
			}
		}
		httpSender.SetSigningKeys(cat.SigningKeys())
		store.SetTenantQuotas(t.TenantQuotas())
		handler.SetTopology(t)
		eng.SetTopology(t)
		topology.Store(t)
	}
	onTopology.Store(&setTopology)
	retention := engine.NewRetention(store, cfg.Retention, engine.RetentionOptions{Logger: logger, Clock: clock,
		Tenants: func() map[string]*courier.Tenant { return topology.Load().Tenants }})

	// The parts start in this order and stop in the reverse one, all
	// within shutdown_timeout: the engine first and last, so that what the
	// API and the receive locations take in is delivered at once and what
	// they took in before the stop is still delivered while they drain;
	// bulk operations stop before the API, so that a request waiting for
	// one is answered with the operation as it stands rather than held to
	// the deadline; the receive locations last. Each part ends at its Stop,
	// not when the signal comes: they are started with a context that the
	// signal does not end. The engine keeps engineShare of the time for
	// itself, so that a part that overruns does not leave it no time to
	// write the outcomes of the attempts under way.
	all := parts{
		{"the engine", eng, "attempts still under way were cut off; their messages are taken up again when the leases lapse", engineShare},
		{"store notifications", &loop{run: func(ctx context.Context) {
			if st.listen != nil {
				st.listen(ctx, eng.Due)
			}
		}}, "", 0},
		{"the topology's watch", cat, "", 0},
		{"the clock", &loop{run: clock.run}, "", 0},
		{"retention", retention, "the purge goes on at the next start", 0},
		{"metrics", stats, "", 0},
		{"the API", apiService, "requests still under way were cut off", 0},
		{"bulk operations", bulk, "they resume at the next start", 0},
		{"receive locations", receivers, "what they had not acknowledged is read again at the next start", 0},
	}
	stopCtx := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	}
	started, err := all.start(context.WithoutCancel(ctx))
	if err != nil {
		sctx, cancel := stopCtx()
		defer cancel()
		started.stop(sctx, logger)
		return err
	}
	scheme := "http"
	if certs != nil {
		scheme = "https"
	}
	// SIGHUP is caught before the banner says courier is up: its default
	// action would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	printBanner(g, cfg, cat, scheme+"://"+ln.Addr().String())

	// apply puts a reloaded configuration in force, or reports why not.
	apply := func(next *config.Config, err error) error {
		if err != nil {
			return err
		}
		keys, err := apiKeys(next, cat)
		if err != nil {
			logger.Error("reload failed; keeping the running configuration", "err", err)
			return courier.Errorf(courier.CodeInvalidArgument, "%v", err)
		}
		if certs != nil && next.TLS.Cert != "" {
			fresh, err := loadCertificate(next.TLS.Cert, next.TLS.Key)
			if err != nil {
				logger.Error("reload failed; keeping the running configuration", "err", err)
				return courier.Errorf(courier.CodeInvalidArgument, "%v", err)
			}
			certs.set(fresh.get(nil))
		}
		handler.SetKeys(keys)
		httpSender.SetProxy(next.Outbound.Proxy)
		if !next.TopologyInStore {
			cat.Reload(next.Specs, next.Topology)
			cat.SetFileSigningKeys(next.SigningKeys)
			setTopology(next.Topology)
		} else {
			cat.SetTenants(next.Topology.Tenants)
		}
		httpSender.SetAllowNetworks(next.Outbound.AllowNetworks)
		// Fresh connection pools read the endpoints' TLS files again, so a
		// renewed client certificate is taken in by the reload.
		httpSender.Close()
		return nil
	}
	var failed error
wait:
	for {
		select {
		case <-hup:
			apply(reload(cfg, logger))
		case done := <-reloads:
			done <- apply(reload(cfg, logger))
		case err := <-apiService.failed:
			failed = fmt.Errorf("serve: %w", err)
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	logger.Info("shutting down", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := stopCtx()
	defer cancel()
	all.stop(sctx, logger)
	if err := store.Close(); err != nil {
		return fmt.Errorf("close the store: %w", err)
	}
	if failed != nil {
		return failed
	}
	logger.Info("stopped")
	return nil
}

// openedStore is the store of this node and what the engine needs to know
// about it.
type openedStore struct {
	store  courier.Store
	alone  bool                 // only this process uses it: leases found at start are from a run that died
	limits courier.SharedLimits // politeness limits held across the nodes that share it
	// presence tells when a node that shares it is gone; nil when no
	// other node can share it.
	presence courier.Presence
	// clock is the database's clock read from a node's own; nil when the
	// node's own is the only one.
	clock  func(base courier.Clock) *postgres.Clock
	listen func(ctx context.Context, due func(routes []string))
	// listenTopology tells of topology changes other nodes make; nil when
	// no other node can make any.
	listenTopology func(ctx context.Context, changed func(version int64))
}

// openTopology reads the topology: the file's, or the store's, which is
// then watched for the changes of other nodes.
func openTopology(ctx context.Context, cfg *config.Config, st openedStore, clock courier.Clock, logger *slog.Logger, onChange func(*courier.Topology)) (*topology.Keeper, error) {
	if !cfg.TopologyInStore {
		return topology.FromFile(cfg.File, cfg.Specs, cfg.Topology), nil
	}
	keys, err := topology.NewKeyring(cfg.SecretsKey, cfg.SecretsOldKey)
	if err != nil {
		return nil, err
	}
	o := topology.Options{Store: st.store, Keyring: keys, Logger: logger, Clock: clock, OnChange: onChange, ListenFunc: st.listenTopology, PublicURL: cfg.PublicURL, Retention: cfg.Retention,
		Tenants: cfg.Topology.Tenants}
	if !cfg.KeysInStore {
		o.KeysFile = cfg.File
	}
	if cfg.Topology.Tenants != nil {
		o.TenantsFile = cfg.File
	}
	cat, err := topology.Open(ctx, o)
	if err != nil {
		return nil, fmt.Errorf("read the topology from the store: %w", err)
	}
	return cat, nil
}

// openStore opens the store the configuration names: the embedded SQLite
// file, which this process holds alone, or PostgreSQL, which any number of
// nodes share as competing consumers.
func openStore(ctx context.Context, cfg *config.Config, logger *slog.Logger) (openedStore, error) {
	blobs, err := openBlobBucket(ctx, cfg.Store.BlobS3)
	if err != nil {
		return openedStore{}, err
	}
	switch cfg.Store.Driver {
	case config.DriverPostgres:
		s, err := postgres.Open(ctx, cfg.Store.DSN, postgres.Options{Logger: logger, BlobDir: cfg.Store.BlobDir, Blobs: blobs})
		if err != nil {
			return openedStore{}, fmt.Errorf("open the postgres store at %s: %w", redactDSN(cfg.Store.DSN), err)
		}
		return openedStore{store: s, limits: s, presence: s, clock: s.Clock, listen: s.Listen, listenTopology: s.ListenTopology}, nil
	default:
		s, err := sqlite.Open(cfg.Store.Path, sqlite.Options{Logger: logger, BlobDir: cfg.Store.BlobDir, Blobs: blobs})
		if err != nil {
			return openedStore{}, fmt.Errorf("open the store: %w", err)
		}
		return openedStore{store: s, alone: true}, nil
	}
}

// openBlobBucket opens the S3 bucket of the store's blobs, when the
// configuration names one (else nil: the store's own blob area), and
// checks that it is there.
func openBlobBucket(ctx context.Context, b config.BlobS3) (courier.Blobs, error) {
	if b == (config.BlobS3{}) {
		return nil, nil
	}
	grace := b.UploadGrace
	if grace == 0 {
		grace = blobs3.NoUploadGrace
	}
	octx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	bucket, err := blobs3.Open(octx, blobs3.Options{Endpoint: b.Endpoint, Bucket: b.Bucket, Prefix: b.Prefix, Region: b.Region,
		AccessKey: b.AccessKey, SecretKey: b.SecretKey, UploadGrace: grace})
	if err != nil {
		return nil, fmt.Errorf("open the blob area (store.blob_s3): %w", err)
	}
	return bucket, nil
}

// redactDSN hides the password of a database URL, for logs and banners.
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "(unreadable dsn)"
	}
	return u.Redacted()
}

// newSenders returns a sender for every transport (and the http one, whose
// allowlist a reload changes), and a function that closes their
// connections once the engine has stopped.
func newSenders(cfg *config.Config, logger *slog.Logger) (map[courier.Transport]courier.Sender, *httptransport.Transport, func()) {
	opts := courier.SenderOptions{Logger: logger, AllowNetworks: cfg.Outbound.AllowNetworks, PublicURL: cfg.PublicURL}
	senders := map[courier.Transport]courier.Sender{}
	var all []courier.ClosingSender
	for _, k := range transport.Kinds {
		s := k.NewSender(opts)
		senders[k.Name] = s
		all = append(all, s)
	}
	httpSender := senders[courier.TransportHTTP].(*httptransport.Transport)
	httpSender.SetProxy(cfg.Outbound.Proxy)
	return senders, httpSender, func() {
		for _, s := range all {
			s.Close()
		}
	}
}

// checkListen keeps an API without keys on loopback: without keys, anyone
// who reaches the address may send, read and discard. stored is how many
// keys the store holds.
func checkListen(cfg *config.Config, stored int) error {
	if len(cfg.Keys) > 0 || stored > 0 || isLoopback(cfg.Listen) {
		return nil
	}
	return fmt.Errorf("listen %q is not a loopback address, and no API keys are configured: anyone who can reach it "+
		"could send, read and discard messages. Either listen on 127.0.0.1, ::1 or localhost, or configure API keys "+
		"(courier keys new NAME --role ROLE prints one to add under keys: in the config file)", cfg.Listen)
}

// isLoopback reports whether a listen address is reachable from this
// machine only.
func isLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// apiKeys turns the keys in force into the API's: the file's, or the
// store's when it holds them.
func apiKeys(cfg *config.Config, cat *topology.Keeper) ([]api.Key, error) {
	configured := slices.Collect(maps.Values(cfg.Keys))
	if cfg.KeysInStore {
		configured = cat.Keys()
	}
	keys := make([]api.Key, 0, len(configured))
	for _, k := range configured {
		h, err := api.ParseKeyHash(k.Hash)
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.Name, err)
		}
		keys = append(keys, api.Key{Name: k.Name, Tenant: k.Tenant, Role: k.Role, Hash: h, Routes: k.Routes, Rate: k.Rate, MaxSuspended: k.MaxSuspended})
	}
	return keys, nil
}

// reload re-reads the configuration file. It refuses a file with errors,
// and one that would leave a non-loopback listener without keys: the
// running configuration stays.
func reload(cfg *config.Config, logger *slog.Logger) (*config.Config, error) {
	if cfg.File == "" {
		logger.Info("reload: no configuration file to reload")
		return nil, courier.Errorf(courier.CodeNotConfigured, "this server runs without a configuration file; there is nothing to reload")
	}
	next, err := config.Load(cfg.File)
	if err != nil {
		logger.Error("reload failed; keeping the running configuration", "file", cfg.File, "err", err)
		return nil, courier.Errorf(courier.CodeInvalidArgument, "the configuration has errors; the running one stays:\n%v", err)
	}
	if next.KeysInStore != cfg.KeysInStore {
		logger.Error("reload refused: it moves the API keys between the file and the store, which takes a restart; keeping the running configuration")
		return nil, courier.Errorf(courier.CodeInvalidArgument, "the new configuration moves the API keys between the file and the store, which takes a restart; the running configuration stays")
	}
	if len(next.Keys) == 0 && !next.KeysInStore && !isLoopback(cfg.Listen) {
		logger.Error("reload refused: it removes every API key while courier listens beyond loopback; keeping the running configuration", "listen", cfg.Listen)
		return nil, courier.Errorf(courier.CodeInvalidArgument, "the new configuration has no API keys, and courier listens on %s beyond loopback; the running configuration stays", cfg.Listen)
	}
	if next.TopologyInStore != cfg.TopologyInStore {
		where := map[bool]string{true: "the store", false: "the file"}
		logger.Error("reload refused: it moves the topology between the file and the store, which takes a restart; keeping the running configuration",
			"from", where[cfg.TopologyInStore], "to", where[next.TopologyInStore])
		return nil, courier.Errorf(courier.CodeInvalidArgument, "the new configuration moves the topology from %s to %s, which takes a restart; the running configuration stays",
			where[cfg.TopologyInStore], where[next.TopologyInStore])
	}
	if next.Listen != cfg.Listen || next.Store != cfg.Store || (next.TLS.Cert == "") != (cfg.TLS.Cert == "") {
		logger.Warn("listen, store and switching TLS on or off take effect only after a restart")
	}
	if next.PublicURL != cfg.PublicURL {
		logger.Warn("a change of public_url (the links of notices, the URLs of claim checks) takes effect only after a restart")
	}
	if !slices.Equal(next.Alerts.Notify, cfg.Alerts.Notify) || next.Alerts.OldestDue != cfg.Alerts.OldestDue || next.Alerts.MaxPerHour != cfg.Alerts.MaxPerHour {
		logger.Warn("a change of the alerts section takes effect only after a restart")
	}
	if next.TopologyInStore {
		logger.Info("configuration reloaded; the topology stays the store's", "file", cfg.File, "keys", len(next.Keys))
	} else {
		logger.Info("configuration reloaded", "file", cfg.File, "routes", len(next.Topology.Routes),
			"endpoints", len(next.Topology.Endpoints), "policies", len(next.Topology.Policies), "keys", len(next.Keys))
	}
	return next, nil
}

// certificate holds the listener's certificate, replaced on reload.
type certificate struct {
	mu   sync.RWMutex
	cert *tls.Certificate
}

func loadCertificate(certFile, keyFile string) (*certificate, error) {
	cert, err := certfile.LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("load the TLS certificate %s with key %s: %w", certFile, keyFile, err)
	}
	return &certificate{cert: &cert}, nil
}

func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.cert, nil
}

func (c *certificate) set(cert *tls.Certificate, _ error) {
	c.mu.Lock()
	c.cert = cert
	c.mu.Unlock()
}

func printBanner(g *globals, cfg *config.Config, cat *topology.Keeper, url string) {
	w := g.stdout
	fmt.Fprintf(w, "courier %s listening on %s\n", versionString(), url)
	if cfg.Store.Driver == config.DriverPostgres {
		fmt.Fprintf(w, "store: postgres at %s\n", redactDSN(cfg.Store.DSN))
	} else {
		fmt.Fprintf(w, "store: sqlite at %s\n", cfg.Store.Path)
	}
	if b := cfg.Store.BlobS3; b != (config.BlobS3{}) {
		fmt.Fprintf(w, "blobs: S3 bucket %s at %s, prefix %q, upload grace %v\n", b.Bucket, b.Endpoint, b.Prefix, b.UploadGrace)
	}
	t := cat.Topology()
	switch {
	case cfg.TopologyInStore:
		if cfg.File != "" {
			fmt.Fprintf(w, "config: %s\n", cfg.File)
		}
		fmt.Fprintf(w, "topology: in the store, version %d (%s, %s)\n", cat.Version(), plural(len(t.Routes), "route"), plural(len(t.Endpoints), "endpoint"))
	default:
		fmt.Fprintf(w, "config: %s (%s, %s)\n", cfg.File, plural(len(t.Routes), "route"), plural(len(t.Endpoints), "endpoint"))
	}
	if len(t.Routes) == 0 && cfg.TopologyInStore {
		fmt.Fprintf(w, `no routes exist yet, so every message is refused (422) until one does.
Add an endpoint and a route through the API:

  curl -X PUT %[1]s/v1/endpoints/my-app -d '{"transport": "http", "url": "http://127.0.0.1:9000/inbox", "allow_networks": ["127.0.0.1/32"]}'
  curl -X PUT %[1]s/v1/routes/my-app -d '{"endpoints": ["my-app"]}'

(allow_networks lets the endpoint reach a receiver on this machine: courier's
SSRF guard keeps endpoints off loopback and private addresses unless allowed)
or write them in a file of their own (endpoints: and routes: sections, as in
docs/topology.md; not the server's config file, whose sections would take
the topology out of the store) and
  courier apply -f topology.yaml
`, url)
	}
}

// defaultMemoryLimit is the soft memory limit tuneRuntime sets.
const defaultMemoryLimit = 192 << 20

// tuneRuntime sets what courier's work wants of the Go runtime, unless the
// environment says otherwise:
//
//   - GOGC: the heap may grow to five times the live data between
//     collections. courier's live heap is small (the messages are on disk;
//     the heap holds request buffers), so this costs little memory and
//     collections stop eating into ingest; measured with `courier bench
//     ingest`: about 15 % more messages per second than GOGC=100.
//   - GOMEMLIMIT: 192 MiB, a soft limit: as the heap nears it, collections
//     come sooner than GOGC asks, so that its headroom never makes the
//     process large. Bulk ingest into PostgreSQL with ten thousand
//     endpoints and a million messages queued peaked at 600 MB RSS
//     without it, 230 MB with it. Live data past the limit is never
//     refused; the collector works harder instead.
//   - GOMAXPROCS: two more than the CPUs. The store's writer spends its time
//     in SQLite (a cgo call) and its syncer in fsync; each holds on to its
//     scheduler slot until the runtime takes it back, which leaves the
//     other goroutines fewer slots than cores meanwhile. Measured with
//     `courier bench deliver` on two cores: 10-15 % more deliveries per
//     second on SQLite, a few per cent on PostgreSQL.
func tuneRuntime() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(400)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	if _, set := os.LookupEnv("GOMAXPROCS"); !set {
		runtime.GOMAXPROCS(runtime.GOMAXPROCS(0) + 2)
	}
}

// ingestAdmission is the bound on ingest in flight of the configuration,
// with what it leaves out derived from the soft memory limit in force
// (tuneRuntime's, or GOMEMLIMIT's). A batch holds a few times its body in
// memory while it is decoded and stored (its items, the messages, the
// store's statements: about five times its body), and a single-writer
// store commits one request at a time, so that more in flight only waits
// in memory: a twelfth of the limit, 16 MiB by default, is about one
// large batch and the single messages beside it. Measured in
// docs/measuring.md (a flood of batches and single PUTs).
func ingestAdmission(c config.IngestInFlight) api.Admission {
	a := api.Admission{MaxBytes: c.MaxBytes, MaxMessages: int64(c.MaxMessages), SenderShare: c.SenderShare}
	if a.MaxBytes == 0 {
		limit := debug.SetMemoryLimit(-1)
		if limit == math.MaxInt64 { // GOMEMLIMIT=off: bound as by default
			limit = defaultMemoryLimit
		}
		a.MaxBytes = limit / 12
	}
	if a.MaxMessages == 0 {
		a.MaxMessages = a.MaxBytes / 1024
	}
	return a
}

// alerts is the alerts section with the server's public_url, for the links
// of its notices.
func alerts(cfg *config.Config) *courier.Alerts {
	a := cfg.Alerts
	a.PublicURL = cfg.PublicURL
	return &a
}
