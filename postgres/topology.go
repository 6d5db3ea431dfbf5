package postgres

import (
	"context"
	"errors"
	"strconv"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
)

// TopologyVersion returns the version of the topology held in the store.
func (s *Store) TopologyVersion(ctx context.Context) (int64, error) {
	var version int64
	if err := s.pool.QueryRow(ctx, `SELECT version FROM topology_version`).Scan(&version); err != nil {
		return 0, classify("read the topology version", err)
	}
	return version, nil
}

// TopologyChanges returns the objects written after version since and the
// version they bring the reader to. The version is read first, and the
// objects up to it, in one snapshot (repeatable read): a version commits
// with its objects, and versions commit in order, so the answer holds every
// change up to it, none of them overwritten by a later one meanwhile.
func (s *Store) TopologyChanges(ctx context.Context, since int64) ([]courier.TopologyObject, int64, error) {
	var objects []courier.TopologyObject
	var version int64
	err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT version FROM topology_version`).Scan(&version); err != nil {
			return classify("read the topology version", err)
		}
		rows, err := tx.Query(ctx, `SELECT `+sqlstore.TopologyObjectColumns+` FROM topology_objects
			WHERE version > $1 AND version <= $2 ORDER BY version, kind, name`, since, version)
		objects, err = collect(nil, rows, err, "read the topology", sqlstore.ScanTopologyObject)
		return err
	})
	if err != nil {
		return nil, 0, classify("read the topology", err)
	}
	return objects, version, nil
}

// WriteTopology writes the objects and records the actions as version
// base+1, in one transaction. Moving the version row from base takes its
// lock, so writers of every node take turns: one that waited finds the row
// moved and writes nothing. The other nodes are notified on commit.
func (s *Store) WriteTopology(ctx context.Context, base int64, objects []courier.TopologyObject, actions []courier.Action) (int64, error) {
	var version int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE topology_version SET version = version + 1 WHERE version = $1 RETURNING version`, base).Scan(&version)
		if errors.Is(err, pgx.ErrNoRows) {
			return courier.ErrTopologyMoved
		}
		if err != nil {
			return classify("move the topology version", err)
		}
		b := &pgx.Batch{}
		for _, o := range objects {
			var spec *string // NULL: a tombstone
			if o.Spec != nil {
				text := string(o.Spec)
				spec = &text
			}
			b.Queue(`INSERT INTO topology_objects (kind, name, spec, version, updated_at, updated_by)
				VALUES ($1, $2, $3, $4, $5, $6)
				ON CONFLICT (kind, name) DO UPDATE SET spec = excluded.spec, version = excluded.version,
				updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
				string(o.Kind), o.Name, spec, version, o.UpdatedAt, o.UpdatedBy)
		}
		for _, a := range actions {
			a.Version = version
			b.Queue(insertActionSQL, actionArgs(a)...)
		}
		b.Queue(`SELECT pg_notify($1, $2)`, s.topologyChannel, strconv.FormatInt(version, 10))
		return classify("write the topology", tx.SendBatch(ctx, b).Close())
	})
	if errors.Is(err, courier.ErrTopologyMoved) {
		return 0, err
	}
	if err != nil {
		return 0, classify("write the topology", err)
	}
	return version, nil
}

// ListenTopology calls changed with the version of each topology change
// made on any node (this one's too), until ctx ends or the store is
// closed. It keeps a connection of its own and reconnects after a failure;
// after each (re)connect it calls changed with 0: a change may have been
// missed, look again.
func (s *Store) ListenTopology(ctx context.Context, changed func(version int64)) {
	select {
	case <-s.quit:
		return
	default:
	}
	s.bg.Add(1)
	go s.listenLoop(ctx, s.topologyChannel, "topology changes", func() { changed(0) }, func(payload string) {
		version, err := strconv.ParseInt(payload, 10, 64)
		if err != nil {
			version = 0 // not one of ours: look again
		}
		changed(version)
	})
}
