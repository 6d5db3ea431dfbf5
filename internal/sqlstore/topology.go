package sqlstore

import (
	"database/sql"

	courier "github.com/courier-gw/courier"
)

// TopologyObjectColumns are the columns of table topology_objects that
// ScanTopologyObject reads, in its order.
const TopologyObjectColumns = `kind, name, spec, version, updated_at, updated_by`

// ScanTopologyObject reads a row of TopologyObjectColumns into an object;
// a NULL spec is none.
func ScanTopologyObject(row Scanner) (courier.TopologyObject, error) {
	var o courier.TopologyObject
	var spec sql.NullString
	var updated Time
	err := row.Scan(&o.Kind, &o.Name, &spec, &o.Version, &updated, &o.UpdatedBy)
	if spec.Valid {
		o.Spec = []byte(spec.String)
	}
	o.UpdatedAt = updated.Time
	return o, err
}
