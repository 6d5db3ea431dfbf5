package postgres

import (
	"context"

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
