package api

import (
	"errors"
	"net/http"
	"testing"

	courier "github.com/courier-gw/courier"
)

func TestStatusOf(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{malformed("the body is not JSON"), http.StatusBadRequest},
		{courier.Errorf(courier.CodeInvalidArgument, "route is required"), http.StatusUnprocessableEntity},
		{courier.Errorf(courier.CodeNotFound, "x"), http.StatusNotFound},
		{courier.Errorf(courier.CodeConflict, "x"), http.StatusConflict},
		{courier.Errorf(courier.CodeUnauthenticated, "x"), http.StatusUnauthorized},
		{courier.Errorf(courier.CodePermissionDenied, "x"), http.StatusForbidden},
		{courier.Errorf(courier.CodePayloadTooLarge, "x"), http.StatusRequestEntityTooLarge},
		{limitedError{err: courier.Errorf(courier.CodeRateLimited, "x")}, http.StatusTooManyRequests},
		{courier.Unavailable("the store", errors.New("down")), http.StatusServiceUnavailable},
		{courier.Errorf(courier.CodeInternal, "x"), http.StatusInternalServerError},
		{errors.New("disk on fire"), http.StatusInternalServerError},
		{courier.Errorf("no_such_code", "x"), http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got := StatusOf(tt.err); got != tt.want {
			t.Errorf("StatusOf(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
