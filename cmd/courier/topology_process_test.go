package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// The keys of the topology test's nodes: three admins, so that the audit
// log can tell who made each change, and a sender.
var topologyKeys = map[string]string{"alice": "admin", "bob": "admin", "carol": "admin", "erp": "sender"}

// topologyNode is one node of the topology test and a client for each key.
type topologyNode struct {
	name string
	p    *process
	as   map[string]*api.Client
}

func newTopologyNode(name string, p *process) *topologyNode {
	n := &topologyNode{name: name, p: p, as: map[string]*api.Client{}}
	for key := range topologyKeys {
		n.as[key] = api.NewClient(p.url, key+"-secret")
	}
	return n
}

// topology reads the node's topology, failing the test on an error.
func (n *topologyNode) topology(t *testing.T) *api.Topology {
	t.Helper()
	top, err := n.as["alice"].Topology(context.Background())
	if err != nil {
		t.Fatalf("GET /v1/topology on %s: %v\n%s", n.name, err, n.p.log())
	}
	return top
}

// send ingests one message through the node, failing unless it is
// created.
func (n *topologyNode) send(t *testing.T, req api.IngestRequest) {
	t.Helper()
	if _, created, err := n.as["erp"].Ingest(context.Background(), req); err != nil || !created {
		t.Fatalf("send %s through %s: created %v, %v\n%s", req.ID, n.name, created, err, n.p.log())
	}
}

// waitForVersion polls each node's GET /v1/topology until it has taken in
// version v, and returns how long the slowest took.
func waitForVersion(t *testing.T, nodes []*topologyNode, v int64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for _, n := range nodes {
		waitUntil(t, n.p, within, fmt.Sprintf("%s to take in topology version %d", n.name, v), func() bool {
			return n.topology(t).Version >= v
		})
	}
	return time.Since(start)
}

// TestTopologyAcrossNodes: three nodes on one PostgreSQL schema, with no
// topology in their files, keep it in the store (docs/design.md §15). An endpoint
// and a route created through one node are soon usable through another; an
// endpoint changed through a third is used by all of them; a route deleted
// with messages queued suspends them no_route; a node killed with SIGKILL
// and started again agrees with the others; the audit log has each change
// once, with who made it.
func TestTopologyAcrossNodes(t *testing.T) {
	var keys string
	for _, name := range []string{"alice", "bob", "carol", "erp"} {
		keys += fmt.Sprintf("  %s: {role: %s, hash: %q}\n", name, topologyKeys[name], api.HashSecret(name+"-secret"))
	}
	c := newCluster(t, func(string) string { return "keys:\n" + keys })
	oldSink, newSink := c.sink, sink.MustStart(t, sink.Options{DiscardBodies: true})
	var nodes []*topologyNode
	for _, name := range []string{"A", "B", "C"} {
		nodes = append(nodes, newTopologyNode(name, c.start()))
	}
	a, b, cc := nodes[0], nodes[1], nodes[2]
	ctx := context.Background()
	for _, n := range nodes {
		if top := n.topology(t); top.Version != 0 || len(top.Endpoints)+len(top.Routes) != 0 {
			t.Fatalf("%s starts with topology %+v, want an empty one at version 0", n.name, top)
		}
	}

	// 1. An endpoint and a route created through A; B accepts a message
	// to the route once it has heard of it, and it is delivered.
	endpoint := func(url string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"transport": "http", "url": %q, "timeout": "5s"}`, url))
	}
	if _, created, err := a.as["alice"].PutObject(ctx, courier.KindEndpoint, "acme", endpoint(oldSink.URL()+"/in"), 0); err != nil || !created {
		t.Fatalf("create endpoint acme through A: created %v, %v", created, err)
	}
	route, created, err := a.as["alice"].PutObject(ctx, courier.KindRoute, "acme", json.RawMessage(`{"endpoints": ["acme"]}`), 0)
	if err != nil || !created {
		t.Fatalf("create route acme through A: created %v, %v", created, err)
	}
	created0 := time.Now()
	refused := 0
	for {
		_, _, err := b.as["erp"].Ingest(ctx, api.IngestRequest{ID: "first", Type: "order", Route: "acme", Payload: json.RawMessage(`{}`)})
		if err == nil {
			break
		}
		var ce *courier.Error
		if !errors.As(err, &ce) || ce.Code != courier.CodeInvalidArgument {
			t.Fatalf("send to the new route through B: %v, want 201 or, until B has the route, 422", err)
		}
		refused++
		// The design says within a second; the deadline is generous, as
		// the machine is shared.
		if time.Since(created0) > 10*time.Second {
			t.Fatalf("B still refuses route acme 10 s after A created it: %v\n%s", err, b.p.log())
		}
		time.Sleep(5 * time.Millisecond)
	}
	accepted := time.Since(created0)
	fmt.Printf("topology across nodes: B accepted a message to the route A created %v after A answered (%d refusals before)\n", accepted, refused)
	if err := oldSink.Wait(ctxWithin(t, 30*time.Second), "/in", 1); err != nil {
		t.Fatalf("the first message did not arrive: %v", err)
	}
	if top := b.topology(t); top.Version < route.Version {
		t.Errorf("B accepted at topology version %d, before the route's version %d", top.Version, route.Version)
	}

	// 2. The endpoint pointed at another receiver through C: once every
	// node has taken that in, what is sent through any node arrives there
	// and none at the old one.
	replaced, created, err := cc.as["bob"].PutObject(ctx, courier.KindEndpoint, "acme", endpoint(newSink.URL()+"/in"), -1)
	if err != nil || created {
		t.Fatalf("replace endpoint acme through C: created %v, %v", created, err)
	}
	took := waitForVersion(t, nodes, replaced.Version, 10*time.Second)
	fmt.Printf("topology across nodes: every node had the endpoint C changed %v after C answered\n", took)
	const perNode = 10
	for i, n := range nodes {
		for j := range perNode {
			n.send(t, api.IngestRequest{ID: fmt.Sprintf("moved-%d-%d", i, j), Type: "order", Route: "acme", Payload: json.RawMessage(`{}`)})
		}
	}
	if err := newSink.Wait(ctxWithin(t, 30*time.Second), "/in", 3*perNode); err != nil {
		t.Fatalf("%d of %d messages arrived at the new receiver: %v", newSink.Count("/in"), 3*perNode, err)
	}
	time.Sleep(500 * time.Millisecond) // a message sent to the old receiver would arrive now
	if got := oldSink.Total(); got != 1 {
		t.Errorf("the old receiver got %d messages, want only the first (sent before the change)", got)
	}
	if seen := countByID(newSink.Arrivals("/in")); len(seen) != 3*perNode {
		t.Errorf("%d distinct messages arrived at the new receiver, want %d", len(seen), 3*perNode)
	}

	// 3. Messages queued for later through each node; C is killed; the
	// route is deleted through B. The nodes that run suspend every queued
	// message of the route, those sent through C too.
	later := time.Now().Add(time.Hour)
	var queued []string
	for i, n := range nodes {
		for j := range 3 {
			id := fmt.Sprintf("queued-%d-%d", i, j)
			n.send(t, api.IngestRequest{ID: id, Type: "order", Route: "acme", Payload: json.RawMessage(`{}`), DeliverAfter: &later})
			queued = append(queued, id)
		}
	}
	cc.p.kill(t)
	if err := b.as["carol"].DeleteObject(ctx, courier.KindRoute, "acme", route.Version); err != nil {
		t.Fatalf("delete route acme through B: %v", err)
	}
	deleted := b.topology(t).Version
	waitForVersion(t, []*topologyNode{a, b}, deleted, 10*time.Second)
	for _, id := range queued {
		m := waitForState(t, a.p, a.as["alice"], id, courier.StateSuspended, time.Now().Add(10*time.Second))
		if m.Reason != courier.ReasonNoRoute {
			t.Errorf("%s is suspended with reason %q, want %q", id, m.Reason, courier.ReasonNoRoute)
		}
	}
	for _, n := range []*topologyNode{a, b} {
		_, _, err := n.as["erp"].Ingest(ctx, api.IngestRequest{ID: "after-delete", Type: "order", Route: "acme", Payload: json.RawMessage(`{}`)})
		if ce := (*courier.Error)(nil); !errors.As(err, &ce) || ce.Code != courier.CodeInvalidArgument {
			t.Errorf("send to the deleted route through %s: %v, want 422", n.name, err)
		}
	}

	// 4. C, started again, reads the topology whole: all three agree.
	cc.p = startServerWith(t, cc.p.config)
	cc.as = newTopologyNode("C", cc.p).as
	want := a.topology(t)
	if len(want.Routes) != 0 || len(want.Endpoints) != 1 {
		t.Errorf("topology after the delete: %d routes and %d endpoints, want none and 1", len(want.Routes), len(want.Endpoints))
	}
	for _, n := range []*topologyNode{b, cc} {
		if got := n.topology(t); !sameTopology(got, want) {
			t.Errorf("%s has topology %+v, A has %+v", n.name, got, want)
		}
	}

	// 5. The audit log, read on any node, has each change once and who
	// made it, newest first.
	page, err := cc.as["alice"].Audit(ctx, courier.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	type change struct {
		who    string
		action courier.ActionKind
		object courier.TopologyKind
		name   string
	}
	var got []change
	for _, e := range page.Entries {
		got = append(got, change{e.Who, e.Action, e.Object, e.Subject})
	}
	wantLog := []change{
		{"carol", courier.ActionDelete, courier.KindRoute, "acme"},
		{"bob", courier.ActionReplace, courier.KindEndpoint, "acme"},
		{"alice", courier.ActionCreate, courier.KindRoute, "acme"},
		{"alice", courier.ActionCreate, courier.KindEndpoint, "acme"},
	}
	if !reflect.DeepEqual(got, wantLog) {
		t.Errorf("audit log:\n  %+v\nwant\n  %+v", got, wantLog)
	}
	for _, e := range page.Entries {
		if e.Action == courier.ActionReplace {
			var before, after struct{ URL string }
			json.Unmarshal(e.Before, &before)
			json.Unmarshal(e.After, &after)
			if before.URL != oldSink.URL()+"/in" || after.URL != newSink.URL()+"/in" {
				t.Errorf("the replace is recorded from %q to %q, want from the old receiver to the new", before.URL, after.URL)
			}
		}
	}
}

// sameTopology reports whether two nodes show the same objects at the
// same version.
func sameTopology(a, b *api.Topology) bool {
	norm := func(t *api.Topology) string {
		out, _ := json.Marshal(t) // maps are written in key order; specs are canonical JSON
		return string(out)
	}
	return norm(a) == norm(b)
}

// ctxWithin returns a context that ends after d or with the test.
func ctxWithin(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
