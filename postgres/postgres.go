// Package postgres is courier's store for several nodes: any number of
// courier processes on one PostgreSQL database compete for the due messages
// (claims lock with FOR UPDATE SKIP LOCKED), share endpoint health and hold
// the endpoints' politeness limits together.
package postgres

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/blobdir"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

var _ courier.Store = (*Store)(nil)

// Options tune a Store. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// Schema puts courier's tables in this schema, created if missing
	// (default: the connection's search_path, usually public).
	Schema string
	// MaxConns bounds the connection pool (default 16).
	MaxConns int32
	// BlobDir, when set, is a directory that every node shares, where
	// payloads larger than courier.InlineMax are kept as files; when empty
	// they are large objects of the database.
	BlobDir string
	// Blobs, when set, is the blob area the store uses instead (a bucket
	// that every node shares); BlobDir is then ignored.
	Blobs courier.Blobs
	// ApplicationName is what the store's connections show as
	// application_name in pg_stat_activity (default: the DSN's
	// application_name, else courier).
	ApplicationName string
	// KeyLocksHeld, when set, is told how long each write of outcomes
	// held its ordering keys' locks: from the locks taken to the commit.
	KeyLocksHeld func(time.Duration)
}

// Store is the PostgreSQL implementation of courier.Store.
type Store struct {
	pool            *pgxpool.Pool
	blobs           courier.Blobs
	secrets         sqlstore.Secrets // Secret, once read
	cfg             *pgxpool.Config
	logger          *slog.Logger
	channel         string // LISTEN/NOTIFY channel of new due messages
	id              string // this store's payload in its notifications, to skip its own
	topologyChannel string // LISTEN/NOTIFY channel of topology changes, with their versions

	ingests  chan *ingestCall // ingests waiting for a committer (group.go)
	grouped  atomic.Int64     // statements that served more than one ingest
	notify   chan struct{}    // a nudge for the notifier
	dueMu    sync.Mutex
	dueSoon  map[string]struct{} // routes to tell other nodes of
	dueAll   bool                // tell them to look at every route
	quit     chan struct{}       // closed by Close
	stopped  chan struct{}       // closed by Close once the background work has ended
	bg       sync.WaitGroup
	closeMu  sync.Once
	listenMu sync.Mutex
	listened bool
	paces    paces           // paced endpoints' next free starts (limits.go)
	buckets  buckets         // tenants' ingest buckets as last known (limits.go)
	quotas   sqlstore.Quotas // the tenants' caps that ingest checks
	keysHeld func(time.Duration)
}

// Open connects to the database at dsn, applies the migrations it lacks
// (one node at a time, under an advisory lock) and returns the store.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	opts.Logger = courier.LoggerOrDiscard(opts.Logger)
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres dsn: %w", err)
	}
	cfg.MaxConns = opts.MaxConns
	// A dead server must not hang ingest: a connection is given up after
	// this long, so callers get 503 instead of waiting.
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > 5*time.Second {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.HealthCheckPeriod = 5 * time.Second
	// A commit whose wait for a synchronous standby was cancelled is
	// reported a success, with a warning that marks its connection (see
	// unreplicatedMark); the mark lasts until the connection is released.
	cfg.ConnConfig.OnNotice = markUnreplicated(opts.Logger)
	cfg.AfterRelease = func(conn *pgx.Conn) bool {
		delete(conn.PgConn().CustomData(), unreplicatedMark)
		return true
	}
	if _, named := cfg.ConnConfig.RuntimeParams["application_name"]; !named || opts.ApplicationName != "" {
		cfg.ConnConfig.RuntimeParams["application_name"] = cmp.Or(opts.ApplicationName, "courier")
	}
	if opts.Schema != "" {
		if err := createSchema(ctx, cfg, opts.Schema); err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = opts.Schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("migrate: %w", err)
	}
	// Nodes of one schema wake each other; other schemas (other
	// installations in the same database) have channels of their own.
	var schema string
	if err := pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("read the schema: %w", err)
	}
	s := &Store{
		pool:            pool,
		cfg:             cfg,
		logger:          opts.Logger,
		channel:         channelName("courier_due.", schema),
		topologyChannel: channelName("courier_topology.", schema),
		id:              strconv.FormatInt(time.Now().UnixNano(), 36) + "." + strconv.Itoa(rand.IntN(1<<30)),
		ingests:         make(chan *ingestCall, 4*ingestCommitters),
		notify:          make(chan struct{}, 1),
		quit:            make(chan struct{}),
		stopped:         make(chan struct{}),
		keysHeld:        opts.KeyLocksHeld,
	}
	switch {
	case opts.Blobs != nil:
		s.blobs = opts.Blobs
	case opts.BlobDir != "":
		dir, err := blobdir.Open(opts.BlobDir)
		if err != nil {
			pool.Close()
			return nil, err
		}
		s.blobs = dir
	default:
		s.blobs = newLargeObjects(pool, opts.MaxConns)
	}
	s.bg.Add(1 + ingestCommitters)
	go s.notifyLoop()
	for range ingestCommitters {
		go s.ingestLoop()
	}
	return s, nil
}

// channelName is the LISTEN/NOTIFY channel prefix+schema, cut to the
// length of an identifier (63 bytes) as LISTEN would cut it: pg_notify
// refuses a longer name.
func channelName(prefix, schema string) string {
	name := prefix + schema
	if len(name) <= 63 {
		return name
	}
	cut := 63
	for cut > 0 && !utf8.RuneStart(name[cut]) {
		cut--
	}
	return name[:cut]
}

func createSchema(ctx context.Context, cfg *pgxpool.Config, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()); err != nil {
		return fmt.Errorf("create schema %s: %w", schema, err)
	}
	return nil
}

// migrate applies, in order and each in its own transaction, the embedded
// migrations newer than the recorded version. Nodes starting together take
// turns: the advisory lock is held for the whole run.
func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	const lockKey = `hashtext('courier.migrate.' || current_schema())`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+lockKey+`)`); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+lockKey+`)`)
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version integer PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	var current int
	if err := conn.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return err
	}
	return sqlstore.Migrate(migrations, current, func(m sqlstore.Migration) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.Version)
			return err
		})
	})
}

// Ping checks that the database answers and takes writes (it is not a
// standby).
func (s *Store) Ping(ctx context.Context) error {
	var writable bool
	if err := s.pool.QueryRow(ctx, `SELECT NOT pg_is_in_recovery()`).Scan(&writable); err != nil {
		return classify("ping", err)
	}
	if !writable {
		return courier.Unavailable("the store", errors.New("the database is a read-only standby"))
	}
	return nil
}

// acknowledged runs write, which the caller acknowledges once it returns,
// on a connection of the pool, and fails it, unavailable, when a commit of
// it was reported a success although its wait for a synchronous standby was
// cancelled (see unreplicatedMark).
func (s *Store) acknowledged(ctx context.Context, what string, write func(conn *pgxpool.Conn) error) error {
	return classify(what, s.pool.AcquireFunc(ctx, func(conn *pgxpool.Conn) error {
		if err := write(conn); err != nil {
			return err
		}
		return replicated(conn.Conn())
	}))
}

// Close stops the listener and notifier and closes the connections.
func (s *Store) Close() error {
	s.closeMu.Do(func() {
		close(s.quit)
		s.bg.Wait()
		close(s.stopped)
		if lo, ok := s.blobs.(largeObjects); ok {
			lo.closeAll() // the writes have ended: nothing holds a blob for them
		}
		s.pool.Close()
	})
	return nil
}

// Listen calls due whenever another node (or process) made messages due
// now, with their routes, or with none when it could not name them all,
// until ctx ends or the store is closed. It keeps a connection of its own
// and reconnects after a failure (calling due with none: anything may have
// come meanwhile); callers poll besides, so a notification lost meanwhile
// only delays.
func (s *Store) Listen(ctx context.Context, due func(routes []string)) {
	s.listenMu.Lock()
	defer s.listenMu.Unlock()
	if s.listened {
		return
	}
	s.listened = true
	s.bg.Add(1)
	go s.listenLoop(ctx, s.channel, "new messages",
		func() { due(nil) }, // anything ingested while not listening
		func(payload string) { s.heardDue(payload, due) })
}

// listenLoop listens on channel on a connection of its own until ctx ends
// or the store is closed, reconnecting with backoff after a failure (what
// names the notifications in the log). It calls connected once it listens,
// after each (re)connect, and heard with the payload of each notification.
func (s *Store) listenLoop(ctx context.Context, channel, what string, connected func(), heard func(payload string)) {
	defer s.bg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.listenOnce(ctx, channel, connected, heard)
		if ctx.Err() != nil {
			return
		}
		s.logger.Warn("listening for "+what+" failed; polling until it reconnects", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (s *Store) listenOnce(ctx context.Context, channel string, connected func(), heard func(payload string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.cfg.ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, `LISTEN `+pgx.Identifier{channel}.Sanitize()); err != nil {
		return err
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		heard(n.Payload)
	}
}

// heardDue calls due for a notification of new due messages: with its
// routes, or with none when it could not name them; not for this store's
// own.
func (s *Store) heardDue(payload string, due func(routes []string)) {
	from, routes, named := strings.Cut(payload, "\n")
	switch {
	case from == s.id:
	case named:
		due(strings.Split(routes, "\n"))
	default:
		due(nil)
	}
}

// Notifications name the routes with new due messages, up to a payload of
// maxNotifyPayload bytes each (PostgreSQL takes up to 8000), and up to
// maxNotifyRoutes routes per burst; past that they ask the other nodes to
// look at every route.
const (
	maxNotifyPayload = 7000
	maxNotifyRoutes  = 1000
)

// dueNow tells other nodes that messages of the routes are due now; an
// empty route name says that it cannot name them. Notifications are
// coalesced: at most one burst is in the air at a time, so ingest never
// waits on them and a burst of ingests costs a few NOTIFYs.
func (s *Store) dueNow(routes ...string) {
	if len(routes) == 0 {
		return // nothing to tell: "" asks the others to look at every route
	}
	s.dueMu.Lock()
	for _, r := range routes {
		if s.dueAll {
			break
		}
		if r == "" || len(s.dueSoon) >= maxNotifyRoutes {
			s.dueAll, s.dueSoon = true, nil
			break
		}
		if s.dueSoon == nil {
			s.dueSoon = map[string]struct{}{}
		}
		s.dueSoon[r] = struct{}{}
	}
	s.dueMu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

func (s *Store) notifyLoop() {
	defer s.bg.Done()
	for {
		select {
		case <-s.quit:
			return
		case <-s.notify:
		}
		s.dueMu.Lock()
		all, routes := s.dueAll, s.dueSoon
		s.dueAll, s.dueSoon = false, nil
		s.dueMu.Unlock()
		var payloads []string
		if all || len(routes) == 0 {
			payloads = []string{s.id}
		} else {
			var b strings.Builder
			for r := range routes {
				if b.Len() > 0 && b.Len()+1+len(r) > maxNotifyPayload {
					payloads = append(payloads, b.String())
					b.Reset()
				}
				if b.Len() == 0 {
					b.WriteString(s.id)
				}
				b.WriteByte('\n')
				b.WriteString(r)
			}
			payloads = append(payloads, b.String())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		for _, p := range payloads {
			if _, err := s.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, s.channel, p); err != nil {
				s.logger.Debug("notify other nodes of new messages", "err", err)
			}
		}
		cancel()
	}
}

// DropSchemaSQL is the statement that removes a schema a store used, with
// the large objects its blobs were kept in: a large object belongs to the
// database, not to a schema, so dropping the schema alone would leave
// them behind for good.
func DropSchemaSQL(schema string) string {
	lit := "'" + strings.ReplaceAll(schema, "'", "''") + "'"
	return `DO $drop$ BEGIN
		IF to_regclass(format('%I.blob_objects', ` + lit + `)) IS NOT NULL THEN
			EXECUTE format('SELECT lo_unlink(oid) FROM %I.blob_objects', ` + lit + `);
		END IF;
		EXECUTE format('DROP SCHEMA IF EXISTS %I CASCADE', ` + lit + `);
	END $drop$`
}
