package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	courier "github.com/courier-gw/courier"
)

// settings are what a bulk operation does to which messages, as stores
// keep them (the column filter): the filter's fields, and a replay's.
type settings struct {
	courier.MessageFilter
	Replay  *courier.Replay    `json:",omitempty"`
	Redrive *courier.RedriveOf `json:",omitempty"`
}

// EncodeSettings is how stores keep the filter of a bulk operation, and
// what a replay does: JSON.
func EncodeSettings(op courier.BulkOp) (string, error) {
	b, err := json.Marshal(settings{op.Filter, op.Replay, op.Redrive})
	if err != nil {
		return "", fmt.Errorf("encode filter: %w", err)
	}
	return string(b), nil
}

// DecodeSettings reads what EncodeSettings wrote into op.
func DecodeSettings(b []byte, op *courier.BulkOp) error {
	var s settings
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("filter: %w", err)
	}
	op.Filter, op.Replay, op.Redrive = s.MessageFilter, s.Replay, s.Redrive
	return nil
}

// SameBulk reports whether a stored bulk operation has the settings of op,
// which would start under the same id: starting it again is then a repeat,
// else a conflict.
func SameBulk(stored, op courier.BulkOp) bool {
	a, errA := EncodeSettings(stored)
	b, errB := EncodeSettings(op)
	return stored.Kind == op.Kind && stored.Route == op.Route && errA == nil && errB == nil && a == b
}

// StartBulk records op, bounded by the newest message at the time, unless
// an operation has its id already, and returns the operation stored under
// the id. inTx runs a transaction of the store; in it, insert adds op with
// its filter encoded unless the id is taken, and read reads the operation
// that has the id. Starting op again is a repeat that finds it as it
// stands; starting another under its id is a conflict.
func StartBulk[Tx any](op courier.BulkOp, inTx func(func(Tx) error) error,
	insert func(tx Tx, filter string) error, read func(Tx) (courier.BulkOp, error)) (courier.BulkOp, error) {
	if err := CheckBulk(op); err != nil {
		return courier.BulkOp{}, err
	}
	filter, err := EncodeSettings(op)
	if err != nil {
		return courier.BulkOp{}, err
	}
	var out courier.BulkOp
	err = inTx(func(tx Tx) error {
		if err := insert(tx, filter); err != nil {
			return err
		}
		stored, err := read(tx)
		if err != nil {
			return err
		}
		if !SameBulk(stored, op) {
			return courier.Errorf(courier.CodeConflict, "operation %q exists with other settings", op.ID)
		}
		out = stored
		return nil
	})
	if err != nil {
		return courier.BulkOp{}, err
	}
	return out, nil
}

// BulkTx is what a store gives the batches of bulk operations: in the
// transaction of one batch, the read and write of the operation's row and
// the batch of each kind of operation, which moves cursor on past what it
// looked at.
type BulkTx interface {
	// LockBulk reads operation id (BulkNotFound when there is none) and
	// holds it to the end of the transaction: nodes that resume the same
	// operation take turns, and never do a batch twice.
	LockBulk(id string) (courier.BulkOp, error)
	// EraseBatch deletes up to limit of tenant's messages and deliveries,
	// whatever their state, with their attempts, actions and payloads (a
	// blob goes at the sweep, once no row names it): the next after cursor
	// in ingest order (moved on to the last), and when those run out, any
	// before it (one that came in behind the cursor). It reports how many
	// it deleted.
	EraseBatch(tenant string, cursor *int64, limit int) (int, error)
	// EraseRest removes what an erased tenant without messages keeps
	// besides them (EraseRest), and the bulk operations on its messages
	// (ErasedBulks).
	EraseRest(tenant string) error
	// ReplayBatch looks at the next published messages of a replay (their
	// leads, which keep the payload) after cursor, up to maxSeq, and gives
	// the replay's subscription a delivery of each it wants (ReplayBatch).
	ReplayBatch(r *courier.Replay, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error)
	// FilterBatch resubmits or discards the next of the messages op's
	// filter matches after cursor, up to maxSeq (BulkBatch).
	FilterBatch(op courier.BulkOp, cursor *int64, maxSeq int64, limit int, now time.Time) (n int, finished bool, err error)
	// RecordProgress writes where operation id stands after a batch that
	// did n messages: its cursor, its bound, whether it is done, when.
	RecordProgress(id string, n int, cursor, maxSeq int64, done bool, now time.Time) error
}

// RunBulk does the next batch of up to limit messages of operation id, in
// a transaction of inTx. An erasure that finds the tenant without
// messages sweeps the blobs of store before its last transaction, which
// finds it so again and removes the rest (a message that came meanwhile is
// erased first).
func RunBulk(ctx context.Context, store courier.Store, inTx func(func(BulkTx) error) error,
	id string, limit int, now time.Time) (courier.BulkOp, error) {
	out, sweep, err := runBulk(inTx, id, limit, now, false)
	if err != nil || !sweep {
		return out, err
	}
	if err := SweepBlobs(ctx, store); err != nil {
		return courier.BulkOp{}, err
	}
	out, _, err = runBulk(inTx, id, limit, now, true)
	return out, err
}

// runBulk does the next batch of an operation in one transaction. For an
// erasure that finds no message of its tenant left, it reports sweep
// unless finish is set, when it removes the rest and is done.
func runBulk(inTx func(func(BulkTx) error) error, id string, limit int, now time.Time, finish bool) (courier.BulkOp, bool, error) {
	var out courier.BulkOp
	var sweep bool
	err := inTx(func(tx BulkTx) error {
		sweep = false
		op, err := tx.LockBulk(id)
		if err != nil {
			return err
		}
		out = op
		if op.Done {
			return nil
		}
		cursor, maxSeq := op.Position, op.End
		var n int
		var finished bool
		switch {
		case op.Kind == courier.ActionEraseTenant:
			n, err = tx.EraseBatch(op.Filter.Tenant, &cursor, limit)
			maxSeq = max(maxSeq, cursor) // messages that came after it began are erased too
			if err == nil && n == 0 {
				if !finish {
					sweep = true
				} else {
					err = tx.EraseRest(op.Filter.Tenant)
					finished = err == nil
				}
			}
		case op.Replay != nil:
			n, finished, err = tx.ReplayBatch(op.Replay, &cursor, maxSeq, limit, now)
		default:
			n, finished, err = tx.FilterBatch(op, &cursor, maxSeq, limit, now)
		}
		if err != nil {
			return err
		}
		if err := tx.RecordProgress(id, n, cursor, maxSeq, finished, now); err != nil {
			return err
		}
		out.Count += n
		out.Done, out.Position, out.End = finished, cursor, maxSeq
		out.UpdatedAt = now
		return nil
	})
	if err != nil {
		// The transaction may still be running (its caller gave up
		// waiting): out is not read.
		return courier.BulkOp{}, false, err
	}
	return out, sweep, nil
}
