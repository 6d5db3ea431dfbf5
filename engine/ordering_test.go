package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// orderedPolicy retries quickly and long enough that a receiver failing
// one request in ten never exhausts it.
func orderedPolicy(name string) *courier.Policy {
	return steadyPolicy(name, 50, 10*time.Millisecond)
}

// orderedShop sets up the route shop to the endpoint shop, which takes
// concurrency attempts at once and fails one request in ten, with the
// messages of type order ordered (orderedPolicy).
func (h *harness) orderedShop(concurrency int) {
	ep := h.httpEndpoint("shop", "/shop")
	ep.MaxConcurrency = concurrency
	h.top.Endpoints["shop"] = ep
	h.route("shop", "shop")
	h.policy(orderedPolicy("order"))
	h.sink.Script("/shop", sink.Fail(0.1, 500), sink.Repeat)
}

// ingestAll stores the messages in batches, in order, and wakes the engine.
func (h *harness) ingestAll(msgs []*courier.Message) {
	h.t.Helper()
	for len(msgs) > 0 {
		n := min(len(msgs), 1000)
		if _, err := h.store.Ingest(context.Background(), msgs[:n]); err != nil {
			h.t.Fatal(err)
		}
		msgs = msgs[n:]
		h.engine.Wake()
	}
}

func (h *harness) message(id, typ, route, key string, prio int) *courier.Message {
	m := &courier.Message{ID: id, Type: typ, Route: route, Payload: []byte(`{"id":"` + id + `"}`),
		ContentType: "application/json", OrderingKey: key, Priority: prio}
	courier.Accept(m, h.top.Policy(typ), true, time.Now())
	return m
}

// delivered returns the message ids that the sink answered 2xx (the
// webhook-id of a published message's delivery is "<id>/<subscription>"),
// each with the sequence number of its first such arrival; at path only,
// unless path is empty.
func delivered(sk *sink.Sink, path string) map[string]int {
	arrivals := sk.All()
	if path != "" {
		arrivals = sk.Arrivals(path)
	}
	first := map[string]int{}
	for _, a := range arrivals {
		id, _ := courier.ParseKey(a.Header.Get("webhook-id"))
		if _, seen := first[id]; !seen && a.Status >= 200 && a.Status < 300 {
			first[id] = a.Seq
		}
	}
	return first
}

// waitDelivered waits until every id of want has arrived successfully.
func (h *harness) waitDelivered(want []string, within time.Duration) map[string]int {
	h.t.Helper()
	return waitArrived(h.t, h.sink, "", want, within)
}

// waitArrived waits until every id of want has arrived at path (anywhere,
// for an empty path) with a 2xx, and returns each one's first such
// arrival.
func waitArrived(t *testing.T, sk *sink.Sink, path string, want []string, within time.Duration) map[string]int {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := delivered(sk, path)
		missing := 0
		for _, id := range want {
			if _, ok := got[id]; !ok {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages not delivered (at %q) within %s", missing, len(want), path, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkKeyOrder fails unless, for every key, the first successful arrivals
// of its messages came in the order of the messages (ids[key], in ingest
// order).
func checkKeyOrder(t *testing.T, first map[string]int, ids map[string][]string) {
	t.Helper()
	for key, order := range ids {
		for i := 1; i < len(order); i++ {
			if first[order[i]] < first[order[i-1]] {
				t.Fatalf("key %s: %s arrived (#%d) before %s (#%d), out of ingest order",
					key, order[i], first[order[i]], order[i-1], first[order[i-1]])
			}
		}
	}
}

func TestOrderedPerKeyUnderRandomFailures(t *testing.T) { testOrderedPerKey(t, 1) }

// testOrderedPerKey: 100 keys of 50 messages each and unordered traffic
// beside them, through a receiver that fails one request in ten, on nodes
// engines sharing one store: each key arrives in ingest order. A key whose
// head is rejected stops exactly that key, until the head is resubmitted.
// (Four times as many messages took three nodes on PostgreSQL more than
// four minutes under four CPU burners.)
func testOrderedPerKey(t *testing.T, nodes int) {
	const keys, perKey, unordered = 100, 50, 1000
	h := newHarness(t, func(h *harness) {
		h.orderedShop(128)
		h.sink.ScriptMessage("blocked-000", sink.Respond(400))
	})
	for i := 1; i < nodes; i++ {
		h.addNode()
	}
	var msgs []*courier.Message
	ids := map[string][]string{}
	var want []string
	for i := 0; i < perKey; i++ {
		for k := 0; k < keys; k++ {
			key := fmt.Sprintf("customer-%03d", k)
			id := fmt.Sprintf("%s-%03d", key, i)
			msgs = append(msgs, h.message(id, "order", "shop", key, 0))
			ids[key] = append(ids[key], id)
			want = append(want, id)
		}
		if i < 10 {
			id := fmt.Sprintf("blocked-%03d", i)
			msgs = append(msgs, h.message(id, "order", "shop", "blocked", 0))
			ids["blocked"] = append(ids["blocked"], id)
		}
		for u := 0; u < unordered/perKey; u++ {
			id := fmt.Sprintf("free-%03d-%02d", i, u)
			msgs = append(msgs, h.message(id, "order", "shop", "", 0))
			want = append(want, id)
		}
	}
	h.ingestAll(msgs)

	first := h.waitDelivered(want, 4*time.Minute)
	checkKeyOrder(t, first, ids)
	if failed := h.sink.StatusCount(500); failed < len(want)/20 {
		t.Fatalf("the receiver failed only %d requests: the test did not exercise retries", failed)
	}
	t.Logf("%d nodes: %d messages of %d keys and %d unordered delivered in order; the receiver failed %d requests",
		nodes, keys*perKey, keys, unordered, h.sink.StatusCount(500))

	// The rejected head holds its key: nothing behind it was sent.
	head := h.waitState("blocked-000", courier.StateSuspended)
	if head.Reason != courier.ReasonRejected || !head.HoldsKey() {
		t.Fatalf("blocked-000: %+v", head)
	}
	for _, id := range ids["blocked"][1:] {
		m, err := h.store.Message(context.Background(), id)
		if err != nil || !m.Waiting() {
			t.Fatalf("%s: %+v, %v; want waiting behind blocked-000", id, m, err)
		}
		if _, sent := first[id]; sent {
			t.Fatalf("%s was sent while the head of its key was suspended", id)
		}
	}
	if holder, err := h.store.KeyHolder(context.Background(), "shop", "blocked"); err != nil || holder.ID != "blocked-000" {
		t.Fatalf("KeyHolder = %v, %v; want blocked-000", holder, err)
	}

	// Resubmitted (the receiver takes it now), the key goes on in order.
	if _, err := h.store.Resubmit(context.Background(), "blocked-000", "", courier.Action{At: time.Now(), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	h.engine.Wake()
	first = h.waitDelivered(ids["blocked"], time.Minute)
	checkKeyOrder(t, first, map[string][]string{"blocked": ids["blocked"]})
}

// TestSkipLetsTheKeyGoOn: on a route with ordered_on_failure: skip a
// rejected head is suspended and marked, and the rest of its key goes on;
// resubmitted, it is delivered on its own.
func TestSkipLetsTheKeyGoOn(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("shop")
		h.top.Routes["shop"].OrderedOnFailure = courier.OrderedSkip
		h.sink.ScriptMessage("k-0", sink.Respond(422))
	})
	var msgs []*courier.Message
	var rest []string
	for i := 0; i < 5; i++ {
		msgs = append(msgs, h.message(fmt.Sprintf("k-%d", i), "order", "shop", "k", 0))
		if i > 0 {
			rest = append(rest, fmt.Sprintf("k-%d", i))
		}
	}
	h.ingestAll(msgs)
	first := h.waitDelivered(rest, 20*time.Second)
	checkKeyOrder(t, first, map[string][]string{"k": rest})
	head := h.waitState("k-0", courier.StateSuspended)
	if !head.OrderSkipped || head.HoldsKey() {
		t.Fatalf("k-0 after its rejection on a skipping route: %+v", head)
	}
	m, err := h.store.Resubmit(context.Background(), "k-0", "", courier.Action{At: time.Now(), Who: "ops"})
	if err != nil || !m.OrderSkipped {
		t.Fatalf("resubmit: %+v, %v", m, err)
	}
	h.engine.Wake()
	h.waitState("k-0", courier.StateDelivered)
}

// TestWaitingBehindABlockedHead: messages waiting behind a rejected head
// on a route that blocks do not expire through max_age nor move to the
// fallback route, however long the head stays suspended: they have not
// had their round yet. Resubmitted, the head goes first and each message
// behind it gets its round, on the primary route, in order.
func TestWaitingBehindABlockedHead(t *testing.T) {
	const maxAge = 300 * time.Millisecond
	h := newHarness(t, func(h *harness) {
		h.top.Endpoints["shop"] = h.httpEndpoint("shop", "/shop")
		h.top.Endpoints["backup"] = h.httpEndpoint("backup", "/backup")
		h.route("shop", "shop")
		h.route("backup", "backup")
		p := orderedPolicy("order")
		p.MaxAge = maxAge
		p.Fallback = &courier.Fallback{After: maxAge, Route: "backup"}
		h.policy(p)
		h.sink.ScriptMessage("k-0", sink.Respond(422))
	})
	var msgs []*courier.Message
	var ids []string
	for i := 0; i < 4; i++ {
		id := fmt.Sprintf("k-%d", i)
		msgs = append(msgs, h.message(id, "order", "shop", "k", 0))
		ids = append(ids, id)
	}
	h.ingestAll(msgs)
	head := h.waitState("k-0", courier.StateSuspended)
	if !head.HoldsKey() {
		t.Fatalf("k-0: %+v, want suspended holding its key", head)
	}
	time.Sleep(4 * maxAge) // several rounds of timers past max_age and the fallback's time
	for _, id := range ids[1:] {
		m, err := h.store.Message(context.Background(), id)
		if err != nil || !m.Waiting() || m.Route != "shop" {
			t.Fatalf("%s behind the suspended head: %+v, %v; want waiting on shop", id, m, err)
		}
	}
	if _, err := h.store.Resubmit(context.Background(), "k-0", "", courier.Action{At: time.Now(), Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	h.engine.Wake()
	first := h.waitDelivered(ids, 20*time.Second)
	checkKeyOrder(t, first, map[string][]string{"k": ids})
	if n := h.sink.Count("/backup"); n != 0 {
		t.Fatalf("%d messages went to the fallback route", n)
	}
}

// TestPriorityJumpsTheBacklog: behind a backlog of 10,000 priority-0
// messages, a priority-9 message ingested afterwards goes out with the
// next claim: only what was already claimed may arrive before it.
func TestPriorityJumpsTheBacklog(t *testing.T) {
	const backlog, concurrency = 10000, 8
	h := newHarness(t, func(h *harness) {
		ep := h.httpEndpoint("shop", "/shop")
		ep.MaxConcurrency = concurrency
		h.top.Endpoints["shop"] = ep
		h.route("shop", "shop")
		h.sink.Script("/shop", sink.Delay(2*time.Millisecond, 204), sink.Repeat)
	})
	var msgs []*courier.Message
	for i := 0; i < backlog; i++ {
		msgs = append(msgs, h.message(fmt.Sprintf("bulk-%05d", i), "order", "shop", "", 0))
	}
	h.ingestAll(msgs)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.sink.Wait(ctx, "/shop", 100); err != nil {
		t.Fatal(err)
	}
	h.ingestAll([]*courier.Message{h.message("urgent", "order", "shop", "", 9)})
	// Counted once the ingest has committed: what arrives while it runs was
	// claimed before urgent existed, and on a busy machine the ingest
	// itself may take as long as dozens of deliveries.
	before := h.sink.Count("/shop")
	h.waitDelivered([]string{"urgent"}, 30*time.Second)
	at := delivered(h.sink, "")["urgent"]
	ahead := at - before - 1
	// Ahead of urgent may go: the attempts in flight as its ingest
	// committed (up to the endpoint's concurrency), those of a claim under
	// way then (its snapshot has no urgent), and the others of the claim
	// that took urgent along (sent at the same time).
	if ahead > 3*concurrency-1 {
		t.Fatalf("%d messages arrived between urgent's ingest and urgent: it waited behind the backlog", ahead)
	}
	if left := backlog - h.sink.Count("/shop"); left < backlog/2 {
		t.Fatalf("only %d of the backlog were left when urgent arrived: the test did not show a jump", left)
	}
	t.Logf("urgent arrived after %d others, with %d of the backlog still waiting", ahead, backlog-h.sink.Count("/shop"))
}

// TestDeliverAfterHolds: a message with deliver_after is not sent before
// that time, while one due now beside it goes at once; a message of an
// ordering key scheduled for later holds the messages of its key behind it.
func TestDeliverAfterHolds(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.direct("shop")
	})
	at := time.Now().Add(700 * time.Millisecond).Truncate(time.Millisecond)
	later := h.message("later", "order", "shop", "k", 0)
	later.DeliverAfter = at
	courier.Accept(later, h.top.Policy("order"), true, time.Now())
	h.ingestAll([]*courier.Message{later, h.message("now", "order", "shop", "", 0), h.message("behind", "order", "shop", "k", 0)})
	first := h.waitDelivered([]string{"now", "later", "behind"}, 20*time.Second)
	arrivals := h.sink.All()
	for _, a := range arrivals {
		if id := a.Header.Get("webhook-id"); id == "later" && a.Time.Before(at) {
			t.Fatalf("later arrived at %v, before its deliver_after %v", a.Time, at)
		}
	}
	if first["now"] > first["later"] || first["behind"] < first["later"] {
		t.Fatalf("arrival order now #%d, later #%d, behind #%d: want now first and behind after later",
			first["now"], first["later"], first["behind"])
	}
}

// A message scheduled for later that the engine is told of goes at its time,
// not when a sweep next finds it: with sweeps a minute apart, it is
// delivered all the same.
func TestScheduledGoesAtItsTime(t *testing.T) {
	watch := &claimWatch{routes: map[string]int{}}
	h := newHarness(t, func(h *harness) {
		h.direct("shop")
		h.poll = time.Minute
		h.wrap = func(s courier.Store) courier.Store { watch.Store = s; return watch }
	})
	watch.waitSweeps(t, 1) // the sweep at start has run: the next is a minute away
	at := time.Now().Add(300 * time.Millisecond)
	m := h.message("later", "order", "shop", "", 0)
	m.DeliverAfter = at
	courier.Accept(m, h.top.Policy("order"), true, time.Now())
	if _, err := h.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	h.engine.Scheduled("shop", m.NextAttemptAt)
	h.waitState("later", courier.StateDelivered)
	if a := h.sink.All(); len(a) != 1 || a[0].Time.Before(at) {
		t.Fatalf("arrivals %v; want one, at or after %v", a, at)
	}
}
