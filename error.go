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
	CodeInvalidArgument  Code = "invalid_argument"
	CodeNotFound         Code = "not_found"
	CodeConflict         Code = "conflict"
	CodeUnauthenticated  Code = "unauthenticated"
	CodePermissionDenied Code = "permission_denied"
	CodePayloadTooLarge  Code = "payload_too_large"
	CodeRateLimited      Code = "rate_limited"
	CodeUnavailable      Code = "unavailable"
	CodeInternal         Code = "internal"
)

// Error is an error meant to be shown to the caller: a code and a message
// that is safe to display. Any other error is internal and reaches the caller
// only as "internal error".
type Error struct {
	Code    Code
	Message string
}

// Error implements the error interface.
func (e *Error) Error() string { return fmt.Sprintf("courier: %s: %s", e.Code, e.Message) }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none. A nil error has no code.
func ErrorCode(err error) Code {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Code
	default:
		return CodeInternal
	}
}

// ErrorMessage returns the displayable message of the first *Error in err's
// chain, or "internal error" when there is none.
func ErrorMessage(err error) string {
	var e *Error
	switch {
	case err == nil:
		return ""
	case errors.As(err, &e):
		return e.Message
	default:
		return "internal error"
	}
}
