package engine_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/clocktest"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
)

func TestRetentionPurgesOnlyOldTerminalMessages(t *testing.T) {
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	defer store.Close()
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	ingest := func(id string) {
		m := &courier.Message{ID: id, Type: "t", Route: "r", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, start)
		if _, err := store.Ingest(ctx, []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 23; i++ {
		ingest(fmt.Sprintf("old-%d", i))
		if _, err := store.Discard(ctx, fmt.Sprintf("old-%d", i), courier.Action{At: start, Who: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	ingest("young")
	if _, err := store.Discard(ctx, "young", courier.Action{At: start.Add(6 * 24 * time.Hour), Who: "t"}); err != nil {
		t.Fatal(err)
	}
	ingest("waiting")

	clock := clocktest.New(start.Add(7*24*time.Hour + time.Second))
	r := engine.NewRetention(store, 7*24*time.Hour, engine.RetentionOptions{Batch: 5, Clock: clock})
	if n := r.Sweep(ctx); n != 23 {
		t.Fatalf("swept %d, want the 23 old terminal messages in batches of 5", n)
	}
	for _, id := range []string{"young", "waiting"} {
		if _, err := store.Message(ctx, id); err != nil {
			t.Errorf("%s was purged: %v", id, err)
		}
	}

	// As a service: Start sweeps at once, Stop returns.
	clock.Set(start.Add(14 * 24 * time.Hour))
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := store.Message(ctx, "young"); courier.ErrorCode(err) == courier.CodeNotFound {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the running service did not purge the message that became old")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := r.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Message(ctx, "waiting"); err != nil {
		t.Errorf("a queued message was purged: %v", err)
	}
}

// The purge takes the blobs of the messages it removes with it: the blob
// area's size returns to zero.
func TestRetentionRemovesBlobs(t *testing.T) {
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	defer store.Close()
	ctx := context.Background()
	start := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		sp := courier.NewSpool(ctx, store.Blobs(), 0)
		if _, err := sp.Write(make([]byte, courier.InlineMax+1+i)); err != nil {
			t.Fatal(err)
		}
		m := &courier.Message{ID: fmt.Sprintf("large-%d", i), Type: "t", Route: "r", ContentType: "application/octet-stream"}
		if err := sp.Finish(m); err != nil {
			t.Fatal(err)
		}
		courier.Accept(m, courier.DefaultPolicy(), false, start)
		if _, err := store.Ingest(ctx, []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
		sp.Close()
		if i < 2 {
			if _, err := store.Discard(ctx, m.ID, courier.Action{At: start, Who: "t"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n, _, err := store.Blobs().Usage(ctx); err != nil || n != 3 {
		t.Fatalf("blob area holds %d blobs (%v), want 3", n, err)
	}
	r := engine.NewRetention(store, 24*time.Hour, engine.RetentionOptions{Clock: clocktest.New(start.Add(48 * time.Hour))})
	if n := r.Sweep(ctx); n != 2 {
		t.Fatalf("purged %d, want the 2 discarded", n)
	}
	n, size, err := store.Blobs().Usage(ctx)
	if err != nil || n != 1 || size != courier.InlineMax+3 {
		t.Fatalf("after the purge the blob area holds %d blobs of %d bytes (%v); want the 1 of the queued message", n, size, err)
	}
}

func TestRetentionStartStopStress(t *testing.T) {
	r := engine.NewRetention(mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db")), time.Hour, engine.RetentionOptions{Interval: time.Millisecond})
	startstoptest.Stress(t, r)
}

// A tenant with a retention of its own keeps its finished messages that
// long, longer or shorter than the server's; the others keep the server's.
func TestRetentionPerTenant(t *testing.T) {
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	defer store.Close()
	ctx := context.Background()
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	finished := map[string]time.Duration{ // id → how long ago it finished
		"old": 10 * day, "recent": 2 * day,
		"acme~old": 40 * day, "acme~kept": 10 * day,
		"beta~old": 2 * day, "beta~recent": time.Hour,
	}
	for id, ago := range finished {
		route := courier.Qualify(courier.TenantOfID(id), "r")
		m := &courier.Message{ID: id, Type: "t", Route: route, Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, now.Add(-ago))
		if _, err := store.Ingest(ctx, []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Discard(ctx, id, courier.Action{At: now.Add(-ago), Who: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	tenants := map[string]*courier.Tenant{"acme": {Name: "acme", Retention: 30 * day}, "beta": {Name: "beta", Retention: day}}
	r := engine.NewRetention(store, 7*day, engine.RetentionOptions{Clock: clocktest.New(now),
		Tenants: func() map[string]*courier.Tenant { return tenants }})
	if n := r.Sweep(ctx); n != 3 {
		t.Errorf("swept %d, want 3: old, acme~old and beta~old", n)
	}
	for id := range finished {
		_, err := store.Message(ctx, id)
		if gone := courier.ErrorCode(err) == courier.CodeNotFound; gone != strings.HasSuffix(id, "old") {
			t.Errorf("%s purged: %v; want only those past their tenant's retention", id, gone)
		}
	}
}
