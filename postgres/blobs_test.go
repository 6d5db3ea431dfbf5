package postgres_test

import (
	"context"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/pgtest"
)

// Large objects being written hold a connection each, so that few may be
// at once: the store keeps the rest of its pool (8 connections here, 2
// writers) for everything else, and a writer past them waits for one to
// finish, or is refused as unavailable when its caller stops waiting.
func TestLargeObjectWritersAreBounded(t *testing.T) {
	s := pgtest.Open(t)
	ctx := context.Background()
	var open []courier.BlobWriter
	for range 2 {
		w, err := s.Blobs().Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, w)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := s.Blobs().Create(short); courier.ErrorCode(err) != courier.CodeUnavailable {
		t.Fatalf("a third writer at once: %v, want unavailable", err)
	}
	// Meanwhile the store still ingests.
	m := &courier.Message{ID: "small", Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
	if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
		t.Fatalf("ingest while blobs are written: %v", err)
	}
	open[0].Close()
	w, err := s.Blobs().Create(ctx)
	if err != nil {
		t.Fatalf("a writer once one finished: %v", err)
	}
	w.Close()
	open[1].Close()
}
