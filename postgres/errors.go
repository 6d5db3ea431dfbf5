package postgres

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// classify wraps a failure of the database with what the store was doing
// (see sqlstore.Classify): unavailable when the database could not serve
// the request at the moment, internal when the request is at fault.
func classify(what string, err error) error { return sqlstore.Classify(what, err, unavailable) }

// unavailable reports whether err is the database's state of the moment
// rather than a fault of the request: the database cannot be reached or
// the connection was lost, it is short of resources, shutting down or
// starting up, a standby that takes no writes (as after a failover), it
// gave up the transaction for another's sake (serialization failure,
// deadlock), the store is closed, or the wait for a connection or an
// answer ended with its context. Anything else (a constraint that should
// hold, a statement or a row that is wrong) is a fault.
func unavailable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "25006", // read-only SQL transaction: a standby, as Ping says
			"25P03", // idle in transaction too long: the server ended the session
			"55P03": // lock not available: another holds it for now
			return true
		}
		switch pe.Code[:min(2, len(pe.Code))] {
		case "08", // connection exception
			"40", // transaction rollback: serialization failure, deadlock; to be tried again
			"53", // insufficient resources: disk full, out of memory, too many connections
			"57", // operator intervention: shutdown, cannot connect now, statement cancelled
			"58": // system error: I/O error outside the database
			return true
		}
		return false
	}
	var connect *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connect) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.Timeout(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, errStoreClosed) || sqlstore.Says(err, "closed pool") || // the pool's, after Close
		// A connection lost under a statement, where the driver does not
		// report it as closed.
		errors.As(err, &netErr) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// PostgreSQL reports a commit whose wait for synchronous replication was
// cancelled (pg_cancel_backend, or the backend's termination) with a
// warning and then, unless the backend is ending, a success: the
// transaction is committed on the primary, but perhaps on no standby, and
// a failover would lose it. The connections' notice handler marks the
// connection at that warning; a write that is acknowledged checks the mark
// after its commit (Store.acknowledged), and fails, unavailable, when it is
// set: its outcome is unknown, so ingest answers 503, never 201. The mark is
// cleared when the connection goes back to the pool.
const unreplicatedMark = "courier.unreplicated"

// markUnreplicated is the connections' handler of notices.
func markUnreplicated(logger *slog.Logger) pgconn.NoticeHandler {
	return func(conn *pgconn.PgConn, n *pgconn.Notice) {
		if !unreplicated(n) {
			return
		}
		logger.Warn("a commit's wait for a synchronous standby was cancelled: it is on the primary only, and not acknowledged",
			"notice", n.Message, "pid", conn.PID())
		conn.CustomData()[unreplicatedMark] = true
	}
}

// unreplicated reports whether n is the warning of a commit whose wait for
// synchronous replication was cancelled. It is told by its text, which is
// PostgreSQL's in English (lc_messages C or en): the warning has no code of
// its own.
func unreplicated(n *pgconn.Notice) bool {
	severity := cmp.Or(n.SeverityUnlocalized, n.Severity)
	return severity == "WARNING" &&
		(strings.Contains(n.Message, "synchronous replication") || strings.Contains(n.Detail, "committed locally"))
}

// replicated fails, unavailable, when conn has the mark of a commit whose
// wait for synchronous replication was cancelled.
func replicated(conn *pgx.Conn) error {
	if conn.PgConn().CustomData()[unreplicatedMark] == nil {
		return nil
	}
	return courier.Unavailable("the store", errors.New("a commit's wait for a synchronous standby was cancelled: it may be on the primary only"))
}

// one wraps the failure of a read of one row: notFound when there was no
// row, else as classify does.
func one(what string, err, notFound error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return notFound
	}
	return classify(what, err)
}

// collect reads every row of a query through scan, appending to out, and
// closes the rows; what names the reading in errors.
func collect[T any](out []T, rows pgx.Rows, err error, what string, scan func(scanner) (T, error)) ([]T, error) {
	out, err = sqlstore.Collect(out, rows, err, scan)
	return out, classify(what, err)
}

// readRows is the sqlstore.QueryFunc of the store's pool.
func (s *Store) readRows(ctx context.Context) sqlstore.QueryFunc {
	return func(q string, args ...any) (sqlstore.Rows, error) { return s.pool.Query(ctx, q, args...) }
}

// scanner is a row to read, of a query of rows or of one row.
type scanner = sqlstore.Scanner
