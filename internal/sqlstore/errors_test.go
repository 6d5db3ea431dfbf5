package sqlstore

import (
	"errors"
	"fmt"
	"testing"

	courier "github.com/courier-gw/courier"
)

func TestClassify(t *testing.T) {
	busy := errors.New("busy")
	broken := errors.New("broken")
	notFound := courier.Errorf(courier.CodeNotFound, "message %q not found", "m")
	moment := func(err error) bool { return errors.Is(err, busy) }
	tests := []struct {
		name        string
		err         error
		wantCode    courier.Code
		wantMessage string
	}{
		{"nil", nil, "", ""},
		{"of the moment", fmt.Errorf("exec: %w", busy), courier.CodeUnavailable, "the store is unavailable"},
		{"a fault", broken, courier.CodeInternal, "internal error"},
		{"a code of its own", fmt.Errorf("read: %w", notFound), courier.CodeNotFound, `message "m" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Classify("read m", tt.err, moment)
			if courier.ErrorCode(err) != tt.wantCode || courier.ErrorMessage(err) != tt.wantMessage {
				t.Fatalf("Classify(%v) = %q %q, want %q %q", tt.err, courier.ErrorCode(err), courier.ErrorMessage(err), tt.wantCode, tt.wantMessage)
			}
			if tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("%v does not keep its cause %v", err, tt.err)
			}
		})
	}
	if err := Classify("read m", broken, moment); err.Error() != "internal: internal error: read m: broken" {
		t.Errorf("the log reads %q, want what was done and the cause", err)
	}
}

func TestSays(t *testing.T) {
	closed := errors.New("closed pool")
	tests := []struct {
		err  error
		want bool
	}{
		{closed, true},
		{fmt.Errorf("ping: %w", fmt.Errorf("acquire: %w", closed)), true},
		{errors.New("closed pool!"), false},
		{fmt.Errorf("ping: %v", closed), false}, // its text, but not the error
		{nil, false},
	}
	for _, tt := range tests {
		if got := Says(tt.err, "closed pool"); got != tt.want {
			t.Errorf("Says(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

func TestNotFound(t *testing.T) {
	for _, err := range []error{MessageNotFound("m"), BulkNotFound("b")} {
		if courier.ErrorCode(err) != courier.CodeNotFound {
			t.Errorf("%v has code %q, want not_found", err, courier.ErrorCode(err))
		}
	}
}
