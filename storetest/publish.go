package storetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// pubTopology has three subscriptions: two to every order.* type, one to
// order.created from tenant acme only.
func pubTopology() *courier.Topology {
	top := &courier.Topology{
		Routes: map[string]*courier.Route{"erp": {Name: "erp"}, "crm": {Name: "crm"}, "audit": {Name: "audit"}},
		Subscriptions: map[string]*courier.Subscription{
			"erp-orders": {Name: "erp-orders", Types: []string{"order.*"}, Route: "erp"},
			"crm-acme":   {Name: "crm-acme", Types: []string{"order.created"}, Route: "crm", Headers: map[string]string{"X-Tenant": "acme"}},
			"audit-all":  {Name: "audit-all", Types: []string{"order.*"}, Route: "audit"},
		},
	}
	top.Prepare()
	return top
}

// published admits a message without a route and returns its deliveries.
func published(t *testing.T, top *courier.Topology, id, typ, payload string, headers map[string]string, at time.Time) []*courier.Message {
	t.Helper()
	m := &courier.Message{ID: id, Type: typ, Payload: []byte(payload), ContentType: "application/json", Headers: headers}
	ds, err := top.Admit(m, courier.Intake{}, at)
	if err != nil {
		t.Fatalf("admit %s: %v", id, err)
	}
	return ds
}

func testPublishFanOut(t *testing.T, s courier.Store) {
	ctx := context.Background()
	top := pubTopology()
	ds := published(t, top, "o-1", "order.created", `{"n":1}`, map[string]string{"X-Tenant": "acme"}, base)
	if len(ds) != 3 {
		t.Fatalf("%d deliveries, want 3", len(ds))
	}
	p2p := newMessage("inv-1", base)
	res := mustIngest(t, s, append(ds, p2p)...)
	for i, r := range res {
		if r.Status != courier.IngestCreated {
			t.Fatalf("result %d: %v, want created", i, r.Status)
		}
	}
	got, err := s.Deliveries(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ sub, route string }{{"audit-all", "audit"}, {"crm-acme", "crm"}, {"erp-orders", "erp"}}
	if len(got) != len(want) {
		t.Fatalf("%d deliveries stored, want %d", len(got), len(want))
	}
	for i, w := range want {
		d := got[i]
		if d.ID != "o-1" || d.Subscription != w.sub || d.Route != w.route || d.State != courier.StateQueued {
			t.Errorf("delivery %d: %s/%s on %s %s, want o-1/%s on %s queued", i, d.ID, d.Subscription, d.Route, d.State, w.sub, w.route)
		}
		// Each one reads the one payload kept for them all.
		if !bytes.Equal(d.Payload, []byte(`{"n":1}`)) {
			t.Errorf("delivery %s: payload %q", d.Subscription, d.Payload)
		}
		one, err := s.Message(ctx, d.Key())
		if err != nil || one.Subscription != w.sub || !bytes.Equal(one.Payload, d.Payload) {
			t.Errorf("Message(%s) = %+v, %v", d.Key(), one, err)
		}
	}
	if only, err := s.Deliveries(ctx, "inv-1"); err != nil || len(only) != 1 || only[0].Subscription != "" {
		t.Errorf("Deliveries of a message sent to a route: %d, %v; want the message itself", len(only), err)
	}
	_, err = s.Message(ctx, "o-1")
	wantCode(t, err, courier.CodeNotFound)
	_, err = s.Message(ctx, "o-1/nobody")
	wantCode(t, err, courier.CodeNotFound)
	_, err = s.Deliveries(ctx, "o-2")
	wantCode(t, err, courier.CodeNotFound)

	// Each subscription's route claims its own delivery, with the payload.
	claimed := claim(t, s, base.Add(time.Second), courier.RouteQuota{Route: "erp", Limit: 10}, courier.RouteQuota{Route: "crm", Limit: 10})
	if len(claimed) != 2 {
		t.Fatalf("claimed %d, want the erp and crm deliveries", len(claimed))
	}
	for _, c := range claimed {
		if c.ID != "o-1" || !bytes.Equal(c.Payload, []byte(`{"n":1}`)) {
			t.Errorf("claimed %s with payload %q", c.Key(), c.Payload)
		}
	}

	// A list by subscription shows its deliveries only.
	page, err := s.Messages(ctx, courier.MessageFilter{Subscription: "crm-acme"})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Key() != "o-1/crm-acme" {
		t.Errorf("list by subscription: %d messages, %v", len(page.Messages), err)
	}
}

func testPublishIdempotent(t *testing.T, s courier.Store) {
	top := pubTopology()
	first := published(t, top, "o-1", "order.updated", `{"n":1}`, nil, base)
	mustIngest(t, s, first...)

	// The same content again: nothing new, also when a subscription was
	// added meanwhile.
	top.Subscriptions["late"] = &courier.Subscription{Name: "late", Types: []string{"order.updated"}, Route: "crm"}
	again := published(t, top, "o-1", "order.updated", `{"n":1}`, nil, base.Add(time.Hour))
	if len(again) != 3 {
		t.Fatalf("%d deliveries, want 3 with the new subscription", len(again))
	}
	for i, r := range mustIngest(t, s, again...) {
		if r.Status != courier.IngestExists || r.Message == nil || r.Message.ID != "o-1" {
			t.Errorf("repeat, result %d: %v, want exists", i, r.Status)
		}
	}
	other := published(t, top, "o-1", "order.updated", `{"n":2}`, nil, base)
	for i, r := range mustIngest(t, s, other...) {
		if r.Status != courier.IngestConflict {
			t.Errorf("other content, result %d: %v, want conflict", i, r.Status)
		}
	}
	if ds, err := s.Deliveries(context.Background(), "o-1"); err != nil || len(ds) != 2 {
		t.Fatalf("%d deliveries after the repeats, want the 2 of the first publish (%v)", len(ds), err)
	}

	// An id is a published message or one sent to a route, never both.
	p2p := newMessage("o-1", base)
	if r := mustIngest(t, s, p2p); r[0].Status != courier.IngestConflict {
		t.Errorf("a message to a route under a published id: %v, want conflict", r[0].Status)
	}
	mustIngest(t, s, newMessage("inv-1", base))
	if r := mustIngest(t, s, published(t, top, "inv-1", "order.updated", `{}`, nil, base)...); r[0].Status != courier.IngestConflict {
		t.Errorf("a publish under the id of a message to a route: %v, want conflict", r[0].Status)
	}
	// Within one call as across calls.
	dup := published(t, top, "o-3", "order.updated", `{}`, nil, base)
	res := mustIngest(t, s, append(dup, published(t, top, "o-3", "order.updated", `{}`, nil, base)...)...)
	for i, r := range res {
		want := courier.IngestCreated
		if i >= len(dup) {
			want = courier.IngestExists
		}
		if r.Status != want {
			t.Errorf("one call, result %d: %v, want %v", i, r.Status, want)
		}
	}
}

// Each delivery has its own outcome, attempts, operator actions and
// suspended entry; the others go on.
func testPublishPerDelivery(t *testing.T, s courier.Store) {
	ctx := context.Background()
	top := pubTopology()
	mustIngest(t, s, published(t, top, "o-1", "order.created", `{}`, map[string]string{"X-Tenant": "acme"}, base)...)
	now := base.Add(time.Second)
	claimed := claim(t, s, now, courier.RouteQuota{Route: "erp", Limit: 1}, courier.RouteQuota{Route: "crm", Limit: 1}, courier.RouteQuota{Route: "audit", Limit: 1})
	if len(claimed) != 3 {
		t.Fatalf("claimed %d, want 3", len(claimed))
	}
	var changes []courier.Change
	for _, c := range claimed {
		next := *c
		a := &courier.Attempt{MessageID: c.ID, Subscription: c.Subscription, N: c.TotalAttempts, Endpoint: c.Route + "-ep", Route: c.Route,
			StartedAt: now, Outcome: courier.OutcomeDelivered}
		next.State, next.FinishedAt, next.LeaseUntil, next.LeaseOwner = courier.StateDelivered, now, time.Time{}, ""
		if c.Subscription == "crm-acme" {
			a.Outcome, a.Class, a.Status, a.Error = courier.OutcomeFailed, courier.ClassRejected, 400, "bad order"
			next.State, next.Reason, next.LastError = courier.StateSuspended, courier.ReasonRejected, "bad order"
		}
		changes = append(changes, courier.Change{Message: &next, From: courier.StateInflight, Token: c.TotalAttempts, Attempt: a})
	}
	MustApply(t, s, changes...)

	ds, err := s.Deliveries(ctx, "o-1")
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]courier.State{}
	for _, d := range ds {
		states[d.Subscription] = d.State
	}
	if states["crm-acme"] != courier.StateSuspended || states["erp-orders"] != courier.StateDelivered || states["audit-all"] != courier.StateDelivered {
		t.Fatalf("states %v", states)
	}
	if got := courier.Summary(ds); got != courier.StateSuspended {
		t.Errorf("summary %s, want suspended", got)
	}
	atts, err := s.Attempts(ctx, "o-1/crm-acme")
	if err != nil || len(atts) != 1 || atts[0].Status != 400 || atts[0].Subscription != "crm-acme" || atts[0].MessageID != "o-1" {
		t.Fatalf("attempts of the suspended delivery: %+v, %v", atts, err)
	}
	if atts, err := s.Attempts(ctx, "o-1/erp-orders"); err != nil || len(atts) != 1 || atts[0].Outcome != courier.OutcomeDelivered {
		t.Fatalf("attempts of a delivered one: %+v, %v", atts, err)
	}
	_, err = s.Attempts(ctx, "o-1/nobody")
	wantCode(t, err, courier.CodeNotFound)
	page, err := s.Messages(ctx, courier.MessageFilter{State: courier.StateSuspended})
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Key() != "o-1/crm-acme" {
		t.Fatalf("suspended queue: %d, %v", len(page.Messages), err)
	}

	// Resubmitting the suspended delivery touches it alone.
	who := courier.Action{At: now.Add(time.Minute), Who: "ops"}
	m, err := s.Resubmit(ctx, "o-1/crm-acme", "", who)
	if err != nil || m.State != courier.StateQueued || m.ResubmitCount != 1 {
		t.Fatalf("resubmit: %+v, %v", m, err)
	}
	_, err = s.Resubmit(ctx, "o-1/erp-orders", "", who)
	wantCode(t, err, courier.CodeConflict)
	if acts, err := s.Actions(ctx, "o-1/crm-acme"); err != nil || len(acts) != 1 || acts[0].Kind != courier.ActionResubmit {
		t.Fatalf("actions of the delivery: %+v, %v", acts, err)
	}
	if got := courier.Summary(mustDeliveries(t, s, "o-1")); got != courier.StateQueued {
		t.Errorf("summary after resubmit %s, want queued", got)
	}
	if _, err := s.Discard(ctx, "o-1/crm-acme", who); err != nil {
		t.Fatal(err)
	}
	if got := courier.Summary(mustDeliveries(t, s, "o-1")); got != courier.StateDelivered {
		t.Errorf("summary with every delivery delivered or discarded: %s, want delivered", got)
	}
}

func mustDeliveries(t *testing.T, s courier.Store, id string) []*courier.Message {
	t.Helper()
	ds, err := s.Deliveries(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// Bulk actions filter by subscription and act on deliveries; a purge takes
// a published message's payload with its last delivery.
func testPublishBulkAndPurge(t *testing.T, s courier.Store) {
	ctx := context.Background()
	top := pubTopology()
	for _, id := range []string{"o-1", "o-2"} {
		ds := published(t, top, id, "order.updated", `{"id":"`+id+`"}`, nil, base)
		for _, d := range ds {
			courier.Unusable(d, courier.ReasonRejected, "no", base) // suspended, as a receiver's 400 leaves it
		}
		mustIngest(t, s, ds...)
	}
	op, err := s.StartBulk(ctx, courier.BulkOp{ID: "b1", Kind: courier.ActionDiscard, Who: "ops", CreatedAt: base,
		Filter: courier.MessageFilter{State: courier.StateSuspended, Subscription: "audit-all"}})
	if err != nil {
		t.Fatal(err)
	}
	for !op.Done {
		if op, err = s.RunBulk(ctx, "b1", 10, base.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if op.Count != 2 {
		t.Fatalf("bulk discard counted %d, want the 2 audit deliveries", op.Count)
	}
	for _, id := range []string{"o-1", "o-2"} {
		for _, d := range mustDeliveries(t, s, id) {
			want := courier.StateSuspended
			if d.Subscription == "audit-all" {
				want = courier.StateDiscarded
			}
			if d.State != want {
				t.Errorf("%s: %s, want %s", d.Key(), d.State, want)
			}
		}
	}

	// audit-all is the lead of each (first by name): it is finished, but
	// its siblings are not, so the purge leaves it and the payload.
	if n, err := s.Purge(ctx, courier.Purge{Before: base.Add(time.Hour)}, 100); err != nil || n != 0 {
		t.Fatalf("purge with live siblings: %d, %v", n, err)
	}
	if _, err := s.Discard(ctx, "o-1/erp-orders", courier.Action{At: base.Add(time.Minute), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	// The shared row goes first, the lead with the payload in the round after.
	total := 0
	for range 3 {
		n, err := s.Purge(ctx, courier.Purge{Before: base.Add(time.Hour)}, 100)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	if total != 2 {
		t.Fatalf("purged %d rows, want the 2 of o-1", total)
	}
	_, err = s.Deliveries(ctx, "o-1")
	wantCode(t, err, courier.CodeNotFound)
	if ds := mustDeliveries(t, s, "o-2"); len(ds) != 2 || !bytes.Equal(ds[1].Payload, []byte(`{"id":"o-2"}`)) {
		t.Fatalf("o-2 after the purge: %d deliveries", len(ds))
	}
	// A purged id may be used again.
	if r := mustIngest(t, s, published(t, top, "o-1", "order.updated", `{}`, nil, base)...); r[0].Status != courier.IngestCreated {
		t.Errorf("publish under a purged id: %v", r[0].Status)
	}
}

// The catalog counts each message taken in once, published or not, by type.
func testTypes(t *testing.T, s courier.Store) {
	ctx := context.Background()
	top := pubTopology()
	if got, err := s.Types(ctx); err != nil || len(got) != 0 {
		t.Fatalf("types of an empty store: %v, %v", got, err)
	}
	mustIngest(t, s, published(t, top, "o-1", "order.created", `{}`, map[string]string{"X-Tenant": "acme"}, base)...)
	mustIngest(t, s, append(published(t, top, "o-2", "order.created", `{}`, nil, base.Add(time.Hour)),
		newMessage("inv-1", base.Add(time.Minute)), newMessage("inv-2", base.Add(2*time.Minute)))...)
	// A repeat is not counted again.
	mustIngest(t, s, published(t, top, "o-1", "order.created", `{}`, map[string]string{"X-Tenant": "acme"}, base)...)
	// Ingests at the same time, which a store may write together, each
	// count, and their repeats do not.
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			m := newMessage(fmt.Sprintf("inv-c%d", i%20), base.Add(time.Minute+time.Duration(i%20)*time.Second))
			if i%2 == 0 {
				m.OrderingKey = "" // half of them with a key, half without
			}
			if _, err := s.Ingest(ctx, []*courier.Message{m}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := s.Types(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []courier.TypeSeen{
		{Type: "invoice", Count: 22, FirstSeen: base.Add(time.Minute), LastSeen: base.Add(2 * time.Minute)},
		{Type: "order.created", Count: 2, FirstSeen: base, LastSeen: base.Add(time.Hour)},
	}
	if len(got) != len(want) {
		t.Fatalf("types %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Count != w.Count || !g.FirstSeen.Equal(w.FirstSeen) || !g.LastSeen.Equal(w.LastSeen) {
			t.Errorf("type %d: %+v, want %+v", i, g, w)
		}
	}
}

// A replay gives a subscription added later a delivery of every retained
// message it wants in the span, once; with Again it delivers again those
// it had. A resend puts a delivered message back in the queue.
func testReplay(t *testing.T, s courier.Store) {
	ctx := context.Background()
	top := pubTopology()
	for i, typ := range []string{"order.created", "order.updated", "order.created", "invoice.paid"} {
		at := base.Add(time.Duration(i) * time.Hour)
		var msgs []*courier.Message
		if typ == "invoice.paid" {
			m := newMessage("inv-1", at) // sent to a route: never replayed
			msgs = []*courier.Message{m}
		} else {
			msgs = published(t, top, fmt.Sprintf("o-%d", i), typ, `{"i":`+fmt.Sprint(i)+`}`, map[string]string{"X-Tenant": "acme"}, at)
		}
		mustIngest(t, s, msgs...)
	}
	late := courier.Subscription{Name: "late", Types: []string{"order.*"}, Route: "late", Headers: map[string]string{"X-Tenant": "acme"}}
	run := func(id string, r courier.Replay) courier.BulkOp {
		t.Helper()
		op, err := s.StartBulk(ctx, courier.BulkOp{ID: id, Kind: courier.ActionReplay, Who: "ops", CreatedAt: base, Replay: &r})
		if err != nil {
			t.Fatal(err)
		}
		for !op.Done {
			if op, err = s.RunBulk(ctx, id, 1, base.Add(10*time.Hour)); err != nil { // one a batch: the cursor must hold
				t.Fatal(err)
			}
		}
		return op
	}
	// o-0 and o-1 are in the span; o-2 came at its end.
	op := run("r1", courier.Replay{Subscription: late, Since: base, Until: base.Add(2 * time.Hour)})
	if op.Count != 2 || op.Replay == nil || op.Replay.Subscription.Route != "late" {
		t.Fatalf("replay: %+v", op)
	}
	for _, id := range []string{"o-0", "o-1"} {
		d, err := s.Message(ctx, id+"/late")
		if err != nil || d.State != courier.StateQueued || d.Route != "late" || d.Size == 0 {
			t.Fatalf("%s/late: %+v, %v", id, d, err)
		}
	}
	if _, err := s.Message(ctx, "o-2/late"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Errorf("o-2, after the span, got a delivery: %v", err)
	}
	claimed := claim(t, s, base.Add(11*time.Hour), courier.RouteQuota{Route: "late", Limit: 10})
	if len(claimed) != 2 || string(claimed[0].Payload) != `{"i":0}` {
		t.Fatalf("claimed %d replayed deliveries, the first with %q", len(claimed), claimed[0].Payload)
	}
	// Delivered, and replayed again: nothing new without Again.
	for _, c := range claimed {
		next := *c
		next.State, next.FinishedAt, next.LeaseUntil = courier.StateDelivered, base.Add(11*time.Hour), time.Time{}
		MustApply(t, s, courier.Change{Message: &next, From: courier.StateInflight, Token: c.TotalAttempts})
	}
	if op := run("r2", courier.Replay{Subscription: late, Since: base, Until: base.Add(3 * time.Hour)}); op.Count != 1 {
		t.Errorf("a second replay counted %d, want o-2 only", op.Count)
	}
	// Narrowed by type, with Again: o-1 (order.updated) is delivered again.
	op = run("r3", courier.Replay{Subscription: late, Since: base, Until: base.Add(3 * time.Hour), Types: []string{"order.updated"}, Again: true})
	if op.Count != 1 {
		t.Errorf("replay again of order.updated counted %d, want 1", op.Count)
	}
	if d, err := s.Message(ctx, "o-1/late"); err != nil || d.State != courier.StateQueued || d.ResubmitCount != 1 {
		t.Errorf("o-1/late after the replay again: %+v, %v", d, err)
	}
	if d, err := s.Message(ctx, "o-0/late"); err != nil || d.State != courier.StateDelivered {
		t.Errorf("o-0/late, another type: %+v, %v", d, err)
	}
	// Resend, one by one.
	m, err := s.Resend(ctx, "o-0/late", courier.Action{At: base.Add(12 * time.Hour), Who: "ops"})
	if err != nil || m.State != courier.StateQueued {
		t.Fatalf("resend: %+v, %v", m, err)
	}
	_, err = s.Resend(ctx, "o-0/late", courier.Action{At: base.Add(12 * time.Hour), Who: "ops"})
	wantCode(t, err, courier.CodeConflict)
	if acts, err := s.Actions(ctx, "o-0/late"); err != nil || len(acts) != 1 || acts[0].Kind != courier.ActionResend {
		t.Errorf("actions: %+v, %v", acts, err)
	}
}
