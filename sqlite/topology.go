package sqlite

import (
	"context"
	"database/sql"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// TopologyVersion returns the version of the topology held in the store.
func (s *Store) TopologyVersion(ctx context.Context) (int64, error) {
	var version int64
	if err := s.rdb.QueryRowContext(ctx, `SELECT version FROM topology_version`).Scan(&version); err != nil {
		return 0, classify("read the topology version", err)
	}
	return version, nil
}

// TopologyChanges returns the objects written after version since and the
// version they bring the reader to, both read in one transaction (one
// snapshot of the WAL), so that the objects are those of that version.
func (s *Store) TopologyChanges(ctx context.Context, since int64) ([]courier.TopologyObject, int64, error) {
	tx, err := s.rdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, classify("read the topology", err)
	}
	defer tx.Rollback()
	var version int64
	if err := tx.QueryRowContext(ctx, `SELECT version FROM topology_version`).Scan(&version); err != nil {
		return nil, 0, classify("read the topology version", err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+sqlstore.TopologyObjectColumns+` FROM topology_objects
		WHERE version > ? AND version <= ? ORDER BY version, kind, name`, since, version)
	objects, err := collect(nil, rows, err, "read the topology", sqlstore.ScanTopologyObject)
	if err != nil {
		return nil, 0, err
	}
	return objects, version, nil
}

// WriteTopology writes the objects and records the actions as version
// base+1, through the one writer, and returns once they are on disk. A
// write whose base is no longer the version writes nothing, and leaves the
// group it shares to commit.
func (s *Store) WriteTopology(ctx context.Context, base int64, objects []courier.TopologyObject, actions []courier.Action) (int64, error) {
	version := base + 1
	var moved bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.Exec(`UPDATE topology_version SET version = ? WHERE version = ?`, version, base)
		if err != nil {
			return classify("move the topology version", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return classify("move the topology version", err)
		}
		if moved = n == 0; moved {
			return nil
		}
		for _, o := range objects {
			var spec any // NULL: a tombstone
			if o.Spec != nil {
				spec = string(o.Spec)
			}
			if _, err := tx.Exec(`INSERT INTO topology_objects (kind, name, spec, version, updated_at, updated_by)
				VALUES (?, ?, ?, ?, ?, ?)
				ON CONFLICT (kind, name) DO UPDATE SET spec = excluded.spec, version = excluded.version,
				updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
				string(o.Kind), o.Name, spec, version, micros(o.UpdatedAt), o.UpdatedBy); err != nil {
				return classify("write "+string(o.Kind)+" "+o.Name, err)
			}
		}
		for _, a := range actions {
			a.Version = version
			if err := insertAction(tx, a); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err != nil:
		return 0, err
	case moved:
		return 0, courier.ErrTopologyMoved
	}
	return version, nil
}
