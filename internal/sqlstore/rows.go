package sqlstore

import (
	"fmt"
	"time"
)

// Scanner is a row to read: one row of a query, or the row of a query of
// one row, of either driver.
type Scanner interface {
	Scan(dest ...any) error
}

// Rows are the rows of a query, of either driver.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// Time is a time column as either store keeps it, to scan into: a
// timestamptz of PostgreSQL, or microseconds since the epoch in SQLite
// (as the sqlite store writes times). It reads as UTC.
type Time struct{ time.Time }

// Scan reads a time column's value.
func (t *Time) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		t.Time = v.UTC()
	case int64:
		t.Time = time.UnixMicro(v).UTC()
	default:
		return fmt.Errorf("scan a time from %T", src)
	}
	return nil
}

// QueryFunc runs a statement of rows with its arguments on a store's
// database, for the readers here that build the statement.
type QueryFunc func(q string, args ...any) (Rows, error)

// Collect reads every row of a query through scan, appending to out. err
// is the query's: when it is set there are no rows to read, and Collect
// returns it. The rows are closed when Collect returns.
func Collect[T any](out []T, rows Rows, err error, scan func(Scanner) (T, error)) ([]T, error) {
	if err != nil {
		return nil, err
	}
	defer closeRows(rows)
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// closeRows closes the rows of either driver: database/sql's Close returns
// an error (the rows' own, which Err has told already), pgx's returns
// none.
func closeRows(rows Rows) {
	switch r := rows.(type) {
	case interface{ Close() error }:
		r.Close()
	case interface{ Close() }:
		r.Close()
	}
}
