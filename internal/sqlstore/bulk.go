package sqlstore

import (
	"encoding/json"
	"fmt"

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
