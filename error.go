package courier

import (
	"errors"
	"fmt"
)

// Code classifies an error for callers of the API. The codes are the ones of
// the HTTP contract; api/ maps each to one HTTP status.
type Code string

// The error codes of the API contract.
const (
	CodeInvalidArgument Code = "invalid_argument"
	CodeNotFound        Code = "not_found"
	CodeConflict        Code = "conflict"
	// CodeFailedPrecondition: a conditional change (If-Match) found the
	// object at another version than the caller read.
	CodeFailedPrecondition Code = "failed_precondition"
	CodeUnauthenticated    Code = "unauthenticated"
	CodePermissionDenied   Code = "permission_denied"
	CodePayloadTooLarge    Code = "payload_too_large"
	CodeRateLimited        Code = "rate_limited"
	// CodeQuotaExceeded: a tenant's quota of messages not yet finished
	// (max_queued) would be exceeded (429); the message names the quota.
	CodeQuotaExceeded Code = "quota_exceeded"
	// CodeStorageQuota: a tenant's quota of stored bytes (max_bytes) would
	// be exceeded (507); the message names the quota.
	CodeStorageQuota Code = "storage_quota"
	// CodeUnavailable: a dependency failed for the moment; trying again
	// later may succeed.
	CodeUnavailable Code = "unavailable"
	// CodeNotConfigured: this server lacks the feature asked for (no
	// configuration file to reload, no bulk operations, no registry
	// client): trying again will not help until its configuration changes.
	CodeNotConfigured Code = "not_configured"
	// CodeGone: what was asked for existed and was removed for good (a
	// message's payload erased on request, 410); the message says when
	// and by whom.
	CodeGone     Code = "gone"
	CodeInternal Code = "internal"
)

// Error is an error meant to be shown to the caller: a code and a message
// that is safe to display. Any other error is internal and reaches the caller
// only as "internal error".
type Error struct {
	Code    Code
	Message string
	Err     error // the cause, for the log; never shown to the caller
	// Quota names the tenant's quota that refused the request (QuotaMaxQueued
	// and the others), for a refusal by one; it is empty otherwise.
	Quota string
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Unavailable wraps a failure of a dependency (the store, the disk) that
// the caller may retry later.
func Unavailable(what string, err error) *Error {
	return &Error{Code: CodeUnavailable, Message: what + " is unavailable", Err: err}
}

// Internal wraps a failure that should not happen (a fault of the program
// or of its data, not of the moment): the caller sees only "internal
// error", the log the cause, and trying again will not help.
func Internal(err error) *Error {
	return &Error{Code: CodeInternal, Message: "internal error", Err: err}
}

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none. A nil error has no code.
func ErrorCode(err error) Code { return shown(err).Code }

// ErrorMessage returns the displayable message of the first *Error in err's
// chain, or "internal error" when there is none.
func ErrorMessage(err error) string { return shown(err).Message }

// RefusedBy returns the tenant's quota that refused err (its first *Error's
// Quota), or "" when no quota did.
func RefusedBy(err error) string { return shown(err).Quota }

// shown is what the caller may see of err: the first *Error in its chain,
// an internal error when there is none, and nothing for a nil error.
func shown(err error) Error {
	var e *Error
	switch {
	case err == nil:
		return Error{}
	case errors.As(err, &e):
		return *e
	default:
		return *Internal(nil)
	}
}
