package sqlstore

import (
	"errors"
	"fmt"

	courier "github.com/courier-gw/courier"
)

// Classify wraps a failure of a store's database with what the store was
// doing: as unavailable (the caller may try again later) when unavailable
// says the failure is the database's state of the moment, else as
// internal (a fault that trying again will not mend), with its cause kept
// for the log. Which failures are of the moment depends on the driver;
// each store has its own unavailable. An error that has its code already
// keeps it; a nil error is nil.
func Classify(what string, err error, unavailable func(error) bool) error {
	var ce *courier.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err
	case unavailable(err):
		return courier.Unavailable("the store", fmt.Errorf("%s: %w", what, err))
	default:
		return courier.Internal(fmt.Errorf("%s: %w", what, err))
	}
}

// Says reports whether err, or an error it wraps, has exactly the text
// msg: for the errors a driver has but does not export.
func Says(err error, msg string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == msg {
			return true
		}
	}
	return false
}

// MessageNotFound is the answer to a read of a message, or a delivery (by
// its Key), that is not stored.
func MessageNotFound(key string) error {
	if id, sub := courier.ParseKey(key); sub != "" {
		return courier.Errorf(courier.CodeNotFound, "message %q has no delivery to subscription %q", id, sub)
	}
	return courier.Errorf(courier.CodeNotFound, "message %q not found", key)
}

// BulkNotFound is the answer to a read of a bulk operation that is not
// stored.
func BulkNotFound(id string) error {
	return courier.Errorf(courier.CodeNotFound, "operation %q not found", id)
}
