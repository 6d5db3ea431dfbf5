package postgres

import (
	"context"
	"fmt"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/storetest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Classify is classify, for its tests.
func Classify(what string, err error) error { return classify(what, err) }

// ErrStoreClosed is what a closed store answers its calls with.
var ErrStoreClosed = errStoreClosed

// GroupedStatements counts the ingest statements that served more than one
// call, for the tests of group commit.
func (s *Store) GroupedStatements() int64 { return s.grouped.Load() }

// IngestQueueFull reports whether the queue of ingest calls waiting for a
// committer is full.
func (s *Store) IngestQueueFull() bool { return len(s.ingests) == cap(s.ingests) }

// HoldConnections takes every connection of the pool, so that statements
// wait, until release is called.
func (s *Store) HoldConnections(ctx context.Context) (release func(), err error) {
	var held []*pgxpool.Conn
	release = func() {
		for _, c := range held {
			c.Release()
		}
	}
	for range s.pool.Stat().MaxConns() {
		c, err := s.pool.Acquire(ctx)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, c)
	}
	return release, nil
}

// ChannelName is channelName, for its tests.
var ChannelName = channelName

// ExplainApply is the plan PostgreSQL chooses for writing changes, in the
// transaction Apply writes them in, as EXPLAIN's text: of deliveredSQL if
// the first change is a Delivery, else of applySQL.
func (s *Store) ExplainApply(ctx context.Context, changes []courier.Change) (string, error) {
	q := applySQL
	args, err := applyArgs(changes)
	if err != nil {
		return "", err
	}
	if changes[0].Delivery() {
		q, args = deliveredSQL, deliveredArgs(changes)
	}
	var plan strings.Builder
	err = pgx.BeginTxFunc(ctx, s.pool, byIndex, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "EXPLAIN "+q, args...)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		plan.WriteString(strings.Join(lines, "\n"))
		return err
	})
	return plan.String(), err
}

// ExplainCountLive is the plan of CountLive, as EXPLAIN's text.
func (s *Store) ExplainCountLive(ctx context.Context) (string, error) {
	rows, err := s.pool.Query(ctx, "EXPLAIN "+countLiveSQL)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return strings.Join(lines, "\n"), err
}

// ExplainClaim is the plan that serves claims, in the transaction ClaimDue
// claims in (claimPlan: made once, for any parameters), as EXPLAIN's text,
// for a claim of up to limit messages of route.
func (s *Store) ExplainClaim(ctx context.Context, route string, limit int) (string, error) {
	var plan strings.Builder
	err := pgx.BeginTxFunc(ctx, s.pool, claimPlan, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "PREPARE explained_claim AS "+claimSQL); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, fmt.Sprintf(`EXPLAIN EXECUTE explained_claim(ARRAY['%s']::text[], ARRAY[%d]::int[],
			now(), %d, now() + interval '1 hour', 'explain')`, strings.ReplaceAll(route, "'", "''"), limit, limit))
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		plan.WriteString(strings.Join(lines, "\n"))
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "DEALLOCATE explained_claim")
		return err
	})
	return plan.String(), err
}

// Analyze has PostgreSQL gather the statistics of the messages' table now,
// as autovacuum does in its time.
func (s *Store) Analyze(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "ANALYZE messages")
	return err
}

// Rows returns every row of every table of the store's schema, each as
// its text, by table; a payload's with the id of its message
// (storetest.Inspector).
func (s *Store) Rows(ctx context.Context) (map[string][]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT table_name FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`)
	tables, err := collect(nil, rows, err, "list tables", func(row scanner) (string, error) {
		var name string
		return name, row.Scan(&name)
	})
	if err != nil {
		return nil, err
	}
	return storetest.InspectRows(tables, func(table string) string { return pgx.Identifier{table}.Sanitize() },
		func(query string) ([][]any, error) {
			rows, err := s.pool.Query(ctx, query)
			return collect(nil, rows, err, "read", func(scanner) ([]any, error) { return rows.Values() })
		})
}

// BlobsLeft returns those of refs the blob area still holds: for large
// objects, those pg_largeobject_metadata lists (storetest.Inspector).
func (s *Store) BlobsLeft(ctx context.Context, refs []string) ([]string, error) {
	if _, ok := s.blobs.(largeObjects); ok {
		rows, err := s.pool.Query(ctx, `SELECT oid::text FROM pg_largeobject_metadata WHERE oid::text = ANY($1)`, refs)
		return collect(nil, rows, err, "list large objects", func(row scanner) (string, error) {
			var oid string
			return oid, row.Scan(&oid)
		})
	}
	return storetest.BlobsOpened(ctx, s.blobs, refs)
}
