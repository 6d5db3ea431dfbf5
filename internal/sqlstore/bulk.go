package sqlstore

import (
	"encoding/json"
	"fmt"

	courier "github.com/courier-gw/courier"
)

// EncodeFilter is how stores keep the filter of a bulk operation: JSON.
func EncodeFilter(f courier.MessageFilter) (string, error) {
	b, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("encode filter: %w", err)
	}
	return string(b), nil
}

// DecodeFilter reads what EncodeFilter wrote.
func DecodeFilter(b []byte) (courier.MessageFilter, error) {
	var f courier.MessageFilter
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("filter: %w", err)
	}
	return f, nil
}

// SameBulk reports whether a stored bulk operation has the settings of op,
// which would start under the same id: starting it again is then a repeat,
// else a conflict.
func SameBulk(stored, op courier.BulkOp) bool {
	a, errA := EncodeFilter(stored.Filter)
	b, errB := EncodeFilter(op.Filter)
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
	filter, err := EncodeFilter(op.Filter)
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
