package sqlstore

import (
	"context"
	"fmt"

	courier "github.com/courier-gw/courier"
)

// Statement is one statement with its arguments.
type Statement struct {
	SQL  string
	Args []any
}

// Keyed is a table that keeps rows by a column.
type Keyed struct{ Table, Column string }

// ErasedByName are the tables of both stores that keep rows by a
// qualified name of a tenant's (docs/design.md §20): its endpoints' health,
// the numbering of its routes' ordering keys, its types in the catalog and
// the operational events of its endpoints and routes.
var ErasedByName = []Keyed{
	{"endpoint_health", "endpoint"},
	{"sequences", "route"},
	{"types", "type"},
	{"events", "subject"},
}

// EraseRest returns the statements that remove what an erased tenant
// keeps besides its messages, run once it has none left: the attempts and
// actions on its messages a late write left (an outcome is not applied to
// a message that is gone, so there should be none), the rows of the tables
// byTenant (keyed by the tenant's name in their column tenant), and those
// of byName (keyed by its qualified names). Topology changes and the
// switches of its endpoints are the audit log, and stay.
func EraseRest(tenant string, numbered bool, byName []Keyed, byTenant []string) []Statement {
	var out []Statement
	add := func(table string, where func(w *Where)) {
		w := Where{Numbered: numbered}
		where(&w)
		out = append(out, Statement{"DELETE FROM " + table + w.SQL(), w.Args})
	}
	add("attempts", func(w *Where) { w.TenantIDs("message_id", tenant, true) })
	// A message's actions have no object; their subject is its key, the
	// only subject with the tenant's id mark.
	add("actions", func(w *Where) { w.Raw("object = ''"); w.TenantIDs("subject", tenant, true) })
	for _, t := range byTenant {
		add(t, func(w *Where) { w.Add("tenant = ?", tenant) })
	}
	for _, k := range byName {
		add(k.Table, func(w *Where) { w.OwnedBy(k.Column, tenant) })
	}
	return out
}

// ErasedBulks returns the ids of the operations of ops that acted on
// tenant's messages (BulkOp.Tenant), which its erasure removes; the
// erasures themselves, this one and any other, stay as the record of who
// erased the tenant and when.
func ErasedBulks(ops []courier.BulkOp, tenant string) []string {
	var ids []string
	for _, op := range ops {
		if op.Kind != courier.ActionEraseTenant && op.Tenant() == tenant {
			ids = append(ids, op.ID)
		}
	}
	return ids
}

// CheckBulk refuses an operation a store cannot run: an erasure of a
// tenant that may not be erased.
func CheckBulk(op courier.BulkOp) error {
	if op.Kind == courier.ActionEraseTenant && !courier.Erasable(op.Filter.Tenant) {
		return courier.Errorf(courier.CodeInvalidArgument, "tenant %q cannot be erased", op.Filter.Tenant)
	}
	return nil
}

// SweepBlobs removes the blobs of store no message refers to, as the
// retention sweep does (courier.Blobs.Sweep): an erasure's last step
// before it is done, so that the blobs of the tenant's messages, which it
// deleted, go with them.
func SweepBlobs(ctx context.Context, store courier.Store) error {
	blobs := store.Blobs()
	if blobs == nil {
		return nil
	}
	if _, err := blobs.Sweep(ctx, store.ReferencedBlobs); err != nil {
		return fmt.Errorf("sweep the blobs of an erased tenant: %w", err)
	}
	return nil
}
