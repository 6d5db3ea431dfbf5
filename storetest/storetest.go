// Package storetest is the conformance suite of courier.Store. Every store
// runs it from its own tests:
//
//	func TestStore(t *testing.T) { storetest.Run(t, func(t *testing.T) courier.Store { ... }) }
//
// A behaviour of the store exists when this suite checks it.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// OpenFunc opens a fresh, empty store for one test; the store is closed by
// the suite (and may be closed again by the caller's cleanup).
type OpenFunc func(t *testing.T) courier.Store

// Run runs the whole suite against stores made by open.
func Run(t *testing.T, open OpenFunc) {
	tests := suite[courier.Store]{
		{"IngestAndGet", testIngestAndGet},
		{"IngestIdempotent", testIngestIdempotent},
		{"IngestDuplicateInOneCall", testIngestDuplicateInOneCall},
		{"IngestConcurrent", testIngestConcurrent},
		{"IngestSuspended", testIngestSuspended},
		{"MessageNotFound", testMessageNotFound},
		{"ListNewestFirstWithCursor", testListCursor},
		{"ListFilters", testListFilters},
		{"ListTenants", testListTenants},
		{"PurgeTenants", testPurgeTenants},
		{"ListBadCursor", testListBadCursor},
		{"Attempts", testAttempts},
		{"Discard", testDiscard},
		{"Resubmit", testResubmit},
		{"Purge", testPurge},
		{"ClaimDue", testClaimDue},
		{"ClaimMax", testClaimMax},
		{"DueRoutes", testDueRoutes},
		{"Apply", testApply},
		{"DeliveryWritesWhatTheChangeDoes", testDeliveryWritesWhatTheChangeDoes},
		{"ExpiredLeases", testExpiredLeases},
		{"DueTimers", testDueTimers},
		{"Bulk", testBulk},
		{"BulkRedrive", testBulkRedrive},
		{"Health", testHealth},
		{"SwitchHealth", testSwitchHealth},
		{"ResolvedHealthForgotten", testResolvedHealthForgotten},
		{"HealthChanges", testHealthChanges},
		{"CountQueued", testCountQueued},
		{"CountSuspended", testCountSuspended},
		{"CountLive", testCountLive},
		{"SuspendRoute", testSuspendRoute},
		{"SuspendRouteOfManyMessages", testSuspendRouteOfManyMessages},
		{"OrderingOneAtATime", testOrderingOneAtATime},
		{"OrderingIngestSaysWaiting", testOrderingIngestSaysWaiting},
		{"OrderingBlock", testOrderingBlock},
		{"OrderingSkip", testOrderingSkip},
		{"OrderingTimers", testOrderingTimers},
		{"OrderingResubmitAll", testOrderingResubmitAll},
		{"OrderingLeaveRoute", testOrderingLeaveRoute},
		{"OrderingBulk", testOrderingBulk},
		{"OrderingConcurrent", testOrderingConcurrent},
		{"Sequence", testSequence},
		{"Workflow", testWorkflow},
		{"WorkflowResubmitElsewhere", testWorkflowResubmitElsewhere},
		{"Recipient", testRecipient},
		{"TraceParent", testTraceParent},
		{"PublishFanOut", testPublishFanOut},
		{"PublishIdempotent", testPublishIdempotent},
		{"PublishPerDelivery", testPublishPerDelivery},
		{"PublishBulkAndPurge", testPublishBulkAndPurge},
		{"Types", testTypes},
		{"Replay", testReplay},
		{"TopologyVersions", testTopologyVersions},
		{"TopologyConditional", testTopologyConditional},
		{"TopologyConcurrent", testTopologyConcurrent},
		{"Audit", testAudit},
		{"PurgeKeepsTopologyAudit", testPurgeKeepsTopologyAudit},
		{"EventsRecord", testEventsRecord},
		{"EventsList", testEventsList},
		{"EventsPurged", testEventsPurged},
		{"EventsConcurrent", testEventsConcurrent},
		{"EventsBatch", testEventsBatch},
	}
	tests = append(tests, blobTests...)
	tests = append(tests, quotaTests...)
	tests = append(tests, eraseTests...)
	tests = append(tests, eraseTenantTests...)
	tests = append(tests, suite[courier.Store]{
		{"Secret", testSecret},
		{"RecordAction", testRecordAction},
		{"Ping", testPing},
		{"ClosedStoreIsUnavailable", testClosed},
	}...)
	tests.run(t, closing(open))
}

// RunBlobs runs the suite's tests of the blob area against stores made by
// open: for a store given a blob area other than its own (a bucket), whose
// other behaviours Run checks.
func RunBlobs(t *testing.T, open OpenFunc) {
	blobTests.run(t, closing(open))
}

// closing returns open, with the store closed when the test ends.
func closing(open OpenFunc) func(t *testing.T) courier.Store {
	return func(t *testing.T) courier.Store {
		s := open(t)
		t.Cleanup(func() { s.Close() })
		return s
	}
}

// suite is a list of named tests of one kind of subject: a store, the
// limits several nodes share.
type suite[S any] []struct {
	name string
	fn   func(t *testing.T, s S)
}

// run runs each test as a subtest, on a subject of its own made by open.
func (tests suite[S]) run(t *testing.T, open func(t *testing.T) S) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, open(t)) })
	}
}

// base is the suite's reference time; stores keep microseconds.
var base = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// newMessage returns an accepted message with every sender field set.
func newMessage(id string, at time.Time) *courier.Message {
	m := &courier.Message{
		ID:           id,
		Type:         "invoice",
		Route:        "acme",
		Payload:      []byte(`{"n":"` + id + `"}`),
		ContentType:  "application/json",
		Headers:      map[string]string{"X-Tenant": "acme", "X-Trace": id},
		OrderingKey:  "customer-" + id, // a key of its own: ordering has tests of its own
		Priority:     5,
		DeliverAfter: at.Add(time.Minute),
		ExpiresAt:    at.Add(48 * time.Hour),
		Sender:       "erp",
	}
	courier.Accept(m, courier.DefaultPolicy(), true, at)
	return m
}

func mustIngest(t *testing.T, s courier.Store, msgs ...*courier.Message) []courier.IngestResult {
	t.Helper()
	return mustBatch(t, "Ingest", s.Ingest, msgs)
}

// MustApply applies changes to s and fails the test unless every one of
// them applied.
func MustApply(t testing.TB, s courier.Store, changes ...courier.Change) {
	t.Helper()
	applied := mustBatch(t, "Apply", s.Apply, changes)
	for i, ok := range applied {
		if !ok {
			t.Fatalf("the change of %s did not apply", changes[i].Message.ID)
		}
	}
}

// mustBatch calls a store method that takes a batch, named name in
// failures, with in, and fails the test unless it succeeds with one result
// for each of in.
func mustBatch[In, Out any](t testing.TB, name string, call func(context.Context, []In) ([]Out, error), in []In) []Out {
	t.Helper()
	out, err := call(context.Background(), in)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(out) != len(in) {
		t.Fatalf("%s returned %d results for %d inputs", name, len(out), len(in))
	}
	return out
}

func mustGet(t *testing.T, s courier.Store, id string) *courier.Message {
	t.Helper()
	m, err := s.Message(context.Background(), id)
	if err != nil {
		t.Fatalf("Message(%q): %v", id, err)
	}
	return m
}

func wantCode(t *testing.T, err error, want courier.Code) {
	t.Helper()
	if got := courier.ErrorCode(err); got != want {
		t.Fatalf("error code = %q (%v), want %q", got, err, want)
	}
}

// sameMessage compares what the sender gave and what Accept set.
func sameMessage(t *testing.T, got, want *courier.Message) {
	t.Helper()
	check := func(field string, g, w any) {
		t.Helper()
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: got %v, want %v", field, g, w)
		}
	}
	check("ID", got.ID, want.ID)
	check("Type", got.Type, want.Type)
	check("Route", got.Route, want.Route)
	if !bytes.Equal(got.Payload, want.Payload) {
		t.Errorf("Payload: got %q, want %q", got.Payload, want.Payload)
	}
	check("ContentType", got.ContentType, want.ContentType)
	check("Size", got.Size, len(want.Payload))
	check("Headers", got.Headers, want.Headers)
	check("OrderingKey", got.OrderingKey, want.OrderingKey)
	check("Sender", got.Sender, want.Sender)
	check("Priority", got.Priority, want.Priority)
	check("Hash", got.Hash, want.Hash)
	check("State", got.State, want.State)
	check("Reason", got.Reason, want.Reason)
	check("Attempts", got.Attempts, want.Attempts)
	check("LastError", got.LastError, want.LastError)
	for _, tm := range []struct {
		field     string
		got, want time.Time
	}{
		{"DeliverAfter", got.DeliverAfter, want.DeliverAfter},
		{"ExpiresAt", got.ExpiresAt, want.ExpiresAt},
		{"NextAttemptAt", got.NextAttemptAt, want.NextAttemptAt},
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
		{"FinishedAt", got.FinishedAt, want.FinishedAt},
	} {
		if !tm.got.Equal(tm.want.Truncate(time.Microsecond)) {
			t.Errorf("%s: got %v, want %v", tm.field, tm.got, tm.want)
		}
	}
}

func testIngestAndGet(t *testing.T, s courier.Store) {
	m := newMessage("inv-1", base.Add(123456789*time.Nanosecond))
	res := mustIngest(t, s, m)
	if res[0].Status != courier.IngestCreated {
		t.Fatalf("status = %v, want created", res[0].Status)
	}
	got := mustGet(t, s, "inv-1")
	sameMessage(t, got, m)
	if got.State != courier.StateQueued || !got.NextAttemptAt.Equal(m.DeliverAfter.Truncate(time.Microsecond)) {
		t.Errorf("state %s due %v, want queued due at deliver_after %v", got.State, got.NextAttemptAt, m.DeliverAfter)
	}

	// A message with the least a sender can give: no headers, empty payload.
	bare := &courier.Message{ID: "bare", Type: "t", Route: "r", ContentType: "text/plain"}
	courier.Accept(bare, courier.DefaultPolicy(), false, base)
	mustIngest(t, s, bare)
	got = mustGet(t, s, "bare")
	sameMessage(t, got, bare)
	if len(got.Payload) != 0 || len(got.Headers) != 0 {
		t.Errorf("bare message: payload %q headers %v, want both empty", got.Payload, got.Headers)
	}
}

func testIngestIdempotent(t *testing.T, s courier.Store) {
	first := newMessage("inv-1", base)
	mustIngest(t, s, first)

	again := newMessage("inv-1", base.Add(time.Hour)) // same content, later
	again.DeliverAfter, again.ExpiresAt = first.DeliverAfter, first.ExpiresAt
	courier.Accept(again, courier.DefaultPolicy(), true, base.Add(time.Hour))
	res := mustIngest(t, s, again)
	if res[0].Status != courier.IngestExists {
		t.Fatalf("same content: status = %v, want exists", res[0].Status)
	}
	if res[0].Message == nil || !res[0].Message.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("same content: result carries %+v, want the stored message", res[0].Message)
	}

	other := newMessage("inv-1", base)
	other.Payload = []byte(`{"n":"changed"}`)
	courier.Accept(other, courier.DefaultPolicy(), true, base)
	res = mustIngest(t, s, other)
	if res[0].Status != courier.IngestConflict {
		t.Fatalf("other content: status = %v, want conflict", res[0].Status)
	}
	if got := mustGet(t, s, "inv-1"); !bytes.Equal(got.Payload, first.Payload) {
		t.Fatalf("conflicting ingest changed the stored payload to %q", got.Payload)
	}
}

func testIngestDuplicateInOneCall(t *testing.T, s courier.Store) {
	a := newMessage("dup", base)
	b := newMessage("dup", base)
	c := newMessage("dup", base)
	c.Payload = []byte("other")
	courier.Accept(c, courier.DefaultPolicy(), true, base)
	res := mustIngest(t, s, a, b, c, newMessage("solo", base))
	want := []courier.IngestStatus{courier.IngestCreated, courier.IngestExists, courier.IngestConflict, courier.IngestCreated}
	for i := range want {
		if res[i].Status != want[i] {
			t.Errorf("result %d: status %v, want %v", i, res[i].Status, want[i])
		}
	}
}

// testIngestConcurrent checks that many concurrent callers (the case group
// commit exists for) each get their own, correct result.
func testIngestConcurrent(t *testing.T, s courier.Store) {
	const workers, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				m := newMessage(fmt.Sprintf("c-%d-%d", w, i), base)
				res, err := s.Ingest(context.Background(), []*courier.Message{m})
				if err != nil {
					errs <- err
					return
				}
				if res[0].Status != courier.IngestCreated {
					errs <- fmt.Errorf("%s: status %v", m.ID, res[0].Status)
					return
				}
			}
		}(w)
	}
	waitNoError(t, &wg, errs)
	seen := 0
	f := courier.MessageFilter{Limit: 100}
	for {
		page, err := s.Messages(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		seen += len(page.Messages)
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	if seen != workers*each {
		t.Fatalf("listed %d messages, want %d", seen, workers*each)
	}
}

func testIngestSuspended(t *testing.T, s courier.Store) {
	m := newMessage("bad-1", base)
	m.State, m.Reason, m.LastError, m.FinishedAt = courier.StateSuspended, courier.ReasonInvalid, "no route header", base
	m.NextAttemptAt = time.Time{}
	mustIngest(t, s, m)
	sameMessage(t, mustGet(t, s, "bad-1"), m)
}

func testMessageNotFound(t *testing.T, s courier.Store) {
	_, err := s.Message(context.Background(), "nope")
	wantCode(t, err, courier.CodeNotFound)
	_, err = s.Attempts(context.Background(), "nope")
	wantCode(t, err, courier.CodeNotFound)
}

func testListCursor(t *testing.T, s courier.Store) {
	const n = 25
	for i := 0; i < n; i++ {
		mustIngest(t, s, newMessage(fmt.Sprintf("m-%02d", i), base.Add(time.Duration(i)*time.Second)))
	}
	var ids []string
	f := courier.MessageFilter{Limit: 7}
	pages := 0
	for {
		page, err := s.Messages(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Messages) > 7 {
			t.Fatalf("page of %d, limit 7", len(page.Messages))
		}
		for _, m := range page.Messages {
			ids = append(ids, m.ID)
		}
		if page.Next == "" {
			break
		}
		f.Cursor = page.Next
	}
	if pages != 4 {
		t.Errorf("%d pages, want 4", pages)
	}
	if len(ids) != n {
		t.Fatalf("listed %d, want %d", len(ids), n)
	}
	for i, id := range ids {
		if want := fmt.Sprintf("m-%02d", n-1-i); id != want {
			t.Fatalf("position %d: %s, want %s (newest first)", i, id, want)
		}
	}
	// An exact multiple of the limit ends without an empty extra page.
	page, err := s.Messages(context.Background(), courier.MessageFilter{Limit: n})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != n || page.Next != "" {
		t.Errorf("limit %d: got %d messages, next %q; want all and no next", n, len(page.Messages), page.Next)
	}
}

// A tenant's messages are the ids it qualifies (courier.QualifyID), the
// default tenant's those without a tenant's mark; a listing and a bulk
// operation by tenant hold no other's.
func testListTenants(t *testing.T, s courier.Store) {
	mk := func(id, route string, at time.Time) *courier.Message {
		m := newMessage(id, at)
		m.Route = route
		courier.Accept(m, courier.DefaultPolicy(), true, at)
		return m
	}
	mustIngest(t, s,
		mk("inv:1", "orders", base),
		mk("acme~inv:1", "acme/orders", base.Add(time.Second)),
		mk("acme2~inv:1", "acme2/orders", base.Add(2*time.Second)),
		mk("acme~inv:2", "acme/orders", base.Add(3*time.Second)),
	)
	for tenant, want := range map[string][]string{
		"":                    {"acme~inv:2", "acme2~inv:1", "acme~inv:1", "inv:1"},
		courier.DefaultTenant: {"inv:1"},
		"acme":                {"acme~inv:2", "acme~inv:1"},
		"acme2":               {"acme2~inv:1"},
		"beta":                nil,
	} {
		if got := listedIDs(t, s, courier.MessageFilter{Tenant: tenant}); !slices.Equal(got, want) {
			t.Errorf("tenant %q: listed %v, want %v", tenant, got, want)
		}
	}
	page, err := s.Messages(context.Background(), courier.MessageFilter{Tenant: "acme", IDPrefix: "acme~inv:2"})
	if err != nil || len(page.Messages) != 1 {
		t.Errorf("acme's ids that begin inv:2: %v, %v; want one", page.Messages, err)
	}
	op, err := s.StartBulk(context.Background(), courier.BulkOp{ID: "acme~op", Kind: courier.ActionDiscard,
		Filter: courier.MessageFilter{Tenant: "acme", State: courier.StateQueued}, Who: "acme/ops", CreatedAt: base.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	for !op.Done {
		if op, err = s.RunBulk(context.Background(), op.ID, 10, base.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if op.Count != 2 {
		t.Errorf("acme's bulk discard counted %d, want 2", op.Count)
	}
	for _, id := range []string{"inv:1", "acme2~inv:1"} {
		if m, err := s.Message(context.Background(), id); err != nil || m.State != courier.StateQueued {
			t.Errorf("another tenant's %s after acme's bulk discard: %+v, %v; want it queued", id, m, err)
		}
	}
}

// A purge takes one tenant's finished messages, or every tenant's but
// those it leaves to a retention of their own.
func testPurgeTenants(t *testing.T, s courier.Store) {
	ctx := context.Background()
	ids := []string{"d-1", "acme~a-1", "acme2~a-1", "beta~b-1"}
	for _, id := range ids {
		m := newMessage(id, base)
		m.Route = courier.Qualify(courier.TenantOfID(id), "r")
		courier.Accept(m, courier.DefaultPolicy(), true, base)
		mustIngest(t, s, m)
		if _, err := s.Discard(ctx, id, courier.Action{At: base, Who: "ops"}); err != nil {
			t.Fatal(err)
		}
	}
	left := func() []string {
		var out []string
		for _, id := range ids {
			if _, err := s.Message(ctx, id); err == nil {
				out = append(out, id)
			}
		}
		return out
	}
	cutoff := base.Add(time.Hour)
	if n, err := s.Purge(ctx, courier.Purge{Before: cutoff, Tenant: "acme"}, 10); err != nil || n != 1 {
		t.Fatalf("purge of acme: %d, %v; want 1", n, err)
	}
	if got := left(); !slices.Equal(got, []string{"d-1", "acme2~a-1", "beta~b-1"}) {
		t.Errorf("after the purge of acme, left %v", got)
	}
	if n, err := s.Purge(ctx, courier.Purge{Before: cutoff, Except: []string{"beta", courier.DefaultTenant}}, 10); err != nil || n != 1 {
		t.Fatalf("purge of all but beta and default: %d, %v; want 1", n, err)
	}
	if got := left(); !slices.Equal(got, []string{"d-1", "beta~b-1"}) {
		t.Errorf("after the purge of all but beta and default, left %v", got)
	}
	if n, err := s.Purge(ctx, courier.Purge{Before: cutoff, Tenant: courier.DefaultTenant}, 10); err != nil || n != 1 {
		t.Fatalf("purge of default: %d, %v; want 1", n, err)
	}
	if got := left(); !slices.Equal(got, []string{"beta~b-1"}) {
		t.Errorf("after the purge of default, left %v", got)
	}
}

func testListFilters(t *testing.T, s courier.Store) {
	mk := func(id, typ, route string, at time.Time) *courier.Message {
		m := newMessage(id, at)
		m.Type, m.Route = typ, route
		courier.Accept(m, courier.DefaultPolicy(), true, at)
		return m
	}
	mustIngest(t, s,
		mk("a", "invoice", "acme", base),
		mk("b", "order", "acme", base.Add(time.Minute)),
		mk("c", "invoice", "globex", base.Add(2*time.Minute)),
	)
	c := mk("c2", "invoice", "globex", base.Add(2*time.Minute+time.Second))
	c.Sender = "shop"
	mustIngest(t, s, c)
	suspended := mk("d", "invoice", "globex", base.Add(3*time.Minute))
	suspended.State, suspended.Reason, suspended.FinishedAt = courier.StateSuspended, courier.ReasonInvalid, base
	mustIngest(t, s, suspended)
	if _, err := s.Discard(context.Background(), "b", courier.Action{At: base, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	// Characters that are wildcards of LIKE, and one of two bytes.
	mustIngest(t, s, mk("é%_1", "note", "other", base.Add(4*time.Minute)))
	tests := []struct {
		name string
		f    courier.MessageFilter
		want []string
	}{
		{"all", courier.MessageFilter{}, []string{"é%_1", "d", "c2", "c", "b", "a"}},
		{"type", courier.MessageFilter{Type: "invoice"}, []string{"d", "c2", "c", "a"}},
		{"routes", courier.MessageFilter{Routes: []string{"acme", "nowhere"}}, []string{"b", "a"}},
		{"routes and state", courier.MessageFilter{Routes: []string{"acme", "globex"}, State: courier.StateQueued}, []string{"c2", "c", "a"}},
		{"id prefix", courier.MessageFilter{IDPrefix: "c"}, []string{"c2", "c"}},
		{"id prefix whole", courier.MessageFilter{IDPrefix: "c2"}, []string{"c2"}},
		{"id prefix longer than ids", courier.MessageFilter{IDPrefix: "c22"}, nil},
		{"id prefix is case-sensitive", courier.MessageFilter{IDPrefix: "C"}, nil},
		{"id prefix with wildcards", courier.MessageFilter{IDPrefix: "é%_"}, []string{"é%_1"}},
		{"id prefix wildcard alone", courier.MessageFilter{IDPrefix: "%"}, nil},
		{"id prefix and route", courier.MessageFilter{IDPrefix: "c", Route: "acme"}, nil},
		{"route", courier.MessageFilter{Route: "globex"}, []string{"d", "c2", "c"}},
		{"state", courier.MessageFilter{State: courier.StateQueued}, []string{"é%_1", "c2", "c", "a"}},
		{"sender", courier.MessageFilter{Sender: "shop"}, []string{"c2"}},
		{"sender and route", courier.MessageFilter{Sender: "erp", Route: "globex"}, []string{"d", "c"}},
		{"state discarded", courier.MessageFilter{State: courier.StateDiscarded}, []string{"b"}},
		{"reason", courier.MessageFilter{Reason: courier.ReasonInvalid}, []string{"d"}},
		{"type and route", courier.MessageFilter{Type: "invoice", Route: "acme"}, []string{"a"}},
		{"created after", courier.MessageFilter{CreatedAfter: base.Add(time.Minute)}, []string{"é%_1", "d", "c2", "c", "b"}},
		{"created before", courier.MessageFilter{CreatedBefore: base.Add(time.Minute)}, []string{"a"}},
		{"endpoint none", courier.MessageFilter{Endpoint: "acme-primary"}, nil},
		{"no match", courier.MessageFilter{Type: "nothing"}, nil},
	}
	for _, tt := range tests {
		page, err := s.Messages(context.Background(), tt.f)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var got []string
		for _, m := range page.Messages {
			got = append(got, m.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func testListBadCursor(t *testing.T, s courier.Store) {
	for _, c := range []string{"%%%", "bm90LWEtbnVtYmVy", "LTE"} {
		_, err := s.Messages(context.Background(), courier.MessageFilter{Cursor: c})
		wantCode(t, err, courier.CodeInvalidArgument)
	}
}

func testAttempts(t *testing.T, s courier.Store) {
	mustIngest(t, s, newMessage("a", base))
	got, err := s.Attempts(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if got == nil || len(got) != 0 {
		t.Fatalf("attempts of a new message = %#v, want an empty list", got)
	}
}

func testDiscard(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustIngest(t, s, newMessage("q", base))
	at := base.Add(time.Hour)
	m, err := s.Discard(ctx, "q", courier.Action{At: at, Who: "ops", Kind: courier.ActionResubmit})
	if err != nil {
		t.Fatal(err)
	}
	if m.State != courier.StateDiscarded || !m.FinishedAt.Equal(at) || !m.NextAttemptAt.IsZero() {
		t.Fatalf("after discard: state %s finished %v due %v", m.State, m.FinishedAt, m.NextAttemptAt)
	}
	if got := mustGet(t, s, "q"); got.State != courier.StateDiscarded {
		t.Fatalf("stored state %s, want discarded", got.State)
	}
	_, err = s.Discard(ctx, "q", courier.Action{At: at, Who: "ops"})
	wantCode(t, err, courier.CodeConflict)
	_, err = s.Discard(ctx, "missing", courier.Action{At: at, Who: "ops"})
	wantCode(t, err, courier.CodeNotFound)

	actions, err := s.Actions(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 1 {
		t.Fatalf("actions = %+v, want one discard (the refused second one is not recorded)", actions)
	}
	if a := actions[0]; a.Kind != courier.ActionDiscard || a.Who != "ops" || !a.At.Equal(at) || a.Subject != "q" {
		t.Errorf("action = %+v, want discard by ops at %v", a, at)
	}
}

func testResubmit(t *testing.T, s courier.Store) {
	ctx := context.Background()
	m := newMessage("s", base)
	m.State, m.Reason, m.LastError, m.FinishedAt = courier.StateSuspended, courier.ReasonRejected, "HTTP 422", base
	mustIngest(t, s, m)
	mustIngest(t, s, newMessage("queued", base))

	at := base.Add(2 * time.Hour)
	got, err := s.Resubmit(ctx, "s", "globex", courier.Action{At: at, Who: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != courier.StateQueued || got.Reason != "" || got.Attempts != 0 || got.ResubmitCount != 1 ||
		got.Route != "globex" || !got.NextAttemptAt.Equal(at) || !got.FinishedAt.IsZero() {
		t.Fatalf("after resubmit: %+v", got)
	}
	if got.LastError != "HTTP 422" {
		t.Errorf("resubmit lost the last error: %q", got.LastError)
	}
	_, err = s.Resubmit(ctx, "s", "", courier.Action{At: at, Who: "alice"})
	wantCode(t, err, courier.CodeConflict)
	_, err = s.Resubmit(ctx, "queued", "", courier.Action{At: at, Who: "alice"})
	wantCode(t, err, courier.CodeConflict)
	_, err = s.Resubmit(ctx, "missing", "", courier.Action{At: at, Who: "alice"})
	wantCode(t, err, courier.CodeNotFound)

	actions, err := s.Actions(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 1 || actions[0].Kind != courier.ActionResubmit || actions[0].Who != "alice" || actions[0].Detail != "route=globex" {
		t.Fatalf("actions = %+v, want one resubmit by alice to globex", actions)
	}

	// Without a new route the route stays.
	m2 := newMessage("s2", base)
	m2.State, m2.Reason = courier.StateSuspended, courier.ReasonExhausted
	mustIngest(t, s, m2)
	got, err = s.Resubmit(ctx, "s2", "", courier.Action{At: at, Who: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Route != "acme" || got.ResubmitCount != 1 {
		t.Errorf("resubmit without route: route %q count %d", got.Route, got.ResubmitCount)
	}
}

func testPurge(t *testing.T, s courier.Store) {
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		mustIngest(t, s, newMessage(fmt.Sprintf("old-%d", i), base))
		if _, err := s.Discard(ctx, fmt.Sprintf("old-%d", i), courier.Action{At: base, Who: "ops"}); err != nil {
			t.Fatal(err)
		}
	}
	mustIngest(t, s, newMessage("recent", base))
	if _, err := s.Discard(ctx, "recent", courier.Action{At: base.Add(48 * time.Hour), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	mustIngest(t, s, newMessage("queued", base))
	susp := newMessage("suspended", base)
	susp.State, susp.Reason, susp.FinishedAt = courier.StateSuspended, courier.ReasonExhausted, base
	mustIngest(t, s, susp)

	cutoff := base.Add(24 * time.Hour)
	n, err := s.Purge(ctx, courier.Purge{Before: cutoff}, 3)
	if err != nil || n != 3 {
		t.Fatalf("first purge: %d, %v; want 3 (the limit)", n, err)
	}
	n, err = s.Purge(ctx, courier.Purge{Before: cutoff}, 3)
	if err != nil || n != 2 {
		t.Fatalf("second purge: %d, %v; want the 2 left", n, err)
	}
	n, err = s.Purge(ctx, courier.Purge{Before: cutoff}, 3)
	if err != nil || n != 0 {
		t.Fatalf("third purge: %d, %v; want 0", n, err)
	}
	for _, id := range []string{"recent", "queued", "suspended"} {
		mustGet(t, s, id)
	}
	_, err = s.Message(ctx, "old-0")
	wantCode(t, err, courier.CodeNotFound)
	if actions, err := s.Actions(ctx, "old-0"); err != nil || len(actions) != 0 {
		t.Errorf("actions of a purged message: %v, %v; want none", actions, err)
	}
	// A purged id may be used again.
	if res := mustIngest(t, s, newMessage("old-0", base)); res[0].Status != courier.IngestCreated {
		t.Errorf("re-ingest after purge: %v, want created", res[0].Status)
	}
}

func testPing(t *testing.T, s courier.Store) {
	if err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// testClosed: a closed store answers every call, read or write, with
// unavailable (a 503 that tells the caller to try again), not with an
// internal error.
func testClosed(t *testing.T, s courier.Store) {
	mustIngest(t, s, newMessage("early", base))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := []struct {
		name string
		call func() error
	}{
		{"Ingest", func() error {
			_, err := s.Ingest(ctx, []*courier.Message{newMessage("late", base)})
			return err
		}},
		{"Ping", func() error { return s.Ping(ctx) }},
		{"Message", func() error { _, err := s.Message(ctx, "early"); return err }},
		{"Messages", func() error { _, err := s.Messages(ctx, courier.MessageFilter{}); return err }},
		{"ClaimDue", func() error {
			_, err := s.ClaimDue(ctx, courier.Claim{Now: base.Add(time.Hour), LeaseUntil: base.Add(2 * time.Hour), Owner: "n",
				Routes: []courier.RouteQuota{{Route: "acme", Limit: 1}}})
			return err
		}},
		{"Discard", func() error { _, err := s.Discard(ctx, "early", courier.Action{At: base, Who: "ops"}); return err }},
		{"Health", func() error { _, err := s.Health(ctx); return err }},
		{"TopologyChanges", func() error { _, _, err := s.TopologyChanges(ctx, 0); return err }},
		{"WriteTopology", func() error { _, err := s.WriteTopology(ctx, 0, nil, nil); return err }},
		{"Audit", func() error { _, err := s.Audit(ctx, courier.AuditFilter{}); return err }},
	}
	for _, c := range calls {
		if err := c.call(); courier.ErrorCode(err) != courier.CodeUnavailable {
			t.Errorf("%s on a closed store: code %q (%v), want unavailable", c.name, courier.ErrorCode(err), err)
		}
	}
	// It says so at once: a caller is not kept waiting until it gives up.
	for i := range 10 {
		m := newMessage(fmt.Sprintf("late-%d", i), base)
		m.OrderingKey = ""
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := s.Ingest(ctx, []*courier.Message{m})
		cancel()
		if courier.ErrorCode(err) != courier.CodeUnavailable || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ingest without an ordering key on a closed store: %v; want unavailable at once", err)
		}
	}
}

func testCountSuspended(t *testing.T, s courier.Store) {
	ctx := context.Background()
	suspended := func(id, sender string) *courier.Message {
		m := newMessage(id, base)
		m.Sender = sender
		m.State, m.Reason, m.FinishedAt, m.NextAttemptAt = courier.StateSuspended, courier.ReasonInvalid, base, time.Time{}
		return m
	}
	queued := newMessage("q-1", base) // sender erp, but queued
	mustIngest(t, s, queued, suspended("s-1", "erp"), suspended("s-2", "erp"), suspended("s-3", "erp"),
		suspended("s-4", "shop"), suspended("s-5", ""))
	if _, err := s.Discard(ctx, "s-3", courier.Action{At: base, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		sender string
		limit  int
		want   int
	}{
		{"erp", 10, 2},
		{"erp", 1, 1},
		{"shop", 10, 1},
		{"nobody", 10, 0},
	}
	for _, tt := range tests {
		got, err := s.CountSuspended(ctx, tt.sender, tt.limit)
		if err != nil {
			t.Fatalf("CountSuspended(%q, %d): %v", tt.sender, tt.limit, err)
		}
		if got != tt.want {
			t.Errorf("CountSuspended(%q, %d) = %d, want %d", tt.sender, tt.limit, got, tt.want)
		}
	}
}
