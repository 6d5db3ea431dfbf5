package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// object is a topology object as a test writes it; spec "" writes a
// tombstone.
func object(kind courier.TopologyKind, name, spec, by string, at time.Time) courier.TopologyObject {
	o := courier.TopologyObject{Kind: kind, Name: name, UpdatedAt: at, UpdatedBy: by}
	if spec != "" {
		o.Spec = []byte(spec)
	}
	return o
}

// change is the audit entry of a topology change, as a test records it.
func change(kind courier.ActionKind, o courier.TopologyObject, before, after string) courier.Action {
	return courier.Action{At: o.UpdatedAt, Who: o.UpdatedBy, Kind: kind, Subject: o.Name, Object: o.Kind, Before: before, After: after}
}

func mustWriteTopology(t *testing.T, s courier.Store, base int64, objects []courier.TopologyObject, actions ...courier.Action) int64 {
	t.Helper()
	v, err := s.WriteTopology(context.Background(), base, objects, actions)
	if err != nil {
		t.Fatalf("WriteTopology(base %d): %v", base, err)
	}
	if v != base+1 {
		t.Fatalf("WriteTopology(base %d) = version %d, want %d", base, v, base+1)
	}
	return v
}

// mustChanges returns the objects written after since, as "kind/name@version"
// (with "-" for a tombstone) in order of that text, and the version.
func mustChanges(t *testing.T, s courier.Store, since int64) (map[string]courier.TopologyObject, string, int64) {
	t.Helper()
	objs, v, err := s.TopologyChanges(context.Background(), since)
	if err != nil {
		t.Fatalf("TopologyChanges(%d): %v", since, err)
	}
	byKey := map[string]courier.TopologyObject{}
	var keys []string
	for _, o := range objs {
		key := string(o.Kind) + "/" + o.Name
		if _, dup := byKey[key]; dup {
			t.Fatalf("TopologyChanges(%d) has %s twice", since, key)
		}
		byKey[key] = o
		tomb := ""
		if o.Spec == nil {
			tomb = "-"
		}
		keys = append(keys, fmt.Sprintf("%s@%d%s", key, o.Version, tomb))
	}
	slices.Sort(keys)
	return byKey, strings.Join(keys, " "), v
}

func wantVersion(t *testing.T, s courier.Store, want int64) {
	t.Helper()
	if got, err := s.TopologyVersion(context.Background()); err != nil || got != want {
		t.Fatalf("TopologyVersion = %d, %v; want %d", got, err, want)
	}
}

// sameTime compares a time read back with the one written, at the
// microseconds that stores keep.
func sameTime(got, want time.Time) bool { return got.Equal(want.Truncate(time.Microsecond)) }

func testTopologyVersions(t *testing.T, s courier.Store) {
	wantVersion(t, s, 0)
	if _, got, v := mustChanges(t, s, 0); got != "" || v != 0 {
		t.Fatalf("changes of a new store: %q at version %d, want none at 0", got, v)
	}

	// Specs come back byte for byte: key order, spacing and escapes kept.
	acmeSpec := `{"url": "https://acme.example/hook",  "headers":{"X-B":"2","X-A":"1"}, "name":"Ac\u006de é"}`
	at := base.Add(123456789 * time.Nanosecond)
	acme := object(courier.KindEndpoint, "acme", acmeSpec, "alice", at)
	v1 := mustWriteTopology(t, s, 0, []courier.TopologyObject{acme,
		object(courier.KindRoute, "acme", `{"endpoints":["acme"]}`, "alice", at), // same name, another kind
		object(courier.KindRoute, "orders", `{"endpoints":["acme"]}`, "alice", at)})
	wantVersion(t, s, v1)
	objs, got, v := mustChanges(t, s, 0)
	if want := "endpoint/acme@1 route/acme@1 route/orders@1"; got != want || v != 1 {
		t.Fatalf("after the first write: %q at %d, want %q at 1", got, v, want)
	}
	if o := objs["endpoint/acme"]; string(o.Spec) != acmeSpec || o.UpdatedBy != "alice" || !sameTime(o.UpdatedAt, at) {
		t.Errorf("endpoint read back as spec %s by %q at %v; want %s by alice at %v", o.Spec, o.UpdatedBy, o.UpdatedAt, acmeSpec, at)
	}

	// Each write is the next version; a reader at a version gets only
	// what came after it.
	at2 := base.Add(time.Minute)
	v2 := mustWriteTopology(t, s, v1, []courier.TopologyObject{object(courier.KindEndpoint, "acme", `{"url":"https://acme.example/v2"}`, "bob", at2)})
	objs, got, v = mustChanges(t, s, v1)
	if want := "endpoint/acme@2"; got != want || v != v2 {
		t.Fatalf("changes since %d: %q at %d, want %q at %d", v1, got, v, want, v2)
	}
	if o := objs["endpoint/acme"]; string(o.Spec) != `{"url":"https://acme.example/v2"}` || o.UpdatedBy != "bob" || !sameTime(o.UpdatedAt, at2) {
		t.Errorf("replaced endpoint: spec %s by %q at %v, version %d", o.Spec, o.UpdatedBy, o.UpdatedAt, o.Version)
	}
	if _, got, _ := mustChanges(t, s, 0); got != "endpoint/acme@2 route/acme@1 route/orders@1" {
		t.Errorf("changes since 0 after a replace: %q", got)
	}

	// A delete leaves a tombstone, which a reader behind it learns of.
	v3 := mustWriteTopology(t, s, v2, []courier.TopologyObject{object(courier.KindRoute, "orders", "", "bob", at2)})
	objs, got, v = mustChanges(t, s, v2)
	if want := "route/orders@3-"; got != want || v != v3 {
		t.Fatalf("changes after a delete: %q at %d, want %q at %d", got, v, want, v3)
	}
	if o := objs["route/orders"]; o.Spec != nil || o.UpdatedBy != "bob" {
		t.Errorf("tombstone: %+v, want a nil spec by bob", o)
	}
	if _, got, _ := mustChanges(t, s, 0); got != "endpoint/acme@2 route/acme@1 route/orders@3-" {
		t.Errorf("changes since 0 after a delete: %q", got)
	}

	// Made again after its delete.
	v4 := mustWriteTopology(t, s, v3, []courier.TopologyObject{object(courier.KindRoute, "orders", `{"endpoints":[]}`, "carol", at2)})
	objs, got, _ = mustChanges(t, s, v3)
	if got != "route/orders@4" || string(objs["route/orders"].Spec) != `{"endpoints":[]}` {
		t.Fatalf("changes after a re-create: %q, spec %s", got, objs["route/orders"].Spec)
	}
	if _, got, v = mustChanges(t, s, v4); got != "" || v != v4 {
		t.Errorf("changes since the current version: %q at %d, want none at %d", got, v, v4)
	}
	wantVersion(t, s, 4)
}

func testTopologyConditional(t *testing.T, s courier.Store) {
	ctx := context.Background()
	a := object(courier.KindEndpoint, "a", `{"url":"https://a.example"}`, "alice", base)
	v1 := mustWriteTopology(t, s, 0, []courier.TopologyObject{a}, change(courier.ActionCreate, a, "", string(a.Spec)))
	b := object(courier.KindEndpoint, "b", `{"url":"https://b.example"}`, "bob", base.Add(time.Minute))
	for _, stale := range []int64{0, v1 + 1, -1} {
		v, err := s.WriteTopology(ctx, stale, []courier.TopologyObject{b}, []courier.Action{change(courier.ActionCreate, b, "", string(b.Spec))})
		if !errors.Is(err, courier.ErrTopologyMoved) || v != 0 {
			t.Errorf("write on base %d at version %d: %d, %v; want ErrTopologyMoved", stale, v1, v, err)
		}
	}
	wantVersion(t, s, v1)
	if _, got, _ := mustChanges(t, s, 0); got != "endpoint/a@1" {
		t.Errorf("objects after refused writes: %q, want only a", got)
	}
	page, err := s.Audit(ctx, courier.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Actions) != 1 || page.Actions[0].Subject != "a" {
		t.Errorf("audit after refused writes: %+v, want the create of a only", page.Actions)
	}
	// The write on the current version goes through.
	mustWriteTopology(t, s, v1, []courier.TopologyObject{b})
}

func testTopologyConcurrent(t *testing.T, s courier.Store) {
	ctx := context.Background()

	// Writers that decided on the same version: one of them wins.
	const racers = 8
	var wg sync.WaitGroup
	versions := make([]int64, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := object(courier.KindEndpoint, fmt.Sprintf("race-%d", i), `{"n":1}`, "w", base)
			versions[i], errs[i] = s.WriteTopology(ctx, 0, []courier.TopologyObject{o}, []courier.Action{change(courier.ActionCreate, o, "", "{}")})
		}()
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && versions[i] == 1 && winner == -1:
			winner = i
		case err == nil:
			t.Errorf("writer %d also succeeded, with version %d", i, versions[i])
		case !errors.Is(err, courier.ErrTopologyMoved):
			t.Errorf("writer %d: %v, want ErrTopologyMoved", i, err)
		}
	}
	if winner == -1 {
		t.Fatalf("no writer won: %v", errs)
	}
	if _, got, v := mustChanges(t, s, 0); got != fmt.Sprintf("endpoint/race-%d@1", winner) || v != 1 {
		t.Fatalf("after the race: %q at %d, want only the winner's", got, v)
	}
	if page, err := s.Audit(ctx, courier.AuditFilter{}); err != nil || len(page.Actions) != 1 || page.Actions[0].Subject != fmt.Sprintf("race-%d", winner) {
		t.Fatalf("audit after the race: %+v, %v; want the winner's action only", page.Actions, err)
	}

	// Writers that read the version again when it moved all get through,
	// each with a version of its own.
	const writers, each = 12, 5
	written := make(chan [2]int64, writers*each) // version, writer*each+i
	failed := make(chan error, writers)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				o := object(courier.KindRoute, fmt.Sprintf("r-%d-%d", w, i), `{"endpoints":["race"]}`, "w", base)
				for tries := 0; ; tries++ {
					if tries == 1000 {
						failed <- fmt.Errorf("%s: still moved after %d tries", o.Name, tries)
						return
					}
					v, err := s.TopologyVersion(ctx)
					if err != nil {
						failed <- err
						return
					}
					got, err := s.WriteTopology(ctx, v, []courier.TopologyObject{o}, nil)
					if errors.Is(err, courier.ErrTopologyMoved) {
						continue
					}
					if err != nil {
						failed <- err
						return
					}
					written <- [2]int64{got, int64(w*each + i)}
					break
				}
			}
		}()
	}
	wg.Wait()
	close(written)
	close(failed)
	for err := range failed {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for vw := range written {
		if seen[vw[0]] {
			t.Errorf("version %d written twice", vw[0])
		}
		seen[vw[0]] = true
	}
	const last = 1 + writers*each
	for v := int64(2); v <= last; v++ {
		if !seen[v] {
			t.Errorf("no write made version %d", v)
		}
	}
	wantVersion(t, s, last)
	objs, _, v := mustChanges(t, s, 0)
	if len(objs) != last || v != last {
		t.Fatalf("changes since 0: %d objects at version %d, want %d at %d", len(objs), v, last, last)
	}
	versionsSeen := map[int64]bool{}
	for _, o := range objs {
		versionsSeen[o.Version] = true
	}
	if len(versionsSeen) != last {
		t.Errorf("the objects carry %d versions, want %d: one for each write", len(versionsSeen), last)
	}
	// Read from every version on, the changes are the later writes.
	for since := int64(0); since <= last; since += 7 {
		if objs, _, _ := mustChanges(t, s, since); len(objs) != int(last-since) {
			t.Errorf("changes since %d: %d objects, want %d", since, len(objs), last-since)
		}
	}
}

func testAudit(t *testing.T, s courier.Store) {
	ctx := context.Background()
	at := func(minutes int) time.Time { return base.Add(time.Duration(minutes) * time.Minute) }

	// Operator actions, recorded by the calls that make them.
	mustIngest(t, s, newMessage("m-1", base))
	if _, err := s.Discard(ctx, "m-1", courier.Action{At: at(1), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	off := &courier.Action{At: at(2), Who: "ops", Kind: courier.ActionEndpointOff, Subject: "globex"}
	if _, err := s.UpdateHealth(ctx, "globex", func(h courier.EndpointHealth) courier.EndpointHealth { return h.SwitchedOff(at(2)) }, off); err != nil {
		t.Fatal(err)
	}

	// Topology changes, one write each.
	spec1, spec2 := `{"url":"https://acme.example","secret":"set"}`, `{"url":"https://acme.example/v2","secret":"set"}`
	route := `{"endpoints":["acme"]}`
	acme := object(courier.KindEndpoint, "acme", spec1, "alice", at(3).Add(123456789*time.Nanosecond))
	orders := object(courier.KindRoute, "orders", route, "alice", at(4))
	acme2 := object(courier.KindEndpoint, "acme", spec2, "bob", at(5))
	gone := object(courier.KindRoute, "orders", "", "bob", at(6))
	writes := []struct {
		o courier.TopologyObject
		a courier.Action
	}{
		{acme, change(courier.ActionCreate, acme, "", spec1)},
		{orders, change(courier.ActionCreate, orders, "", route)},
		{acme2, change(courier.ActionReplace, acme2, spec1, spec2)},
		{gone, change(courier.ActionDelete, gone, route, "")},
	}
	var want []courier.Action // newest first
	for i, w := range writes {
		w.a.Detail = fmt.Sprintf("write %d", i)
		v := mustWriteTopology(t, s, int64(i), []courier.TopologyObject{w.o}, w.a)
		w.a.Version = v
		want = append([]courier.Action{w.a}, want...)
	}
	want = append(want,
		courier.Action{At: at(2), Who: "ops", Kind: courier.ActionEndpointOff, Subject: "globex"},
		courier.Action{At: at(1), Who: "ops", Kind: courier.ActionDiscard, Subject: "m-1"})

	page, err := s.Audit(ctx, courier.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if page.Next != "" || len(page.Actions) != len(want) {
		t.Fatalf("audit: %d actions, next %q; want %d and no next", len(page.Actions), page.Next, len(want))
	}
	for i, got := range page.Actions {
		w := want[i]
		if got.Who != w.Who || got.Kind != w.Kind || got.Subject != w.Subject || got.Detail != w.Detail || got.Object != w.Object ||
			got.Before != w.Before || got.After != w.After || got.Version != w.Version || !sameTime(got.At, w.At) {
			t.Errorf("audit entry %d:\n got %+v\nwant %+v", i, got, w)
		}
		if i > 0 && got.Seq >= page.Actions[i-1].Seq {
			t.Errorf("audit entry %d has seq %d after %d: want newest first", i, got.Seq, page.Actions[i-1].Seq)
		}
	}
	// Actions on a subject carry the same, oldest first.
	acts, err := s.Actions(ctx, "acme")
	if err != nil || len(acts) != 2 || acts[0].Kind != courier.ActionCreate || acts[1].Kind != courier.ActionReplace ||
		acts[1].Before != spec1 || acts[1].After != spec2 || acts[1].Object != courier.KindEndpoint || acts[1].Version != 3 ||
		acts[0].Seq == 0 || acts[0].Seq >= acts[1].Seq {
		t.Errorf("Actions(acme) = %+v, %v; want its create and replace, oldest first, with their seqs", acts, err)
	}

	subjects := func(f courier.AuditFilter) string {
		t.Helper()
		page, err := s.Audit(ctx, f)
		if err != nil {
			t.Fatalf("Audit(%+v): %v", f, err)
		}
		var out []string
		for _, a := range page.Actions {
			out = append(out, string(a.Kind)+":"+a.Subject)
		}
		return strings.Join(out, " ")
	}
	for _, tt := range []struct {
		name string
		f    courier.AuditFilter
		want string
	}{
		{"who", courier.AuditFilter{Who: "alice"}, "create:orders create:acme"},
		{"kind", courier.AuditFilter{Kind: courier.ActionDiscard}, "discard:m-1"},
		{"object", courier.AuditFilter{Object: courier.KindEndpoint}, "replace:acme create:acme"},
		{"subject", courier.AuditFilter{Subject: "orders"}, "delete:orders create:orders"},
		{"since, at or after", courier.AuditFilter{Since: at(4)}, "delete:orders replace:acme create:orders"},
		{"until, before", courier.AuditFilter{Until: at(4)}, "create:acme endpoint_off:globex discard:m-1"},
		{"since and until", courier.AuditFilter{Since: at(2), Until: at(5)}, "create:orders create:acme endpoint_off:globex"},
		{"who and object", courier.AuditFilter{Who: "bob", Object: courier.KindRoute}, "delete:orders"},
		{"operator actions by who", courier.AuditFilter{Who: "ops"}, "endpoint_off:globex discard:m-1"},
		{"none", courier.AuditFilter{Who: "nobody"}, ""},
	} {
		if got := subjects(tt.f); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}

	// Paging walks every entry once, newest first, with or without a filter.
	for _, f := range []courier.AuditFilter{{Limit: 1}, {Limit: 4}, {Limit: 6}, {Limit: 1, Object: courier.KindRoute}} {
		var seqs []int64
		pages := 0
		for {
			page, err := s.Audit(ctx, f)
			if err != nil {
				t.Fatalf("Audit(%+v): %v", f, err)
			}
			pages++
			if len(page.Actions) > f.Limit || (page.Next != "" && len(page.Actions) != f.Limit) {
				t.Fatalf("Audit(%+v): a page of %d, next %q", f, len(page.Actions), page.Next)
			}
			for _, a := range page.Actions {
				if len(seqs) > 0 && a.Seq >= seqs[len(seqs)-1] {
					t.Fatalf("Audit(%+v): seq %d after %d, want newest first", f, a.Seq, seqs[len(seqs)-1])
				}
				seqs = append(seqs, a.Seq)
			}
			if page.Next == "" {
				break
			}
			if pages > 10 {
				t.Fatalf("Audit(%+v): no last page", f)
			}
			f.Cursor = page.Next
		}
		total := len(want)
		if f.Object != "" {
			total = 2
		}
		if wantPages := (total + f.Limit - 1) / f.Limit; len(seqs) != total || pages != wantPages {
			t.Errorf("Audit(limit %d, object %q): %d entries in %d pages, want %d in %d", f.Limit, f.Object, len(seqs), pages, total, wantPages)
		}
	}

	for _, c := range []string{"%%%", "bm90LWEtbnVtYmVy", "LTE"} {
		_, err := s.Audit(ctx, courier.AuditFilter{Cursor: c})
		wantCode(t, err, courier.CodeInvalidArgument)
	}
}

// testPurgeKeepsTopologyAudit: a purged message's actions go with it, but
// not the changes of a topology object that has its id for a name.
func testPurgeKeepsTopologyAudit(t *testing.T, s courier.Store) {
	ctx := context.Background()
	mustIngest(t, s, newMessage("orders", base))
	if _, err := s.Discard(ctx, "orders", courier.Action{At: base, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	o := object(courier.KindRoute, "orders", `{"endpoints":["acme"]}`, "alice", base)
	mustWriteTopology(t, s, 0, []courier.TopologyObject{o}, change(courier.ActionCreate, o, "", string(o.Spec)))
	if n, err := s.Purge(ctx, courier.Purge{Before: base.Add(24 * time.Hour)}, 10); err != nil || n != 1 {
		t.Fatalf("purge: %d, %v; want the message", n, err)
	}
	_, err := s.Message(ctx, "orders")
	wantCode(t, err, courier.CodeNotFound)
	acts, err := s.Actions(ctx, "orders")
	if err != nil || len(acts) != 1 || acts[0].Kind != courier.ActionCreate || acts[0].Object != courier.KindRoute {
		t.Errorf("actions on orders after the purge: %+v, %v; want the route's create only", acts, err)
	}
	page, err := s.Audit(ctx, courier.AuditFilter{Subject: "orders"})
	if err != nil || len(page.Actions) != 1 || page.Actions[0].Kind != courier.ActionCreate {
		t.Errorf("audit of orders after the purge: %+v, %v; want the route's create only", page.Actions, err)
	}
}
