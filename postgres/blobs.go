package postgres

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"strconv"
	"sync"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Blobs is where the store keeps payloads larger than courier.InlineMax:
// large objects of the database, the directory of Options.BlobDir, or
// Options.Blobs when given.
func (s *Store) Blobs() courier.Blobs { return s.blobs }

// ReferencedBlobs reports which of refs a stored message names, on the
// partial index of messages with a blob.
func (s *Store) ReferencedBlobs(ctx context.Context, refs []string) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT blob FROM messages WHERE blob = ANY($1)`, refs)
	known := make(map[string]bool, len(refs))
	_, err = collect(nil, rows, err, "look up blobs", func(row scanner) (string, error) {
		var ref string
		err := row.Scan(&ref)
		known[ref] = true
		return ref, err
	})
	return known, err
}

// Secret returns the named secret, made of 32 random bytes by the first
// call on any node.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	return s.secrets.Get(name, func() ([]byte, error) { return s.readSecret(ctx, name) })
}

// readSecret reads the named secret, making it if it is not there.
func (s *Store) readSecret(ctx context.Context, name string) ([]byte, error) {
	var fresh [32]byte
	if _, err := rand.Read(fresh[:]); err != nil {
		return nil, err
	}
	var value []byte
	err := s.pool.QueryRow(ctx, `WITH made AS (
		INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING RETURNING value)
		SELECT value FROM made UNION ALL SELECT value FROM settings WHERE name = $1`, name, fresh[:]).Scan(&value)
	if err != nil {
		return nil, classify("read secret "+name, err)
	}
	return value, nil
}

// largeObjects keeps blobs as large objects. A blob is written in one
// transaction, which makes the object and records it in blob_objects; an
// upload cut off before its commit leaves nothing. From its creation until
// the writer's Close, the writer's connection holds a session advisory
// lock on the object, so that a sweep (which takes the locks it can) leaves
// it alone until its message is stored; a node that dies lets go of its
// locks with its connections.
type largeObjects struct {
	pool *pgxpool.Pool
	// writing and reading bound the blobs being written and read at once:
	// each holds a connection of the pool while it streams, and the rest
	// of the store (the ingest of a written blob's message among it) must
	// find one. Together they take half the pool at most.
	writing, reading slots
	// open are the writers not closed yet: the store's Close closes them
	// (a writer held on after a failed ingest, Spool.CloseLater, among
	// them), as the pool's Close waits for their connections.
	open *writerSet
}

// writerSet is a set of writers, safe for concurrent use.
type writerSet struct {
	mu sync.Mutex
	ws map[*loWriter]struct{}
}

func (s *writerSet) add(w *loWriter) {
	s.mu.Lock()
	s.ws[w] = struct{}{}
	s.mu.Unlock()
}

func (s *writerSet) remove(w *loWriter) {
	s.mu.Lock()
	delete(s.ws, w)
	s.mu.Unlock()
}

// closeAll closes every writer still open. Once the store's writes have
// ended, no message can come to refer to a blob not stored yet: a blob left
// without one is the sweep's.
func (l largeObjects) closeAll() {
	l.open.mu.Lock()
	ws := make([]*loWriter, 0, len(l.open.ws))
	for w := range l.open.ws {
		ws = append(ws, w)
	}
	l.open.mu.Unlock()
	for _, w := range ws {
		w.Close()
	}
}

var _ courier.Blobs = largeObjects{}

// newLargeObjects returns the large objects of pool, writing and reading a
// quarter of its connections' worth of blobs at once each, at most.
func newLargeObjects(pool *pgxpool.Pool, maxConns int32) largeObjects {
	n := max(1, maxConns/4)
	return largeObjects{pool: pool, writing: make(slots, n), reading: make(slots, n), open: &writerSet{ws: map[*loWriter]struct{}{}}}
}

// slots is a counting semaphore.
type slots chan struct{}

// take waits for a slot to stream a blob in; the caller gives it back.
func (s slots) take(ctx context.Context, what string) error {
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return courier.Errorf(courier.CodeUnavailable, "%s: %d large payloads are moving already; try again", what, cap(s))
	}
}

func (s slots) give() { <-s }

// lockKey is the advisory lock of large object oid: its number in a space
// of courier's own ("cour" in the high half).
func lockKey(oid uint32) int64 { return lockSpace<<32 | int64(oid) }

// lockSpace is the high half of the advisory locks of large objects.
const lockSpace = 0x636f7572

// oidLockSQL is lockKey of the column oid, in SQL.
var oidLockSQL = strconv.FormatInt(lockSpace, 10) + "::bigint << 32 | oid::bigint"

// ioChunk is how much a blob's reader and writer move per round trip.
const ioChunk = 1 << 20

func (l largeObjects) Create(ctx context.Context) (courier.BlobWriter, error) {
	if err := l.writing.take(ctx, "create a blob"); err != nil {
		return nil, err
	}
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		l.writing.give()
		return nil, classify("create a blob", err)
	}
	w := &loWriter{ctx: ctx, conn: conn, give: l.writing.give, open: l.open}
	l.open.add(w)
	if err := w.start(); err != nil {
		w.Close()
		return nil, classify("create a blob", err)
	}
	return w, nil
}

type loWriter struct {
	mu        sync.Mutex // Close may come from a timer, or the store's Close
	open      *writerSet
	ctx       context.Context
	conn      *pgxpool.Conn
	give      func() // gives the slot back
	tx        pgx.Tx
	oid       uint32
	locked    bool
	obj       *pgx.LargeObject
	buf       *bufio.Writer
	size      int64
	committed bool
	removed   bool
}

func (w *loWriter) start() error {
	var err error
	if w.tx, err = w.conn.Begin(w.ctx); err != nil {
		return err
	}
	los := w.tx.LargeObjects()
	if w.oid, err = los.Create(w.ctx, 0); err != nil {
		return err
	}
	if _, err = w.tx.Exec(w.ctx, `SELECT pg_advisory_lock($1)`, lockKey(w.oid)); err != nil {
		return err
	}
	w.locked = true
	if _, err = w.tx.Exec(w.ctx, `INSERT INTO blob_objects (oid) VALUES ($1)`, w.oid); err != nil {
		return err
	}
	if w.obj, err = los.Open(w.ctx, w.oid, pgx.LargeObjectModeWrite); err != nil {
		return err
	}
	w.buf = bufio.NewWriterSize(w.obj, ioChunk)
	return nil
}

func (w *loWriter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	w.size += int64(n)
	if err != nil {
		return n, classify("write a blob", err)
	}
	return n, nil
}

func (w *loWriter) Commit() (string, error) {
	err := w.buf.Flush()
	if err == nil {
		err = w.obj.Close()
	}
	if err == nil {
		_, err = w.tx.Exec(w.ctx, `UPDATE blob_objects SET size = $2 WHERE oid = $1`, w.oid, w.size)
	}
	if err == nil {
		err = w.tx.Commit(w.ctx)
	}
	if err != nil {
		return "", classify("commit a blob", err)
	}
	w.committed = true
	return strconv.FormatUint(uint64(w.oid), 10), nil
}

func (w *loWriter) Abort() error {
	if w.removed {
		return nil
	}
	w.removed = true
	if !w.committed {
		if w.tx != nil {
			return w.tx.Rollback(w.ctx)
		}
		return nil
	}
	return unlinkObjects(w.ctx, w.conn, []uint32{w.oid})
}

func (w *loWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.conn == nil {
		return nil
	}
	defer w.open.remove(w)
	var err error
	if !w.committed {
		err = w.Abort()
	}
	if w.locked {
		// A lock that could not be let go of goes with the connection.
		if _, uerr := w.conn.Exec(context.WithoutCancel(w.ctx), `SELECT pg_advisory_unlock($1)`, lockKey(w.oid)); uerr != nil {
			w.conn.Conn().Close(context.WithoutCancel(w.ctx))
		}
	}
	w.conn.Release()
	w.conn = nil
	w.give()
	return err
}

// unlinkObjects removes large objects and their records.
func unlinkObjects(ctx context.Context, q querier, oids []uint32) error {
	_, err := q.Exec(ctx, `WITH gone AS (DELETE FROM blob_objects WHERE oid = ANY($1) RETURNING oid)
		SELECT lo_unlink(oid) FROM gone`, oids)
	return classify("remove blobs", err)
}

func parseOID(ref string) (uint32, bool) {
	n, err := strconv.ParseUint(ref, 10, 32)
	return uint32(n), err == nil
}

func (l largeObjects) Open(ctx context.Context, ref string) (io.ReadCloser, error) {
	oid, ok := parseOID(ref)
	if !ok {
		return nil, courier.Errorf(courier.CodeNotFound, "no blob %q", ref)
	}
	if err := l.reading.take(ctx, "open blob "+ref); err != nil {
		return nil, err
	}
	tx, err := l.pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		l.reading.give()
		return nil, classify("open blob "+ref, err)
	}
	los := tx.LargeObjects()
	obj, err := los.Open(ctx, oid, pgx.LargeObjectModeRead)
	if err != nil {
		tx.Rollback(context.WithoutCancel(ctx))
		l.reading.give()
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "42704" { // undefined_object
			return nil, courier.Errorf(courier.CodeNotFound, "blob %s is not there", ref)
		}
		return nil, classify("open blob "+ref, err)
	}
	return &loReader{ctx: ctx, tx: tx, r: bufio.NewReaderSize(obj, ioChunk), give: l.reading.give}, nil
}

type loReader struct {
	ctx  context.Context
	tx   pgx.Tx
	r    *bufio.Reader
	give func() // gives the slot back
	done bool
}

func (r *loReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = classify("read a blob", err)
	}
	return n, err
}

func (r *loReader) Close() error {
	if r.done {
		return nil
	}
	r.done = true
	defer r.give()
	return r.tx.Rollback(context.WithoutCancel(r.ctx))
}

// Sweep goes through the recorded objects in batches of sweepBatch, by
// oid, on a connection of its own: it takes the advisory locks of the
// batch's objects that no writer holds, asks which of those a message
// refers to, removes the others and lets go of the locks before the next
// batch, so that it never holds more than a batch of locks.
func (l largeObjects) Sweep(ctx context.Context, referenced func(ctx context.Context, refs []string) (map[string]bool, error)) (int, error) {
	conn, err := l.pool.Acquire(ctx)
	if err != nil {
		return 0, classify("sweep blobs", err)
	}
	defer conn.Release()
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock_all()`)
	removed := 0
	var after uint32
	for {
		var batch []uint32
		rows, err := conn.Query(ctx, `SELECT oid FROM blob_objects WHERE oid > $1 ORDER BY oid LIMIT $2`, after, sweepBatch)
		batch, err = collect(batch, rows, err, "sweep blobs", func(row scanner) (uint32, error) {
			var oid uint32
			return oid, row.Scan(&oid)
		})
		if err != nil || len(batch) == 0 {
			return removed, err
		}
		after = batch[len(batch)-1]
		n, err := sweepBatchOf(ctx, conn, batch, referenced)
		removed += n
		if err != nil {
			return removed, err
		}
		if len(batch) < sweepBatch {
			return removed, nil
		}
	}
}

// sweepBatch is how many objects a sweep locks and asks about at once.
const sweepBatch = 500

// sweepBatchOf removes those of oids that no writer holds and no message
// refers to, and lets go of the locks it took.
func sweepBatchOf(ctx context.Context, conn *pgxpool.Conn, oids []uint32, referenced func(ctx context.Context, refs []string) (map[string]bool, error)) (int, error) {
	rows, err := conn.Query(ctx, `SELECT oid FROM unnest($1::oid[]) AS oid WHERE pg_try_advisory_lock(`+oidLockSQL+`)`, oids)
	locked, err := collect(nil, rows, err, "sweep blobs", func(row scanner) (uint32, error) {
		var oid uint32
		return oid, row.Scan(&oid)
	})
	if err != nil {
		return 0, err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(`+oidLockSQL+`) FROM unnest($1::oid[]) AS oid`, locked)
	if len(locked) == 0 {
		return 0, nil
	}
	refs := make([]string, len(locked))
	for i, oid := range locked {
		refs[i] = strconv.FormatUint(uint64(oid), 10)
	}
	known, err := referenced(ctx, refs)
	if err != nil {
		return 0, err
	}
	var gone []uint32
	for i, oid := range locked {
		if !known[refs[i]] {
			gone = append(gone, oid)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if err := unlinkObjects(ctx, conn, gone); err != nil {
		return 0, err
	}
	return len(gone), nil
}

// Remove unlinks a large object no message refers to any more. The
// store's Erase unlinks its blob in its own transaction instead.
func (l largeObjects) Remove(ctx context.Context, ref string) error {
	oid, ok := parseOID(ref)
	if !ok {
		return nil
	}
	return unlinkObjects(ctx, l.pool, []uint32{oid})
}

func (l largeObjects) Usage(ctx context.Context) (int, int64, error) {
	var n int
	var size int64
	err := l.pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(size), 0) FROM blob_objects`).Scan(&n, &size)
	return n, size, classify("measure blobs", err)
}
