package sqlstore

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"

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

// EraseTx is what a store gives the erasure of a message's payload, in the
// transaction that erases it.
type EraseTx interface {
	// Deliveries reads the rows of message id, by subscription, and holds
	// them to the end of the transaction.
	Deliveries(id string) ([]*courier.Message, error)
	// Discard writes next, the erasure's discard of delivery d, which was
	// live.
	Discard(d, next *courier.Message) error
	// RecordAction records an operator action.
	RecordAction(courier.Action) error
	// ErasePayload empties the payload of message id, drops its blob,
	// digest and step responses from its rows and marks them erased as a
	// says (who, when and, as its Detail, why).
	ErasePayload(id string, a courier.Action) error
}

// Erase erases the payload of message id and discards its deliveries that
// are live, with the actions that say so (ErasureActions), in tx. It
// returns the rows as they are now, tombstones, and the blob that kept the
// payload ("" when there was none), which the store removes; a message
// erased already is found as its tombstone, with no blob.
func Erase(tx EraseTx, id string, a courier.Action) ([]*courier.Message, string, error) {
	ds, err := tx.Deliveries(id)
	switch {
	case err != nil:
		return nil, "", err
	case len(ds) == 0:
		return nil, "", MessageNotFound(id)
	case ds[0].Erased != nil:
		return ds, "", nil // erased already: the same tombstone
	}
	out := make([]*courier.Message, len(ds))
	var blob string
	for i, d := range ds {
		next, discarded := courier.Erase(d, courier.Erasure{At: a.At, By: a.Who, Reason: a.Detail})
		if discarded {
			if err := tx.Discard(d, next); err != nil {
				return nil, "", err
			}
		}
		for _, a := range ErasureActions(d, a, discarded) {
			if err := tx.RecordAction(a); err != nil {
				return nil, "", err
			}
		}
		blob, out[i] = cmp.Or(blob, d.Blob), next
	}
	if err := tx.ErasePayload(id, a); err != nil {
		return nil, "", err
	}
	return out, blob, nil
}

// RemoveErasedBlob removes blob, the blob of message id's erased payload,
// from blobs once the erasure is committed. No message refers to it any
// more, so a sweep would take it too: a failure is logged and left to the
// next sweep.
func RemoveErasedBlob(ctx context.Context, blobs courier.Blobs, logger *slog.Logger, id, blob string) {
	if blob == "" || blobs == nil {
		return
	}
	if err := blobs.Remove(ctx, blob); err != nil {
		logger.Warn("the blob of an erased payload is left to the next sweep", "id", id, "blob", blob, "err", err)
	}
}
