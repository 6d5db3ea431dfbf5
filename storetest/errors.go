package storetest

import (
	"errors"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
)

// ClassifyCase is one failure of a database that a store's classifying
// function (what the store wraps its database's errors with) is fed:
// Provoke brings it about, from a real database where it can be had on
// demand, and Want is the code it must get.
type ClassifyCase struct {
	Name    string
	Provoke func(t *testing.T) error
	Want    courier.Code
}

// RunClassify checks a store's classifying function: the error of each
// case gets its code and the message shown for that code, and keeps its
// cause (and what the store was doing) for the log; an error that has a
// code keeps it, and nil stays nil.
func RunClassify(t *testing.T, classify func(what string, err error) error, cases []ClassifyCase) {
	shown := map[courier.Code]string{courier.CodeUnavailable: "the store is unavailable", courier.CodeInternal: "internal error"}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			cause := c.Provoke(t)
			if cause == nil {
				t.Fatal("provoked no error")
			}
			err := classify("do a thing", cause)
			if got := courier.ErrorCode(err); got != c.Want {
				t.Fatalf("classify(%v) has code %q, want %q", cause, got, c.Want)
			}
			if got := courier.ErrorMessage(err); got != shown[c.Want] {
				t.Errorf("message %q, want %q", got, shown[c.Want])
			}
			if !errors.Is(err, cause) || !strings.Contains(err.Error(), "do a thing: "+cause.Error()) {
				t.Errorf("%v: the cause %v is not kept for the log", err, cause)
			}
		})
	}
	t.Run("KeepsCodes", func(t *testing.T) {
		notFound := courier.Errorf(courier.CodeNotFound, "message %q not found", "x")
		if err := classify("read", notFound); err != notFound {
			t.Errorf("classify(not found) = %v, want it as it is", err)
		}
		if err := classify("read", nil); err != nil {
			t.Errorf("classify(nil) = %v", err)
		}
	})
}
