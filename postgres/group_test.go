package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
)

// Concurrent ingests share statements, and each call is answered with its
// own results: a repeat is told it exists, a conflict that it conflicts, and
// a message the database refuses (a NUL in a header, which jsonb cannot
// hold) fails its own call only, as internal: trying it again cannot help.
func TestConcurrentIngestsShareCommits(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	msg := func(id, body string, headers map[string]string) *courier.Message {
		m := &courier.Message{ID: id, Type: "t", Route: "r", Payload: []byte(body), ContentType: "text/plain", Headers: headers}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		return m
	}
	if _, err := s.Ingest(ctx, []*courier.Message{msg("taken", "first", nil)}); err != nil {
		t.Fatal(err)
	}
	const calls = 400
	type answer struct {
		status courier.IngestStatus
		err    error
	}
	answers := make([]answer, calls)
	// While every connection is taken, the calls queue up; the committers
	// then find them waiting and group them, however fast the machine.
	release, err := s.HoldConnections(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			var m *courier.Message
			switch {
			case i == 7:
				m = msg("bad", "x", map[string]string{"X-Nul": "a\x00b"})
			case i%50 == 3:
				m = msg("taken", "first", nil) // a repeat
			case i%50 == 4:
				m = msg("taken", "other", nil) // a conflict
			default:
				m = msg(fmt.Sprintf("m-%03d", i), "x", nil)
			}
			res, err := s.Ingest(ctx, []*courier.Message{m})
			if err == nil {
				answers[i].status = res[0].Status
			}
			answers[i].err = err
		})
	}
	for deadline := time.Now().Add(10 * time.Second); !s.IngestQueueFull() && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	release()
	wg.Wait()
	for i, a := range answers {
		var want courier.IngestStatus
		switch {
		case i == 7:
			if courier.ErrorCode(a.err) != courier.CodeInternal {
				t.Errorf("call %d (a NUL in a header): %v; want an internal error of its own", i, a.err)
			}
			continue
		case i%50 == 3:
			want = courier.IngestExists
		case i%50 == 4:
			want = courier.IngestConflict
		default:
			want = courier.IngestCreated
		}
		if a.err != nil || a.status != want {
			t.Errorf("call %d: %v, %v; want %v", i, a.status, a.err, want)
		}
	}
	if _, err := s.Message(ctx, "bad"); err == nil {
		t.Error("the refused message was stored")
	}
	if got := s.GroupedStatements(); got == 0 {
		t.Error("no statement served more than one call: the calls were never grouped")
	}
}
