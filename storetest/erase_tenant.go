package storetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// Inspector is what a store shows the suite of its tables, from its own
// tests (an export_test.go), so that a test can tell every row an
// operation left or changed, whatever table holds it.
type Inspector interface {
	// Rows returns every row of every table of the store, each as the
	// text of its columns (RowText), by table; a row that refers to a
	// message by its seq alone (a payload's) with the message's id.
	Rows(ctx context.Context) (map[string][]string, error)
	// BlobsLeft returns those of refs that the blob area still holds, as
	// the area itself lists its blobs (for large objects,
	// pg_largeobject_metadata).
	BlobsLeft(ctx context.Context, refs []string) ([]string, error)
}

// InspectRows is the Inspector.Rows of a store whose tables lists its
// tables, quote quotes a table's name in a statement, and values reads the
// rows of a statement as the values of their columns.
func InspectRows(tables []string, quote func(table string) string, values func(query string) ([][]any, error)) (map[string][]string, error) {
	out := map[string][]string{}
	for _, table := range tables {
		query := `SELECT * FROM ` + quote(table)
		if table == "bodies" {
			query = `SELECT b.*, m.id FROM bodies b LEFT JOIN messages m ON m.seq = b.seq`
		}
		rows, err := values(query)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		for _, vals := range rows {
			out[table] = append(out[table], RowText(vals))
		}
	}
	return out, nil
}

// RowText is a row's columns (vals) as Inspector.Rows shows them: each as
// fmt prints it (bytes as text), joined by " | ".
func RowText(vals []any) string {
	texts := make([]string, len(vals))
	for i, v := range vals {
		if b, ok := v.([]byte); ok {
			v = string(b)
		}
		texts[i] = fmt.Sprint(v)
	}
	return strings.Join(texts, " | ")
}

// BlobsOpened returns those of refs that blobs still opens: the
// Inspector.BlobsLeft of a blob area that lists its blobs no other way.
func BlobsOpened(ctx context.Context, blobs courier.Blobs, refs []string) ([]string, error) {
	var left []string
	for _, ref := range refs {
		r, err := blobs.Open(ctx, ref)
		switch {
		case err == nil:
			r.Close()
			left = append(left, ref)
		case courier.ErrorCode(err) != courier.CodeNotFound:
			return nil, err
		}
	}
	return left, nil
}

// eraseTenantTests are the tests of the erasure of a tenant.
var eraseTenantTests = suite[courier.Store]{
	{"EraseTenant", testEraseTenant},
	{"EraseTenantRefused", testEraseTenantRefused},
}

// tenantData gives tenant a message in each state, one in flight (which it
// returns), one with attempts, actions, an ordering key and a published
// message of two deliveries with its payload in a blob; health, an event, a
// topology object (with its audit entry), a bulk operation, and the
// shared limits of its endpoint where the store keeps them. It returns the
// in-flight message as claimed.
func tenantData(t *testing.T, s courier.Store, tenant string, at time.Time) *courier.Message {
	t.Helper()
	ctx := context.Background()
	id := func(i string) string { return courier.QualifyID(tenant, i) }
	name := func(n string) string { return courier.Qualify(tenant, n) }
	msg := func(i, route string) *courier.Message {
		m := &courier.Message{ID: id(i), Type: name("invoice"), Route: name(route), Payload: []byte(`{"of":"` + tenant + `"}`),
			ContentType: "application/json", OrderingKey: "k-" + i}
		courier.Accept(m, courier.DefaultPolicy(), false, at)
		return m
	}
	queued, inflight, delivered, discarded := msg("q-1", "r"), msg("i-1", "fly"), msg("f-1", "done"), msg("d-1", "r")
	suspended := msg("s-1", "r")
	suspended.State, suspended.Reason, suspended.FinishedAt, suspended.TimerAt = courier.StateSuspended, courier.ReasonExhausted, at, time.Time{}
	mustIngest(t, s, queued, inflight, delivered, discarded, suspended)

	// One delivered, with its attempt; one left in flight.
	claimed := claim(t, s, at.Add(time.Minute), courier.RouteQuota{Route: name("done"), Limit: 1})
	MustApply(t, s, Delivered(claimed, at.Add(time.Minute), true)...)
	claimed = claim(t, s, at.Add(time.Minute), courier.RouteQuota{Route: name("fly"), Limit: 1})
	if len(claimed) != 1 {
		t.Fatalf("claimed %d of %s's route fly, want 1", len(claimed), tenant)
	}
	if _, err := s.Discard(ctx, id("d-1"), courier.Action{At: at, Who: "ops"}); err != nil {
		t.Fatal(err)
	}

	// Published, its payload in a blob.
	pub, sp := spoolMessage(t, s, id("o-1"), payloadOf(courier.InlineMax+1000, tenant[0]))
	defer sp.Close()
	pub.Type, pub.Route = name("order"), ""
	var deliveries []*courier.Message
	for _, sub := range []string{"crm", "erp"} {
		d := *pub
		d.Route, d.Subscription = name(sub), name(sub)
		deliveries = append(deliveries, &d)
	}
	mustIngest(t, s, deliveries...)

	ep := name("ep")
	if _, err := s.UpdateHealth(ctx, ep, func(h courier.EndpointHealth) courier.EndpointHealth {
		h.State, h.Failures = courier.HealthSuspended, 3
		h.SuspendedUntil, h.UpdatedAt = at.Add(time.Hour), at
		return h
	}, nil); err != nil {
		t.Fatal(err)
	}
	recordEvent(t, s, eventAt(courier.EventEndpointSuspended, ep, at), false)
	v, err := s.TopologyVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	o := object(courier.KindEndpoint, ep, `{"url":"http://`+tenant+`.example"}`, "admin", at)
	mustWriteTopology(t, s, v, []courier.TopologyObject{o}, change(courier.ActionCreate, o, "", string(o.Spec)))

	op, err := s.StartBulk(ctx, courier.BulkOp{ID: id("op-1"), Kind: courier.ActionDiscard, Who: "ops", CreatedAt: at,
		Filter: courier.MessageFilter{Tenant: tenant, Type: name("nothing")}})
	if err != nil {
		t.Fatal(err)
	}
	if op, err = s.RunBulk(ctx, op.ID, 10, at); err != nil || !op.Done {
		t.Fatalf("the bulk operation of %s: %+v, %v", tenant, op, err)
	}
	if l, ok := s.(courier.SharedLimits); ok {
		if _, err := l.AcquireSlots(ctx, "node-1", []courier.SlotRequest{{Endpoint: ep, Max: 4, N: 1}}, time.Hour, at); err != nil {
			t.Fatal(err)
		}
		if _, _, err := l.BookStart(ctx, ep, time.Second, time.Second, at); err != nil {
			t.Fatal(err)
		}
	}
	if b, ok := s.(courier.IngestTokens); ok {
		if _, _, err := b.TakeTokens(ctx, tenant, courier.Rate{N: 10, Per: time.Second}, 10, 1, at); err != nil {
			t.Fatal(err)
		}
	}
	return claimed[0]
}

// ownRow reports whether a row, as an Inspector shows it, is tenant's: it
// names one of its ids or qualified names, or one of its blobs, or is kept
// by its name (the first column).
func ownRow(row, tenant string, blobs []string) bool {
	if strings.Contains(row, courier.QualifyID(tenant, "")) || strings.Contains(row, courier.Qualify(tenant, "")) ||
		strings.HasPrefix(row, tenant+" | ") {
		return true
	}
	for _, b := range blobs {
		if strings.Contains(row, b) {
			return true
		}
	}
	return false
}

// testEraseTenant: an erasure deletes a tenant's messages in every state
// (one in flight among them), their deliveries, attempts, actions, payloads
// and blobs, batch by batch with its progress, and once none is left its
// other rows; it resumes after a batch was cut off, erases a message that
// came after it began, and leaves no row of the tenant's in any table but
// the audit log of its topology and the tombstone of its deleted objects.
// The other tenants, one whose name begins with the erased one's and one
// that a LIKE pattern of it would match, and the default tenant, keep
// ingesting meanwhile, and none of their rows changes.
func testEraseTenant(t *testing.T, s courier.Store) {
	ctx := context.Background()
	in, ok := s.(Inspector)
	if !ok {
		t.Fatalf("the store %T shows the suite no rows (storetest.Inspector)", s)
	}
	rows := func() map[string][]string {
		t.Helper()
		r, err := in.Rows(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	const erased = "ac_me"
	others := []string{"ac_me2", "acxme", courier.DefaultTenant}
	inflight := tenantData(t, s, erased, base)
	for _, tn := range others {
		tenantData(t, s, tn, base)
	}
	// The tenant's objects deleted, as the deletion of a tenant does first:
	// a tombstone and its audit entry.
	ep := courier.Qualify(erased, "ep")
	v, err := s.TopologyVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gone := object(courier.KindEndpoint, ep, "", "root", base.Add(time.Minute))
	mustWriteTopology(t, s, v, []courier.TopologyObject{gone}, change(courier.ActionDelete, gone, `{"url":"http://ac_me.example"}`, ""))

	var blobs []string
	for _, sub := range []string{"crm", "erp"} {
		d := mustGet(t, s, courier.DeliveryKey(courier.QualifyID(erased, "o-1"), courier.Qualify(erased, sub)))
		if !d.HasBlob() {
			t.Fatalf("delivery %s has no blob", d.Key())
		}
		blobs = append(blobs, d.Blob)
	}
	blobs = slices.Compact(blobs)
	if left, err := in.BlobsLeft(ctx, blobs); err != nil || len(left) != 1 {
		t.Fatalf("blobs of the tenant before: %v, %v; want its one blob", left, err)
	}
	before := rows()
	usageBefore := usage(t, s)

	op, err := s.StartBulk(ctx, courier.BulkOp{ID: "erase." + erased, Kind: courier.ActionEraseTenant, Who: "root",
		Filter: courier.MessageFilter{Tenant: erased}, CreatedAt: base.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	const limit = 2
	rowsOfTenant := 7 // q-1, i-1, f-1, d-1, s-1 and the two deliveries of o-1
	var during []string
	batches, count := 0, 0
	position := int64(0)
	for !op.Done {
		batches++
		allow := limit
		if batches > 20 {
			t.Fatalf("not done after %d batches: %+v", batches, op)
		}
		// The others keep ingesting, a type of their own that is new.
		for _, tn := range others {
			m := &courier.Message{ID: courier.QualifyID(tn, fmt.Sprintf("late-%d", batches)), Type: courier.Qualify(tn, "late"),
				Route: courier.Qualify(tn, "r"), Payload: []byte("{}"), ContentType: "application/json"}
			courier.Accept(m, courier.DefaultPolicy(), false, base)
			mustIngest(t, s, m)
			during = append(during, m.ID)
		}
		switch batches {
		case 2:
			// A message of the tenant that came after the erasure began
			// (an ingest under way when the tenant was deleted).
			m := &courier.Message{ID: courier.QualifyID(erased, "late"), Type: courier.Qualify(erased, "invoice"),
				Route: courier.Qualify(erased, "r"), Payload: []byte("{}"), ContentType: "application/json"}
			courier.Accept(m, courier.DefaultPolicy(), false, base)
			mustIngest(t, s, m)
			rowsOfTenant++
		case 3:
			// A batch cut off (its caller gave up) is done whole or not
			// at all: the store may still finish a write given up on. The
			// next one goes on from there.
			cut, cancel := context.WithCancel(ctx)
			cancel()
			if _, err := s.RunBulk(cut, op.ID, limit, base.Add(3*time.Minute)); err == nil {
				t.Fatal("RunBulk with a context ended: no error")
			}
			if again, err := s.Bulk(ctx, op.ID); err != nil || again.Count < op.Count || again.Count > op.Count+limit {
				t.Fatalf("after a batch cut off: %+v, %v; want it as it was, or one batch on: %+v", again, err, op)
			}
			allow = 2 * limit // the batch below may show the one cut off too
			pending, err := s.PendingBulks(ctx)
			if err != nil || !slices.ContainsFunc(pending, func(p courier.BulkOp) bool { return p.ID == op.ID }) {
				t.Fatalf("pending operations %+v (%v) do not hold the erasure", pending, err)
			}
		}
		op, err = s.RunBulk(ctx, op.ID, limit, base.Add(3*time.Minute))
		if err != nil {
			t.Fatalf("batch %d: %v", batches, err)
		}
		if op.Count-count > allow || op.Count < count || op.Position < position || op.Position > op.End {
			t.Fatalf("batch %d: count %d -> %d, position %d -> %d of %d; want at most %d more, moving on", batches, count,
				op.Count, position, op.Position, op.End, allow)
		}
		if !op.Done && op.Count == count && count < rowsOfTenant {
			t.Fatalf("batch %d erased nothing with %d of %d left", batches, rowsOfTenant-count, rowsOfTenant)
		}
		count, position = op.Count, op.Position
		// The tenant's use is what it has left, batch by batch.
		if got, want := usage(t, s)[erased], recount(t, s)[erased]; got.Queued != want.Queued || got.Bytes != want.Bytes {
			t.Fatalf("after batch %d the erased tenant's use is %d messages of %d bytes, want %d of %d", batches,
				got.Queued, got.Bytes, want.Queued, want.Bytes)
		}
	}
	if op.Count != rowsOfTenant || batches < rowsOfTenant/limit {
		t.Fatalf("done after %d batches with count %d, want %d in batches of %d", batches, op.Count, rowsOfTenant, limit)
	}
	if stored, err := s.Bulk(ctx, op.ID); err != nil || !stored.Done || stored.Count != op.Count || stored.Who != "root" ||
		stored.Kind != courier.ActionEraseTenant || stored.Filter.Tenant != erased {
		t.Fatalf("the erasure as stored: %+v, %v", stored, err)
	}
	if again, err := s.RunBulk(ctx, op.ID, limit, base.Add(4*time.Minute)); err != nil || !again.Done || again.Count != op.Count {
		t.Fatalf("RunBulk of the erasure done: %+v, %v", again, err)
	}

	// The outcome of the message that was in flight changes nothing.
	applied, err := s.Apply(ctx, Delivered([]*courier.Message{inflight}, base.Add(5*time.Minute), true))
	if err != nil || applied[0] {
		t.Fatalf("the outcome of an erased message: applied %v, %v; want nothing applied", applied, err)
	}
	applied, err = s.Apply(ctx, Delivered([]*courier.Message{inflight}, base.Add(5*time.Minute), false))
	if err != nil || applied[0] {
		t.Fatalf("the outcome of an erased message written whole: applied %v, %v; want nothing applied", applied, err)
	}

	after := rows()
	if left, err := in.BlobsLeft(ctx, blobs); err != nil || len(left) != 0 {
		t.Errorf("blobs of the tenant left: %v, %v", left, err)
	}
	// No row of the tenant's is left but its topology's audit entries and
	// the tombstone of its endpoint, which every node reads to learn of
	// the deletion.
	var audit int
	for table, rs := range after {
		for _, r := range rs {
			if !ownRow(r, erased, blobs) {
				continue
			}
			switch {
			case table == "topology_objects" && !strings.Contains(r, "example"):
			case table == "actions" && strings.Contains(r, "endpoint") && slices.Contains(before[table], r):
				audit++
			default:
				t.Errorf("left in %s: %s", table, r)
			}
		}
	}
	if audit != 2 {
		t.Errorf("%d audit entries of the tenant's topology left, want its create and delete", audit)
	}
	// Every row of the others is as it was; the rows of the erasure
	// itself, and of what the others ingested, are new. Their use is kept
	// apart, in rows that their ingests changed: it is compared as read.
	for table, rs := range before {
		if table == "tenant_usage" {
			continue
		}
		for _, r := range rs {
			if !ownRow(r, erased, blobs) && !slices.Contains(after[table], r) {
				t.Errorf("a row of %s changed or went: %s", table, r)
			}
		}
	}
	// A row that is new is one of what the others ingested meanwhile, or
	// the erasure's.
	for table, rs := range after {
		for _, r := range rs {
			if slices.Contains(before[table], r) || table == "tenant_usage" || table == "bulk_ops" && strings.Contains(r, op.ID) {
				continue
			}
			if !strings.Contains(r, "late") {
				t.Errorf("a row of %s is new: %s", table, r)
			}
		}
	}
	use := usage(t, s)
	if u, ok := use[erased]; ok {
		t.Errorf("the erased tenant still has a use: %+v", u)
	}
	for _, tn := range others {
		if got, want := use[tn].Queued, usageBefore[tn].Queued+int64(batches); got != want {
			t.Errorf("tenant %s has %d messages not yet finished, want %d", tn, got, want)
		}
	}
	for _, id := range during {
		mustGet(t, s, id)
	}
	if types, err := s.Types(ctx); err != nil {
		t.Fatal(err)
	} else {
		for _, ty := range types {
			if courier.TenantOf(ty.Type) == erased {
				t.Errorf("the type %s is still in the catalog", ty.Type)
			}
		}
	}
	page, err := s.Messages(ctx, courier.MessageFilter{Tenant: erased})
	if err != nil || len(page.Messages) != 0 {
		t.Fatalf("messages of the erased tenant: %d, %v", len(page.Messages), err)
	}
}

// testEraseTenantRefused: the default and system tenants, whose names are
// no prefix of what they own, cannot be erased.
func testEraseTenantRefused(t *testing.T, s courier.Store) {
	for _, tn := range []string{"", courier.DefaultTenant, courier.SystemTenant, "a/b"} {
		_, err := s.StartBulk(context.Background(), courier.BulkOp{ID: "erase-" + tn, Kind: courier.ActionEraseTenant,
			Who: "root", Filter: courier.MessageFilter{Tenant: tn}, CreatedAt: base})
		wantCode(t, err, courier.CodeInvalidArgument)
	}
}
