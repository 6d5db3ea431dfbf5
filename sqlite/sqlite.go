// Package sqlite is courier's embedded store: one SQLite file in WAL mode,
// written by a single committer that gathers every write that arrives while
// the previous transaction commits into one transaction and one fsync.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/blobdir"
	"github.com/courier-gw/courier/internal/sqlstore"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// driverName is the database/sql driver of courier's SQLite connections.
const driverName = "courier-sqlite3"

// connectHook, when set, runs on every new connection: tests watch what
// the store's statements do through it.
var connectHook atomic.Pointer[func(*sqlite3.SQLiteConn) error]

func init() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if hook := connectHook.Load(); hook != nil {
			return (*hook)(c)
		}
		return nil
	}})
}

//go:embed migrations/*.sql
var migrations embed.FS

var _ courier.Store = (*Store)(nil)

// Options tune a Store. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// MaxGroup bounds how many writes share one transaction (default 512).
	MaxGroup int
	// Readers is the size of the read connection pool (default 4).
	Readers int
	// BlobDir is where payloads larger than courier.InlineMax are kept
	// (default: the database's path with "-blobs" added, beside its -wal).
	BlobDir string
	// Blobs, when set, is the blob area the store uses instead (a bucket);
	// BlobDir is then ignored.
	Blobs courier.Blobs
}

// Store is the SQLite implementation of courier.Store.
type Store struct {
	path    string
	lock    *os.File // held while open: one process per database
	blobs   courier.Blobs
	secrets sqlstore.Secrets // Secret, once read
	logger  *slog.Logger
	wdb     *sql.DB // exactly one connection, used only by the committer
	rdb     *sql.DB // readers; WAL lets them run beside the writer

	// Statements of the hot paths, prepared once on the write connection.
	insertStmt    *sql.Stmt
	insertNewStmt *sql.Stmt
	selectStmt    *sql.Stmt
	leadStmt      *sql.Stmt
	typeStmt      *sql.Stmt
	dueStmt       *sql.Stmt
	leaseStmt     *sql.Stmt
	leasedStmt    *sql.Stmt
	applyStmt     *sql.Stmt
	deliveredStmt *sql.Stmt
	usageStmt     *sql.Stmt
	attemptStmt   *sql.Stmt
	bodyStmt      *sql.Stmt
	priorStmt     *sql.Stmt
	groupStmt     *sql.Stmt
	promoteStmt   *sql.Stmt
	waitStmt      *sql.Stmt
	afterStmt     *sql.Stmt
	// Where the numbering of an ordering key stands (Courier-Sequence).
	seqReadStmt, seqWriteStmt *sql.Stmt

	priorities priorities      // of the messages stored
	quotas     sqlstore.Quotas // the tenants' caps that ingest checks

	cur txn // the transaction the committer runs; only it uses this

	ops      chan *op
	maxGroup int
	wal      *os.File     // the write-ahead log, which the syncer fsyncs
	syncWAL  func() error // fsyncs the WAL; a field so that tests can make it fail
	syncs    chan []chan error
	quit     chan struct{} // closed by Close: no new writes
	stopped  chan struct{} // closed when the committer has exited
	closeMu  sync.Once
	closeErr error
}

// op is one write: fn runs inside the shared transaction of its group. A
// durable op is answered once the WAL holding it is on disk; another (a
// claim, whose loss in a crash only leaves a message queued) as soon as its
// transaction commits.
type op struct {
	fn      func(tx *sql.Tx) error
	done    chan error
	durable bool
}

// errClosed answers writes that arrive after Close.
var errClosed = errors.New("sqlite store is closed")

// Open opens (creating if needed) the database at path, applies the
// migrations it lacks and starts the committer.
func Open(path string, opts Options) (*Store, error) {
	opts.Logger = courier.LoggerOrDiscard(opts.Logger)
	if opts.MaxGroup <= 0 {
		opts.MaxGroup = 512
	}
	if opts.Readers <= 0 {
		opts.Readers = 4
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create data directory: %w", err)
		}
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	blobs := opts.Blobs
	if blobs == nil {
		if opts.BlobDir == "" {
			opts.BlobDir = path + "-blobs"
		}
		dir, err := blobdir.Open(opts.BlobDir)
		if err != nil {
			lock.Close()
			return nil, err
		}
		blobs = dir
	}
	wdb, err := sql.Open(driverName, dsn(path, false))
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	if err := migrate(wdb); err != nil {
		lock.Close()
		wdb.Close()
		return nil, fmt.Errorf("migrate %s: %w", path, err)
	}
	rdb, err := sql.Open(driverName, dsn(path, true))
	if err != nil {
		lock.Close()
		wdb.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(opts.Readers)
	rdb.SetMaxIdleConns(opts.Readers)
	s := &Store{
		path:     path,
		lock:     lock,
		blobs:    blobs,
		logger:   opts.Logger,
		wdb:      wdb,
		rdb:      rdb,
		ops:      make(chan *op, 4*opts.MaxGroup),
		maxGroup: opts.MaxGroup,
		quit:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.insertStmt, insertMessage},
		{&s.insertNewStmt, insertNew},
		{&s.selectStmt, `SELECT ` + messageColumns + ` FROM messages WHERE id = ? AND subscription = ?`},
		{&s.leadStmt, `SELECT ` + messageColumns + ` FROM messages WHERE id = ? AND shared = 0`},
		{&s.dueStmt, dueSQL},
		{&s.leaseStmt, leaseSQL},
		{&s.leasedStmt, leasedSQL},
		{&s.applyStmt, applySQL},
		{&s.deliveredStmt, deliveredSQL},
		{&s.usageStmt, countUsageSQL},
		{&s.attemptStmt, attemptSQL},
		{&s.bodyStmt, insertBody},
		{&s.typeStmt, countType},
		{&s.priorStmt, `SELECT seq, route, state FROM messages WHERE id = ? AND subscription = ?`},
		{&s.groupStmt, groupSQL},
		{&s.promoteStmt, promoteSQL},
		{&s.waitStmt, waitSQL},
		{&s.afterStmt, `SELECT deliver_after FROM messages WHERE seq = ?`},
		{&s.seqReadStmt, readSequence},
		{&s.seqWriteStmt, writeSequence},
	} {
		if *p.stmt, err = wdb.Prepare(p.sql); err != nil {
			break
		}
	}
	if err == nil {
		err = s.priorities.load(wdb)
	}
	if err != nil {
		rdb.Close()
		wdb.Close()
		lock.Close()
		return nil, fmt.Errorf("prepare statements: %w", err)
	}
	// The WAL exists once the migrations ran; O_CREATE only guards the
	// case of a database that has not been written since it was made.
	if s.wal, err = os.OpenFile(path+"-wal", os.O_RDONLY|os.O_CREATE, 0o600); err != nil {
		rdb.Close()
		wdb.Close()
		lock.Close()
		return nil, fmt.Errorf("open the write-ahead log: %w", err)
	}
	s.syncWAL = func() error { return syscall.Fdatasync(int(s.wal.Fd())) }
	s.syncs = make(chan []chan error, 64)
	go s.commitLoop()
	return s, nil
}

// dsn builds the connection string. Commits do not wait for the disk
// (synchronous=NORMAL, which SQLite keeps consistent in WAL mode, syncing the
// WAL before each checkpoint and the database after it); the syncer fsyncs
// the WAL after each group instead, while the next group already runs, and
// only then are durable writes acknowledged. An acknowledged message is on
// disk as with synchronous=FULL, but the writer never idles during an fsync.
// Writes take the lock when they begin (immediate), so a transaction never
// fails half-way for want of it. A connection has no mutex of its own
// (_mutex=no): database/sql hands it to one goroutine at a time, and SQLite's
// locking of every call cost a few per cent of the CPU of a delivery.
func dsn(path string, readOnly bool) string {
	q := url.Values{}
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_busy_timeout", "10000")
	q.Set("_foreign_keys", "1")
	q.Set("_mutex", "no")
	if readOnly {
		q.Set("_query_only", "1")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// migrate applies, in order and each in its own transaction, the embedded
// migrations newer than the recorded schema version.
func migrate(db *sql.DB) error {
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
		version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))`); err != nil {
		return err
	}
	var current int
	if err := db.QueryRow(`SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return err
	}
	return sqlstore.Migrate(migrations, current, func(m sqlstore.Migration) error {
		tx, err := db.Begin()
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.Exec(m.SQL); err != nil {
			return err
		}
		if _, err := tx.Exec(`INSERT INTO schema_migrations (version) VALUES (?)`, m.Version); err != nil {
			return err
		}
		return tx.Commit()
	})
}

// write runs fn in the next group transaction and returns once that
// transaction has committed (fn's changes are durable) or failed. If ctx ends
// first, write returns ctx.Err() while the write may still commit.
func (s *Store) write(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.submit(ctx, &op{fn: fn, done: make(chan error, 1), durable: true})
}

// writeNoSync is write for changes that need not survive a power cut: it
// returns when the transaction has committed, without waiting for the fsync.
func (s *Store) writeNoSync(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.submit(ctx, &op{fn: fn, done: make(chan error, 1)})
}

// gaveUp answers a write whose caller stopped waiting for it: the store
// did not answer in time, whatever the cause the caller gave. The error is
// still the context's (errors.Is), for callers that check whose it was.
func gaveUp(ctx context.Context) error {
	return courier.Unavailable("the store", ctx.Err())
}

func (s *Store) submit(ctx context.Context, o *op) error {
	select {
	case <-s.quit:
		return courier.Unavailable("the store", errClosed)
	default:
	}
	select {
	case s.ops <- o:
	case <-s.quit:
		return courier.Unavailable("the store", errClosed)
	case <-ctx.Done():
		return gaveUp(ctx)
	}
	select {
	case err := <-o.done:
		return err
	case <-ctx.Done():
		// The write may still commit: a sender that gave up sends again,
		// and learns that it exists.
		return gaveUp(ctx)
	case <-s.stopped:
		// The committer has exited: the op either committed before that
		// (its answer is waiting) or was never taken.
		select {
		case err := <-o.done:
			return err
		default:
			return courier.Unavailable("the store", errClosed)
		}
	}
}

// commitLoop is the only user of the write connection. It takes the first
// waiting write, then every other write already waiting (up to maxGroup), and
// commits them together. While one group commits, the next one gathers.
func (s *Store) commitLoop() {
	synced := make(chan struct{})
	go s.syncLoop(synced)
	defer func() {
		close(s.syncs)
		<-synced
		close(s.stopped)
	}()
	group := make([]*op, 0, s.maxGroup)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var lastGroup int
	var lastCommit time.Duration
	for {
		var first *op
		select {
		case first = <-s.ops:
		case <-s.quit:
			// Finish what was handed in before Close, then stop.
			for {
				select {
				case o := <-s.ops:
					s.commit(append(group[:0], o))
				default:
					return
				}
			}
		}
		group = append(group[:0], first)
	gather:
		for len(group) < s.maxGroup {
			select {
			case o := <-s.ops:
				group = append(group, o)
			default:
				break gather
			}
		}
		if win := gatherWindow(lastGroup, lastCommit); win > 0 && len(group) < s.maxGroup {
			timer.Reset(win)
		wait:
			for len(group) < s.maxGroup {
				select {
				case o := <-s.ops:
					group = append(group, o)
				case <-timer.C:
					break wait
				}
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
		}
		start := time.Now()
		s.commit(group)
		lastGroup, lastCommit = len(group), time.Since(start)
	}
}

// commit runs one group in one transaction and reports to each op (the
// durable ones through the syncer). The happy path has no savepoints: when
// an op fails, the group is rolled back and every op runs again in a
// transaction of its own, so that a failure undoes only its own op's changes.
func (s *Store) commit(group []*op) {
	var toSync []chan error
	committed := func(o *op) {
		if o.durable {
			toSync = append(toSync, o.done)
		} else {
			o.done <- nil
		}
	}
	defer func() {
		if len(toSync) > 0 {
			s.syncs <- toSync
		}
	}()
	if len(group) > 1 {
		err := s.runTx(group)
		if err == nil {
			for _, o := range group {
				committed(o)
			}
			return
		}
		var opErr *opError
		if !errors.As(err, &opErr) {
			s.fail(group, err)
			return
		}
	}
	for _, o := range group {
		var opErr *opError
		switch err := s.runTx([]*op{o}); {
		case err == nil:
			committed(o)
		case errors.As(err, &opErr):
			o.done <- opErr.err
		default:
			s.logger.Error("store write failed", "err", err)
			o.done <- err
		}
	}
}

// syncLoop fsyncs the WAL for the committed groups handed to it: once for
// all that arrived meanwhile, then it answers their ops.
func (s *Store) syncLoop(done chan struct{}) {
	defer close(done)
	for first := range s.syncs {
		waiting := first
	more:
		for {
			select {
			case next, ok := <-s.syncs:
				if !ok {
					break more
				}
				waiting = append(waiting, next...)
			default:
				break more
			}
		}
		var err error
		if serr := s.syncWAL(); serr != nil {
			err = courier.Unavailable("the store", fmt.Errorf("fsync the write-ahead log: %w", serr))
			s.logger.Error("store sync failed", "err", err)
		}
		for _, ch := range waiting {
			ch <- err
		}
	}
}

// txn is what the committer keeps of the transaction it runs: the
// statements bound to it, each bound once however many ops of the group use
// it (a binding allocates), and the types its ingests counted, written
// once before it commits rather than once an ingest.
type txn struct {
	tx    *sql.Tx
	bound map[*sql.Stmt]*sql.Stmt
	types sqlstore.TypeCounts
	usage sqlstore.UsageCounts // what its writes changed of the tenants' use
}

// stmt returns the prepared statement p bound to tx, the transaction the
// committer runs.
func (s *Store) stmt(tx *sql.Tx, p *sql.Stmt) *sql.Stmt {
	if tx != s.cur.tx {
		return tx.Stmt(p)
	}
	b := s.cur.bound[p]
	if b == nil {
		b = tx.Stmt(p)
		s.cur.bound[p] = b
	}
	return b
}

// countTypes adds the types the transaction's ingests counted to the
// catalog of types.
func (s *Store) countTypes(tx *sql.Tx) error {
	for _, c := range s.cur.types {
		if _, err := s.stmt(tx, s.typeStmt).Exec(c.Type, c.Count, micros(c.FirstSeen), micros(c.LastSeen)); err != nil {
			return classify("count the type "+c.Type, err)
		}
	}
	return nil
}

// countUsage adds what the transaction's writes changed of the tenants'
// use (migration 0019).
func (s *Store) countUsage(tx *sql.Tx) error {
	// One statement for every tenant the transaction touched: a group of
	// outcomes over many tenants' messages is one more statement, not one
	// per tenant.
	rows := make([][3]any, 0, len(s.cur.usage.Rows()))
	for _, u := range s.cur.usage.Rows() {
		if u.Queued != 0 || u.Bytes != 0 {
			rows = append(rows, [3]any{u.Tenant, u.Queued, u.Bytes})
		}
	}
	if len(rows) == 0 {
		return nil
	}
	list, err := json.Marshal(rows)
	if err != nil {
		return fmt.Errorf("count the use of tenants: %w", err)
	}
	if _, err := s.stmt(tx, s.usageStmt).Exec(string(list)); err != nil {
		return classify("count the use of tenants", err)
	}
	return nil
}

// opError is an op's own failure, as opposed to one of the transaction.
type opError struct{ err error }

func (e *opError) Error() string { return e.err.Error() }

// runTx runs ops in one transaction and commits it.
func (s *Store) runTx(ops []*op) error {
	tx, err := s.wdb.BeginTx(context.Background(), nil)
	if err != nil {
		return classify("begin", err)
	}
	if s.cur.bound == nil {
		s.cur.bound = map[*sql.Stmt]*sql.Stmt{}
	}
	clear(s.cur.bound)
	s.cur.tx, s.cur.types = tx, s.cur.types[:0]
	s.cur.usage.Reset()
	defer func() { s.cur.tx = nil }()
	for _, o := range ops {
		if err := o.fn(tx); err != nil {
			tx.Rollback()
			return &opError{err}
		}
	}
	if err := s.countUsage(tx); err != nil {
		tx.Rollback()
		return &opError{err}
	}
	if err := s.countTypes(tx); err != nil {
		// Counted for the ingests of this group: each of them runs again
		// alone.
		tx.Rollback()
		return &opError{err}
	}
	if err := tx.Commit(); err != nil {
		tx.Rollback()
		return classify("commit", err)
	}
	return nil
}

func (s *Store) fail(group []*op, err error) {
	s.logger.Error("store write failed", "ops", len(group), "err", err)
	for _, o := range group {
		o.done <- err
	}
}

// Ping checks that the database answers a read and that a write transaction
// can be begun and committed.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write(ctx, func(tx *sql.Tx) error { return nil }); err != nil {
		return err
	}
	var one int
	if err := s.rdb.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return classify("ping", err)
	}
	return nil
}

// Close stops taking writes, commits those already handed in, and closes
// the database.
func (s *Store) Close() error {
	s.closeMu.Do(func() {
		close(s.quit)
		<-s.stopped
		s.closeErr = errors.Join(s.rdb.Close(), s.wdb.Close(), s.wal.Close(), s.lock.Close())
	})
	return s.closeErr
}

// gatherWindow is how long the committer waits for more writes before it
// commits a group. Alone, a write commits at once. Under load (the last group
// had company) more writes are on their way, and the fsync costs the same for
// one write as for a hundred: waiting about as long as the last commit took
// lets the group fill, so throughput grows with load instead of collapsing
// into a convoy of tiny commits.
func gatherWindow(lastGroup int, lastCommit time.Duration) time.Duration {
	if lastGroup <= 1 {
		return 0
	}
	return min(max(lastCommit, 100*time.Microsecond), time.Millisecond)
}

// lockFile takes an exclusive lock that lasts while the file stays open (the
// kernel drops it when the process dies). Two processes writing one SQLite
// database would each believe the other's leases were from a dead run.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%s is in use by another courier process; one process serves one SQLite store (for several nodes, use the postgres store)", strings.TrimSuffix(path, ".lock"))
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}
