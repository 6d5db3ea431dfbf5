package api

import (
	"errors"
	"net/http"

	courier "github.com/courier-gw/courier"
)

// malformedError marks a request that could not be read at all (400), as
// opposed to a well-formed one with invalid values (422).
type malformedError struct{ err *courier.Error }

func (e malformedError) Error() string { return e.err.Error() }
func (e malformedError) Unwrap() error { return e.err }

func malformed(format string, args ...any) error {
	return malformedError{courier.Errorf(courier.CodeInvalidArgument, format, args...)}
}

// statuses are the HTTP statuses of the error codes but invalid_argument,
// which is 400 or 422 by how the request was wrong.
var statuses = map[courier.Code]int{
	courier.CodeNotFound:           http.StatusNotFound,
	courier.CodeConflict:           http.StatusConflict,
	courier.CodeFailedPrecondition: http.StatusPreconditionFailed,
	courier.CodeUnauthenticated:    http.StatusUnauthorized,
	courier.CodePermissionDenied:   http.StatusForbidden,
	courier.CodePayloadTooLarge:    http.StatusRequestEntityTooLarge,
	courier.CodeRateLimited:        http.StatusTooManyRequests,
	courier.CodeQuotaExceeded:      http.StatusTooManyRequests,
	courier.CodeStorageQuota:       http.StatusInsufficientStorage,
	courier.CodeUnavailable:        http.StatusServiceUnavailable,
	courier.CodeGone:               http.StatusGone,
	// 501, not 503: the server lacks the feature, and a client that
	// retries 503s would retry for ever. Not 409 either: no state of the
	// object asked for is in the way.
	courier.CodeNotConfigured: http.StatusNotImplemented,
}

// StatusOf maps an error to its HTTP status: the one place where codes
// become statuses (the dashboard shows errors with them too).
func StatusOf(err error) int {
	code := courier.ErrorCode(err)
	switch {
	case code == courier.CodeInvalidArgument && errors.As(err, new(malformedError)):
		return http.StatusBadRequest
	case code == courier.CodeInvalidArgument:
		return http.StatusUnprocessableEntity
	case statuses[code] != 0:
		return statuses[code]
	default:
		return http.StatusInternalServerError
	}
}

func errorInfo(err error) *ErrorInfo {
	return &ErrorInfo{Code: courier.ErrorCode(err), Message: courier.ErrorMessage(err)}
}

func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
		// The caller went away; nobody reads this answer. A write it asked
		// for may still have been committed: repeating it with the same id
		// is answered 200.
		s.opts.Logger.DebugContext(r.Context(), "request abandoned by the caller", "method", r.Method, "path", r.URL.Path)
		return
	}
	if code := courier.ErrorCode(err); code == courier.CodeQuotaExceeded || code == courier.CodeStorageQuota {
		s.noteRefusal(scopeOf(r).tenant, err)
	}
	status := StatusOf(err)
	if status >= 500 && !errors.As(err, new(limitedError)) { // a refusal by Admission is no failure
		s.opts.Logger.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	if v := retryAfter(err); v != "" {
		w.Header().Set("Retry-After", v)
	} else if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	info := errorInfo(err)
	info.Message = scopeOf(r).showText(info.Message)
	writeJSON(w, status, ErrorBody{Error: *info})
}

func conflictError(id string) error {
	return courier.Errorf(courier.CodeConflict, "message %q exists with other content", id)
}
