package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"github.com/courier-gw/courier/internal/sqlstore"
	sqlite3 "github.com/mattn/go-sqlite3"
)

// classify wraps a failure of the database with what the store was doing
// (see sqlstore.Classify): unavailable when the database could not serve
// the request at the moment, internal when the request is at fault.
func classify(what string, err error) error { return sqlstore.Classify(what, err, unavailable) }

// unavailable reports whether err is the database's state of the moment
// rather than a fault of the request: the database is busy or locked, its
// disk fails or is full, its file cannot be opened, the store is closed,
// or the wait for it ended with its context. Anything else (a constraint
// that should hold, a statement or a row that is wrong) is a fault.
func unavailable(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrBusy, sqlite3.ErrLocked, sqlite3.ErrIoErr, sqlite3.ErrFull, sqlite3.ErrCantOpen,
			sqlite3.ErrInterrupt, // a statement cut short because its context ended
			sqlite3.ErrProtocol,  // a race for the WAL's locks, which SQLite asks to retry
			sqlite3.ErrNomem,     // the process is short of memory
			sqlite3.ErrReadonly:  // the file or its disk went read-only (as a disk does after errors)
			return true
		}
		return false
	}
	return errors.Is(err, errClosed) || errors.Is(err, sql.ErrConnDone) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		sqlstore.Says(err, "sql: database is closed") // database/sql's, after Close
}

// one wraps the failure of a read of one row: notFound when there was no
// row, else as classify does.
func one(what string, err, notFound error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return notFound
	}
	return classify(what, err)
}

// collect reads every row of a query through scan, appending to out, and
// closes the rows; what names the reading in errors.
func collect[T any](out []T, rows *sql.Rows, err error, what string, scan func(scanner) (T, error)) ([]T, error) {
	out, err = sqlstore.Collect(out, rows, err, scan)
	return out, classify(what, err)
}

// readRows is the sqlstore.QueryFunc of the store's readers.
func (s *Store) readRows(ctx context.Context) sqlstore.QueryFunc {
	return func(q string, args ...any) (sqlstore.Rows, error) { return s.rdb.QueryContext(ctx, q, args...) }
}
