package storetest

import (
	"context"
	"reflect"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// eraseTests are the tests of Store.Erase.
var eraseTests = suite[courier.Store]{
	{"EraseSuspended", testEraseSuspended},
	{"EraseInFlight", testEraseInFlight},
	{"ErasePublished", testErasePublished},
	{"EraseLetsTheKeyGoOn", testEraseLetsTheKeyGoOn},
}

// mustErase erases message id as who, at at, for reason, and returns its
// deliveries as the erasure left them.
func mustErase(t *testing.T, s courier.Store, id, who, reason string, at time.Time) []*courier.Message {
	t.Helper()
	ds, err := s.Erase(context.Background(), id, courier.Action{At: at, Who: who, Detail: reason})
	if err != nil {
		t.Fatalf("Erase(%q): %v", id, err)
	}
	return ds
}

// wantErased fails t unless m, as stored, has no payload left and the
// tombstone want, and keeps what it was: its id, type, route, size, hash
// and attempts as before (was).
func wantErased(t *testing.T, m, was *courier.Message, want courier.Erasure) {
	t.Helper()
	if m.Erased == nil || *m.Erased != want {
		t.Fatalf("%s: tombstone %+v, want %+v", m.Key(), m.Erased, want)
	}
	if len(m.Payload) != 0 || m.Blob != "" || m.Digest != "" || len(m.StepResponses) != 0 {
		t.Fatalf("%s: %d bytes of payload, blob %q, digest %q, step responses %v left after the erasure",
			m.Key(), len(m.Payload), m.Blob, m.Digest, m.StepResponses)
	}
	if m.ID != was.ID || m.Type != was.Type || m.Route != was.Route || m.Size != was.Size || m.Hash != was.Hash ||
		m.TotalAttempts != was.TotalAttempts || m.Attempts != was.Attempts || m.ContentType != was.ContentType {
		t.Fatalf("%s after the erasure: %+v; want what it was but its payload: %+v", m.Key(), m, was)
	}
}

// kinds lists the kinds and details of the actions on subject.
func kinds(t *testing.T, s courier.Store, subject string) []string {
	t.Helper()
	actions, err := s.Actions(context.Background(), subject)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range actions {
		out = append(out, string(a.Kind)+" by "+a.Who+": "+a.Detail)
	}
	return out
}

// A suspended message's payload is erased: its row keeps everything but
// the payload, gains the tombstone and is discarded with it, both actions
// recorded. Erasing again answers the same tombstone and records nothing.
// It is not resent or resubmitted; an ingest of the same id and content
// still finds it (idempotent) without bringing the payload back; the
// retention purge takes it as any other.
func testEraseSuspended(t *testing.T, s courier.Store) {
	ctx := context.Background()
	m := newMessage("inv-9", base)
	m.State, m.Reason, m.LastError, m.FinishedAt = courier.StateSuspended, courier.ReasonRejected, "HTTP 400", base
	m.StepResponses = map[int]string{1: `{"customer":"Jane Doe"}`} // what a workflow's receiver made of it
	mustIngest(t, s, m)
	was := mustGet(t, s, "inv-9")
	at := base.Add(time.Hour)
	want := courier.Erasure{At: at, By: "dpo", Reason: "data-protection request 77"}
	ds := mustErase(t, s, "inv-9", "dpo", "data-protection request 77", at)
	if len(ds) != 1 || ds[0].State != courier.StateDiscarded {
		t.Fatalf("Erase answered %v, want the message, discarded", ds)
	}
	wantErased(t, ds[0], was, want)
	got := mustGet(t, s, "inv-9")
	wantErased(t, got, was, want)
	if got.State != courier.StateDiscarded || got.FinishedAt != at || got.Reason != was.Reason || got.LastError != "HTTP 400" {
		t.Fatalf("stored: %s (%s, %q) finished %v; want discarded at %v, its history kept", got.State, got.Reason, got.LastError, got.FinishedAt, at)
	}
	history := []string{"discard by dpo: " + courier.ErasedDiscard, "erase by dpo: data-protection request 77"}
	if got := kinds(t, s, "inv-9"); !reflect.DeepEqual(got, history) {
		t.Fatalf("actions %q, want %q", got, history)
	}
	page, err := s.Audit(ctx, courier.AuditFilter{Kind: courier.ActionErase})
	if err != nil || len(page.Actions) != 1 || page.Actions[0].Subject != "inv-9" {
		t.Fatalf("audit log of erasures: %+v, %v; want the one of inv-9", page.Actions, err)
	}

	again := mustErase(t, s, "inv-9", "someone-else", "again", at.Add(time.Hour))
	wantErased(t, again[0], was, want)
	if got := kinds(t, s, "inv-9"); !reflect.DeepEqual(got, history) {
		t.Fatalf("actions after erasing again %q, want still %q", got, history)
	}

	_, err = s.Resend(ctx, "inv-9", courier.Action{At: at, Who: "ops"})
	wantCode(t, err, courier.CodeConflict)
	res := mustIngest(t, s, newMessage("inv-9", base))
	if res[0].Status != courier.IngestExists || res[0].Message == nil || res[0].Message.Erased == nil {
		t.Fatalf("ingest again: %+v; want it reported existing, erased", res[0])
	}
	wantErased(t, mustGet(t, s, "inv-9"), was, want)
	if _, err := s.Erase(ctx, "nope", courier.Action{At: at, Who: "dpo"}); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("Erase of no message: %v, want not_found", err)
	}

	// A finished message keeps its state; what its workflow's steps
	// answered goes with the payload.
	done := newMessage("inv-10", base)
	done.State, done.FinishedAt = courier.StateDelivered, base
	done.StepResponses = map[int]string{1: `{"customer":"Jane Doe"}`}
	mustIngest(t, s, done)
	was = mustGet(t, s, "inv-10")
	mustErase(t, s, "inv-10", "dpo", "", at)
	got = mustGet(t, s, "inv-10")
	wantErased(t, got, was, courier.Erasure{At: at, By: "dpo"})
	if got.State != courier.StateDelivered {
		t.Fatalf("a delivered message erased: %s, want still delivered", got.State)
	}

	if n, err := s.Purge(ctx, courier.Purge{Before: at.Add(time.Second)}, 10); err != nil || n != 2 {
		t.Fatalf("purge: %d, %v; want the erased messages purged", n, err)
	}
	_, err = s.Message(ctx, "inv-9")
	wantCode(t, err, courier.CodeNotFound)
}

// A message in flight is discarded by the erasure of its payload: the
// outcome of the attempt under way changes nothing when it comes, as its
// lease's token no longer matches (Apply's guard).
func testEraseInFlight(t *testing.T, s courier.Store) {
	mustIngest(t, s, keyed("fly", "erase-fly", ""))
	claimed := claimOn(t, s, "erase-fly", base.Add(time.Minute), "[fly]")
	ds := mustErase(t, s, "fly", "dpo", "", base.Add(2*time.Minute))
	if ds[0].State != courier.StateDiscarded || ds[0].LeaseOwner != "" {
		t.Fatalf("erased in flight: %s, lease %q; want discarded", ds[0].State, ds[0].LeaseOwner)
	}
	n := *claimed[0]
	n.State, n.LeaseUntil, n.LeaseOwner, n.FinishedAt = courier.StateDelivered, time.Time{}, "", base.Add(3*time.Minute)
	applied, err := s.Apply(context.Background(), []courier.Change{{Message: &n, From: courier.StateInflight, Token: claimed[0].TotalAttempts}})
	if err != nil || applied[0] {
		t.Fatalf("the outcome of the attempt under way: applied %v, %v; want it to change nothing", applied, err)
	}
	if got := mustGet(t, s, "fly"); got.State != courier.StateDiscarded || got.Erased == nil {
		t.Fatalf("after the outcome: %s, tombstone %v; want discarded and erased", got.State, got.Erased)
	}
	if got := claim(t, s, base.Add(time.Hour), courier.RouteQuota{Route: "erase-fly", Limit: 10}); len(got) != 0 {
		t.Fatalf("claimed %s after the erasure", ids(got))
	}
}

// A published message's payload is shared by its deliveries: the erasure
// takes it from all of them, discards those still live and leaves a
// delivered one delivered; each records the erasure. A replay gives no
// subscription a delivery of it.
func testErasePublished(t *testing.T, s courier.Store) {
	ctx := context.Background()
	top := pubTopology()
	ds := published(t, top, "o-9", "order.created", `{"name":"Jane Doe"}`, map[string]string{"X-Tenant": "acme"}, base)
	mustIngest(t, s, ds...)
	claimed := claimOn(t, s, "audit", base.Add(time.Minute), "[o-9]")
	finish(t, s, claimed[0], courier.StateDelivered, false, base.Add(time.Minute))
	at := base.Add(time.Hour)
	out := mustErase(t, s, "o-9", "dpo", "request", at)
	if len(out) != len(ds) {
		t.Fatalf("Erase answered %d deliveries, want %d", len(out), len(ds))
	}
	got, err := s.Deliveries(ctx, "o-9")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range got {
		if d.Erased == nil || len(d.Payload) != 0 || d.Size != len(`{"name":"Jane Doe"}`) {
			t.Fatalf("delivery %s: tombstone %v, %d bytes of payload, size %d; want erased, its size kept", d.Key(), d.Erased, len(d.Payload), d.Size)
		}
		wantState, history := courier.StateDiscarded, []string{"discard by dpo: " + courier.ErasedDiscard, "erase by dpo: request"}
		if d.Subscription == "audit-all" {
			wantState, history = courier.StateDelivered, history[1:]
		}
		if d.State != wantState {
			t.Fatalf("delivery %s: %s, want %s", d.Key(), d.State, wantState)
		}
		if got := kinds(t, s, d.Key()); !reflect.DeepEqual(got, history) {
			t.Fatalf("delivery %s: actions %q, want %q", d.Key(), got, history)
		}
	}
	sub := *top.Subscriptions["audit-all"]
	sub.Name, sub.Route = "late", "late"
	if _, err := s.StartBulk(ctx, courier.BulkOp{ID: "replay-erased", Kind: courier.ActionReplay, Who: "ops", CreatedAt: at,
		Replay: &courier.Replay{Subscription: sub, Since: base.Add(-time.Hour), Until: at}}); err != nil {
		t.Fatal(err)
	}
	if op, err := s.RunBulk(ctx, "replay-erased", 100, at); err != nil || op.Count != 0 {
		t.Fatalf("replay: %+v, %v; want no delivery of the erased message", op, err)
	}
	if _, err := s.Message(ctx, courier.DeliveryKey("o-9", "late")); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("the replay made a delivery of the erased message: %v", err)
	}
}

// A payload kept as a blob is erased with its blob: none of it is left in
// the blob area, whichever delivery refers to it.
func testEraseBlob(t *testing.T, s courier.Store) {
	if s.Blobs() == nil {
		t.Skip("the store keeps no blobs")
	}
	payload := payloadOf(courier.InlineMax+1000, 9)
	publishSpooled(t, s, "big-9", payload)
	WantBlobUsage(t, s, 1, int64(len(payload)))
	ds := mustErase(t, s, "big-9", "dpo", "", base.Add(time.Hour))
	WantBlobUsage(t, s, 0, 0)
	for _, d := range ds {
		if d.Blob != "" || d.Digest != "" || d.Size != len(payload) {
			t.Fatalf("%s: blob %q digest %q size %d; want no blob, the size kept", d.Key(), d.Blob, d.Digest, d.Size)
		}
		if _, err := d.OpenPayload(context.Background(), s.Blobs()); courier.ErrorCode(err) != courier.CodeGone {
			t.Fatalf("%s: reading the erased payload: %v, want gone", d.Key(), err)
		}
	}
	if n := sweep(t, s); n != 0 {
		t.Fatalf("a sweep after the erasure removed %d blobs: the erasure left them", n)
	}
}

// A message of an ordering key that holds the key (suspended) lets the key
// go on once erased: it is discarded, so the next is due.
func testEraseLetsTheKeyGoOn(t *testing.T, s courier.Store) {
	mustIngest(t, s, keyed("k1", "erase-key", "c"), keyed("k2", "erase-key", "c"))
	claimed := claimOn(t, s, "erase-key", base.Add(time.Minute), "[k1]")
	finish(t, s, claimed[0], courier.StateSuspended, false, base.Add(time.Minute))
	claimOn(t, s, "erase-key", base.Add(2*time.Minute), "[]")
	mustErase(t, s, "k1", "dpo", "", base.Add(3*time.Minute))
	claimOn(t, s, "erase-key", base.Add(4*time.Minute), "[k2]")
}
