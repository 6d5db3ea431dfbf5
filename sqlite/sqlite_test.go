package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/storetest"
)

func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) courier.Store { return sqlitetest.Open(t) })
}

// A write whose caller stopped waiting is answered unavailable (503: try
// again), still saying whose context it was, not as an internal fault. (With
// its context ended before the call, a write may also be taken and stored:
// each try either succeeds or is refused so.)
func TestWriteGivenUpIsUnavailable(t *testing.T) {
	s := sqlitetest.Open(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	refused := 0
	for i := range 50 {
		m := &courier.Message{ID: fmt.Sprintf("late-%d", i), Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		_, err := s.Ingest(ctx, []*courier.Message{m})
		if err == nil {
			continue
		}
		refused++
		if courier.ErrorCode(err) != courier.CodeUnavailable || !errors.Is(err, context.Canceled) {
			t.Fatalf("ingest with its context ended: %v (code %s), want unavailable and context.Canceled", err, courier.ErrorCode(err))
		}
	}
	if refused == 0 {
		t.Fatal("no ingest of 50 with an ended context was refused")
	}
}
