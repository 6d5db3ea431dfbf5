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
