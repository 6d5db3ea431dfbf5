package engine_test

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/internal/testkit/syncbuf"
)

// A tenant deleted while its attempts are under way and the other tenant
// sends, then erased by the runner of bulk operations: the erasure is
// done, the other tenant's messages are all delivered meanwhile, the
// outcomes of the deleted tenant's attempts that come after it change
// nothing (nothing of the tenant comes back into the store: no message,
// no health, no event) and fail nothing, and the engine keeps nothing of
// the tenant: no lane, no turn, no health, pace, slot or activity of its
// endpoint.
func TestEraseTenantWhileDelivering(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.top.Tenants = map[string]*courier.Tenant{"acme": {Name: "acme", Weight: 1}, "acme2": {Name: "acme2", Weight: 1}}
		for _, tn := range []string{"acme", "acme2"} {
			ep := h.httpEndpoint(courier.Qualify(tn, "ep"), "/"+tn)
			ep.Timeout, ep.MaxConcurrency = 30*time.Second, 8
			ep.MinInterval = time.Millisecond // paced: the engine keeps its turns
			h.top.Endpoints[ep.Name] = ep
			h.route(courier.Qualify(tn, "r"), ep.Name)
		}
		// acme's receiver fails, slowly: its attempts are under way when
		// the tenant goes, and their outcomes come after its erasure.
		h.sink.Script("/acme", sink.Delay(2*time.Second, 503), sink.Repeat)
		h.sink.Script("/acme2", sink.Delay(time.Millisecond, 204), sink.Repeat)
	})
	ctx := context.Background()
	send := func(tenant string, from, n int) []string {
		var msgs []*courier.Message
		var ids []string
		for i := from; i < from+n; i++ {
			id := courier.QualifyID(tenant, fmt.Sprintf("m-%04d", i))
			msgs = append(msgs, h.message(id, "t", courier.Qualify(tenant, "r"), "", 0))
			ids = append(ids, id)
		}
		h.ingestAll(msgs)
		return ids
	}
	send("acme", 0, 40)
	want := send("acme2", 0, 40)
	if err := h.sink.Wait(ctx, "/acme", 8); err != nil {
		t.Fatal(err)
	}

	// The tenant is deleted: its objects leave the topology.
	next := *h.top
	next.Tenants, next.Endpoints, next.Routes = maps.Clone(h.top.Tenants), maps.Clone(h.top.Endpoints), maps.Clone(h.top.Routes)
	delete(next.Tenants, "acme")
	delete(next.Endpoints, "acme/ep")
	delete(next.Routes, "acme/r")
	h.engine.SetTopology(&next)
	bulk := h.bulks[h.engine]
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	op, err := bulk.Run(runCtx, courier.BulkOp{ID: "erase.acme", Kind: courier.ActionEraseTenant, Who: "root",
		Filter: courier.MessageFilter{Tenant: "acme"}, CreatedAt: time.Now()})
	if err != nil || !op.Done || op.Count != 40 {
		t.Fatalf("the erasure: %+v, %v; want done with 40 messages", op, err)
	}
	want = append(want, send("acme2", 40, 40)...)
	h.waitDelivered(want, time.Minute)

	// The attempts under way when the tenant went end.
	for deadline := time.Now().Add(time.Minute); h.sink.Concurrent("/acme") > 0 || h.engine.InFlight("acme/ep") > 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("attempts of the deleted tenant still under way: %d at the receiver, %d in the engine",
				h.sink.Concurrent("/acme"), h.engine.InFlight("acme/ep"))
		}
	}
	// Their outcomes are handled by the time another message of acme2 is
	// delivered: the completer takes outcomes in order.
	h.waitDelivered(append(want, send("acme2", 80, 1)...), time.Minute)

	page, err := h.store.Messages(ctx, courier.MessageFilter{Tenant: "acme"})
	if err != nil || len(page.Messages) != 0 {
		t.Fatalf("messages of the erased tenant: %d, %v", len(page.Messages), err)
	}
	health, err := h.store.Health(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, hl := range health {
		if courier.TenantOf(hl.Endpoint) == "acme" {
			t.Errorf("the store has the health of %s after the erasure: %+v", hl.Endpoint, hl)
		}
	}
	evs, err := h.store.Events(ctx, courier.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Events {
		if strings.HasPrefix(ev.Subject, "acme/") {
			t.Errorf("an event of the erased tenant: %+v", ev)
		}
	}
	if left := h.engine.TenantState("acme"); len(left) > 0 {
		t.Errorf("the engine keeps of the deleted tenant: %v", left)
	}
	for _, s := range h.engine.FairShares() {
		if s.Tenant == "acme" {
			t.Errorf("fair shares show the deleted tenant: %+v", s)
		}
	}
	if a := h.engine.Activity("acme/ep"); len(a.LastHour) > 0 || a.InFlight > 0 {
		t.Errorf("activity of the deleted tenant's endpoint: %+v", a)
	}
}

// An operation on a tenant's messages that its erasure removes while it
// runs ends: its runner does not try it again and again.
func TestBulkOperationErasedEnds(t *testing.T) {
	store := mustOpenSQLite(t, filepath.Join(t.TempDir(), "courier.db"))
	defer store.Close()
	ctx := context.Background()
	var log syncbuf.Buffer
	b := engine.NewBulk(store, nil, slog.New(slog.NewTextHandler(&log, nil)), nil, nil)
	release := make(chan struct{})
	b.Pace(func(ctx context.Context, op courier.BulkOp) (int, string, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return 10, "", nil
	})
	defer b.Stop(ctx)
	op := courier.BulkOp{ID: courier.QualifyID("acme", "op-1"), Kind: courier.ActionDiscard, Who: "ops",
		Filter: courier.MessageFilter{Tenant: "acme"}, CreatedAt: time.Now()}
	if _, err := b.Begin(ctx, op); err != nil {
		t.Fatal(err)
	}
	erase, err := store.StartBulk(ctx, courier.BulkOp{ID: "erase.acme", Kind: courier.ActionEraseTenant, Who: "root",
		Filter: courier.MessageFilter{Tenant: "acme"}, CreatedAt: time.Now()})
	for err == nil && !erase.Done {
		erase, err = store.RunBulk(ctx, erase.ID, 10, time.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Bulk(ctx, op.ID); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("the tenant's operation after its erasure: %v, want it gone", err)
	}
	close(release)
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(log.String(), "bulk operation gone"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the runner of the removed operation did not end; it logged:\n%s", log.String())
		}
	}
}

// An erasure cut off by a stop (the server stopped between two batches)
// is resumed by the next start and finished: every message of the tenant
// is erased once, the other tenant's are left.
func TestEraseTenantResumesAtStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "courier.db")
	store := mustOpenSQLite(t, path)
	ctx := context.Background()
	for _, tn := range []string{"acme", "acme2"} {
		var msgs []*courier.Message
		for i := range 1200 {
			m := &courier.Message{ID: courier.QualifyID(tn, fmt.Sprintf("m-%04d", i)), Type: courier.Qualify(tn, "t"),
				Route: courier.Qualify(tn, "r"), Payload: []byte("{}"), ContentType: "application/json"}
			courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
			msgs = append(msgs, m)
		}
		if _, err := store.Ingest(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	op, err := store.StartBulk(ctx, courier.BulkOp{ID: "erase.acme", Kind: courier.ActionEraseTenant, Who: "root",
		Filter: courier.MessageFilter{Tenant: "acme"}, CreatedAt: time.Now()})
	if err == nil {
		op, err = store.RunBulk(ctx, op.ID, 500, time.Now())
	}
	if err != nil || op.Count != 500 || op.Done {
		t.Fatalf("first batch before the stop: %+v, %v", op, err)
	}
	store.Close() // the server stops here

	store = mustOpenSQLite(t, path)
	defer store.Close()
	var mu sync.Mutex
	acted := map[courier.ActionKind]int{}
	b := engine.NewBulk(store, nil, nil, nil, func(kind courier.ActionKind, n int) {
		mu.Lock()
		defer mu.Unlock()
		acted[kind] += n
	})
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(ctx)
	for deadline := time.Now().Add(20 * time.Second); !op.Done; time.Sleep(10 * time.Millisecond) {
		if op, err = store.Bulk(ctx, "erase.acme"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the erasure was not finished after the start: %+v", op)
		}
	}
	if op.Count != 1200 {
		t.Fatalf("the erasure counted %d messages, want 1200", op.Count)
	}
	for tn, want := range map[string]int{"acme": 0, "acme2": 1000} {
		page, err := store.Messages(ctx, courier.MessageFilter{Tenant: tn, Limit: 1000})
		if err != nil || len(page.Messages) != want {
			t.Errorf("tenant %s has %d messages (%v), want %d", tn, len(page.Messages), err, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if acted[courier.ActionEraseTenant] != 700 {
		t.Errorf("the runner told of %d messages erased, want the 700 left at the start", acted[courier.ActionEraseTenant])
	}
}
