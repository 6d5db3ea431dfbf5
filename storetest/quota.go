package storetest

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

var quotaTests = suite[courier.Store]{
	{"TenantUsageFollowsEveryWrite", testTenantUsageFollowsEveryWrite},
	{"TenantQueuedCap", testTenantQueuedCap},
	{"TenantBytesCap", testTenantBytesCap},
	{"ListTenant", testListTenant},
}

// tenantMessage returns an accepted message of tenant's, due at at, with a
// payload of size bytes.
func tenantMessage(tenant, id string, size int, at time.Time) *courier.Message {
	m := &courier.Message{ID: courier.QualifyID(tenant, id), Type: "invoice", Route: courier.Qualify(tenant, "r"),
		Payload: []byte(`"` + strings.Repeat("x", max(size-2, 0)) + `"`), ContentType: "application/json"}
	courier.Accept(m, courier.DefaultPolicy(), false, at)
	return m
}

// recount counts the tenants' use from their messages, as TenantUsage
// should report it.
func recount(t *testing.T, s courier.Store) map[string]courier.TenantUsage {
	t.Helper()
	out := map[string]courier.TenantUsage{}
	page, err := s.Messages(context.Background(), courier.MessageFilter{Limit: courier.MaxListLimit})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range page.Messages {
		if m.State.Terminal() {
			continue
		}
		tn := courier.TenantOfID(m.ID)
		u := out[tn]
		u.Tenant, u.Queued, u.Bytes = tn, u.Queued+1, u.Bytes+int64(m.Size)
		out[tn] = u
	}
	return out
}

// usage is TenantUsage by tenant.
func usage(t *testing.T, s courier.Store) map[string]courier.TenantUsage {
	t.Helper()
	list, err := s.TenantUsage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]courier.TenantUsage{}
	for _, u := range list {
		out[u.Tenant] = u
	}
	return out
}

// testTenantUsageFollowsEveryWrite: the use of each tenant is what its
// messages say after every kind of write that makes a message live or
// finished: ingest (a suspended item too), a delivery, a failed outcome,
// discard, resubmit, resend, suspending a route, a bulk discard, an
// erasure (which discards a live message), a purge.
func testTenantUsageFollowsEveryWrite(t *testing.T, s courier.Store) {
	ctx := context.Background()
	check := func(step string) {
		t.Helper()
		if got, want := usage(t, s), recount(t, s); !maps.Equal(got, want) {
			t.Fatalf("after %s: TenantUsage %v, counted from the messages %v", step, got, want)
		}
	}
	susp := tenantMessage("acme", "s", 40, base)
	susp.State, susp.Reason, susp.FinishedAt = courier.StateSuspended, courier.ReasonExhausted, base
	mustIngest(t, s, tenantMessage("acme", "a", 10, base), tenantMessage("acme", "b", 20, base), susp,
		tenantMessage("beta", "a", 30, base), tenantMessage("", "plain", 50, base))
	check("ingest")
	mustIngest(t, s, tenantMessage("acme", "a", 10, base)) // exists: nothing added
	check("ingest again")
	if got := usage(t, s)["acme"]; got.Queued != 3 || got.Bytes != 70 {
		t.Fatalf("acme uses %+v, want 3 messages of 70 bytes", got)
	}

	// Outcomes: a delivery (Change.Delivery) and a failure that suspends.
	leased := claim(t, s, base, courier.RouteQuota{Route: "acme/r", Limit: 10})
	if len(leased) != 2 {
		t.Fatalf("claimed %d, want 2", len(leased))
	}
	check("claim")
	var changes []courier.Change
	for i, m := range leased {
		next := *m
		next.LeaseUntil, next.LeaseOwner, next.NextAttemptAt, next.TimerAt = time.Time{}, "", time.Time{}, time.Time{}
		next.UpdatedAt, next.FinishedAt = base.Add(time.Second), base.Add(time.Second)
		if i == 0 {
			next.State, next.Reason, next.Abandoned = courier.StateDelivered, "", 0
		} else {
			next.State, next.Reason, next.LastError = courier.StateSuspended, courier.ReasonExhausted, "HTTP 500"
		}
		changes = append(changes, courier.Change{Message: &next, From: courier.StateInflight, Token: m.TotalAttempts, Prior: m})
	}
	MustApply(t, s, changes...)
	check("outcomes")
	delivered, failed := leased[0].Key(), leased[1].Key()

	at := base.Add(time.Minute)
	if _, err := s.Discard(ctx, failed, courier.Action{At: at, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	check("discard")
	if _, err := s.Resubmit(ctx, "acme~s", "", courier.Action{At: at, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	check("resubmit")
	if _, err := s.Resend(ctx, delivered, courier.Action{At: at, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	check("resend")
	if _, err := s.SuspendRoute(ctx, "acme/r", courier.ReasonNoRoute, "route acme/r was removed", at); err != nil {
		t.Fatal(err)
	}
	check("suspend route")
	if _, err := s.StartBulk(ctx, courier.BulkOp{ID: "op", Kind: courier.ActionDiscard,
		Filter: courier.MessageFilter{State: courier.StateSuspended, Tenant: "acme"}, Who: "ops", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if op, err := s.RunBulk(ctx, "op", 100, at); err != nil || op.Count != 2 {
		t.Fatalf("bulk discard: %+v, %v; want 2 discarded", op, err)
	}
	check("bulk discard")
	mustIngest(t, s, tenantMessage("acme", "erased", 60, at))
	check("ingest before an erasure")
	mustErase(t, s, "acme~erased", "ops", "", at)
	check("erase")
	if got := usage(t, s)["acme"]; got.Queued != 0 || got.Bytes != 0 {
		t.Fatalf("acme uses %+v with every message finished, want none", got)
	}
	if _, err := s.Purge(ctx, courier.Purge{Before: base.Add(time.Hour)}, 100); err != nil {
		t.Fatal(err)
	}
	check("purge")
	if got := usage(t, s); got["beta"].Queued != 1 || got["default"].Queued != 1 || got["default"].Bytes != 50 {
		t.Fatalf("use after the purge %v, want beta's 1 and the default tenant's 1 of 50 bytes", got)
	}
}

// testTenantQueuedCap: an ingest that would take a tenant past its cap of
// messages not yet finished stores none of its messages and says which
// quota; one that adds nothing (a repeat) and other tenants' go on; a
// finished message makes room.
func testTenantQueuedCap(t *testing.T, s courier.Store) {
	ctx := context.Background()
	s.SetTenantQuotas(map[string]courier.Quotas{"acme": {MaxQueued: 3}, "beta": {MaxEndpoints: 1}})
	mustIngest(t, s, tenantMessage("acme", "1", 10, base), tenantMessage("acme", "2", 10, base))
	_, err := s.Ingest(ctx, []*courier.Message{tenantMessage("acme", "3", 10, base), tenantMessage("acme", "4", 10, base)})
	wantCode(t, err, courier.CodeQuotaExceeded)
	if msg := courier.ErrorMessage(err); !strings.Contains(msg, courier.QuotaMaxQueued) || !strings.Contains(msg, "of 3") {
		t.Errorf("refusal says %q; want the quota and its cap named", msg)
	}
	for _, id := range []string{"acme~3", "acme~4"} {
		if _, err := s.Message(ctx, id); courier.ErrorCode(err) != courier.CodeNotFound {
			t.Fatalf("refused %s: %v, want not stored", id, err)
		}
	}
	mustIngest(t, s, tenantMessage("acme", "3", 10, base))
	_, err = s.Ingest(ctx, []*courier.Message{tenantMessage("acme", "4", 10, base)})
	wantCode(t, err, courier.CodeQuotaExceeded)
	if r := mustIngest(t, s, tenantMessage("acme", "1", 10, base)); r[0].Status != courier.IngestExists {
		t.Fatalf("repeat at the cap: %v, want exists", r[0].Status)
	}
	for i := range 5 { // no caps for them
		mustIngest(t, s, tenantMessage("beta", fmt.Sprint(i), 10, base), tenantMessage("", fmt.Sprint(i), 10, base))
	}
	if _, err := s.Discard(ctx, "acme~1", courier.Action{At: base, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	mustIngest(t, s, tenantMessage("acme", "4", 10, base))
	// Without the cap, no check.
	s.SetTenantQuotas(nil)
	mustIngest(t, s, tenantMessage("acme", "5", 10, base))
	if got := usage(t, s)["acme"]; got.Queued != 4 {
		t.Fatalf("acme uses %+v, want 4 messages", got)
	}
}

// testTenantBytesCap: past the cap of bytes, the refusal is of storage.
func testTenantBytesCap(t *testing.T, s courier.Store) {
	ctx := context.Background()
	s.SetTenantQuotas(map[string]courier.Quotas{"acme": {MaxBytes: 100}})
	mustIngest(t, s, tenantMessage("acme", "1", 60, base))
	_, err := s.Ingest(ctx, []*courier.Message{tenantMessage("acme", "2", 60, base)})
	wantCode(t, err, courier.CodeStorageQuota)
	if msg := courier.ErrorMessage(err); !strings.Contains(msg, courier.QuotaMaxBytes) || !strings.Contains(msg, "of 100") {
		t.Errorf("refusal says %q; want the quota and its cap named", msg)
	}
	mustIngest(t, s, tenantMessage("acme", "2", 40, base))
	if got := usage(t, s)["acme"]; got.Queued != 2 || got.Bytes != 100 {
		t.Fatalf("acme uses %+v, want 2 messages of 100 bytes", got)
	}
}

// testListTenant: a listing of a tenant's messages has its own alone.
func testListTenant(t *testing.T, s courier.Store) {
	mustIngest(t, s, tenantMessage("acme", "1", 10, base), tenantMessage("acme", "2", 10, base),
		tenantMessage("acmex", "1", 10, base), tenantMessage("", "acme", 10, base))
	for tenant, want := range map[string]string{"acme": "acme~2 acme~1", "acmex": "acmex~1", "default": "acme"} {
		if got := strings.Join(listedIDs(t, s, courier.MessageFilter{Tenant: tenant}), " "); got != want {
			t.Errorf("messages of %s: %s, want %s", tenant, got, want)
		}
	}
}
