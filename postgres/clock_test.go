package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/courier-gw/courier/internal/testkit/pgtest"
)

type shifted time.Duration

func (s shifted) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// A node's clock 30 s slow or fast reads the database's time once its
// offset is measured, within the round trip of the reading.
func TestClockReadsTheDatabasesTime(t *testing.T) {
	s := pgtest.Open(t)
	for _, shift := range []time.Duration{-30 * time.Second, 30 * time.Second} {
		c := s.Clock(shifted(shift))
		if _, _, at := c.Offset(); !at.IsZero() {
			t.Fatalf("measured at %v before any measurement", at)
		}
		if err := c.Measure(context.Background()); err != nil {
			t.Fatal(err)
		}
		offset, uncertainty, at := c.Offset()
		if at.IsZero() || uncertainty < 0 {
			t.Fatalf("offset %v ± %v measured at %v", offset, uncertainty, at)
		}
		// The database runs on this machine: its clock is this one's.
		if d := (offset + shift).Abs(); d > time.Second {
			t.Errorf("clock %v off: offset %v, want about %v", shift, offset, -shift)
		}
		if d := c.Now().Sub(time.Now()).Abs(); d > time.Second {
			t.Errorf("clock %v off reads %v away from the database's time", shift, d)
		}
	}
}
