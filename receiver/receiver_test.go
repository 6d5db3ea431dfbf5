package receiver_test

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
	"github.com/courier-gw/courier/internal/testkit/poll"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/internal/testkit/startstoptest"
	"github.com/courier-gw/courier/receiver"
)

// queue is a source held in memory, standing in for a broker queue in the
// tests of the service's own rules; the sources themselves are tested
// against RabbitMQ, JetStream and real directories in their packages.
type queue struct {
	mu        sync.Mutex
	ready     []*courier.InboundItem
	out       map[*courier.InboundItem]bool
	acked     []*courier.InboundItem
	fetches   []int // the max of each Fetch that returned items
	delivered int   // items handed out, repeats included
	// releaseErr, when set, makes Release fail, as a broker connection
	// lost meanwhile does.
	releaseErr error
	// fetched, when set, is called with Fetch's context before it returns
	// items.
	fetched func(ctx context.Context)
	// ackFail is how many Acks fail, as with a broker connection lost
	// meanwhile, before they succeed again.
	ackFail int
}

func newQueue(items ...*courier.InboundItem) *queue {
	return &queue{ready: items, out: map[*courier.InboundItem]bool{}}
}

func (q *queue) put(items ...*courier.InboundItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ready = append(q.ready, items...)
}

func (q *queue) Fetch(ctx context.Context, max int) ([]*courier.InboundItem, error) {
	q.mu.Lock()
	n := min(max, len(q.ready))
	got := slices.Clone(q.ready[:n])
	q.ready = q.ready[n:]
	for _, it := range got {
		q.out[it] = true
	}
	if n > 0 {
		q.fetches = append(q.fetches, max)
		q.delivered += n
	}
	fetched := q.fetched
	q.mu.Unlock()
	if n > 0 && fetched != nil {
		fetched(ctx)
	}
	if n == 0 {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
	}
	return got, nil
}

func (q *queue) Ack(_ context.Context, items []*courier.InboundItem) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ackFail > 0 {
		q.ackFail--
		return errors.New("channel closed")
	}
	for _, it := range items {
		if !q.out[it] {
			return fmt.Errorf("ack of an item not handed out")
		}
		delete(q.out, it)
		q.acked = append(q.acked, it)
	}
	return nil
}

func (q *queue) Release(ctx context.Context, items []*courier.InboundItem) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if q.releaseErr != nil {
		return q.releaseErr
	}
	for _, it := range items {
		delete(q.out, it)
		it.Redelivered = true
	}
	q.ready = append(slices.Clone(items), q.ready...)
	return nil
}

func (q *queue) Pending(context.Context) (int64, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return int64(len(q.ready)), nil
}

func (q *queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	// Unacknowledged items go back, as a broker does with a closed channel.
	var back []*courier.InboundItem
	for it := range q.out {
		it.Redelivered = true
		back = append(back, it)
	}
	q.out = map[*courier.InboundItem]bool{}
	q.ready = append(back, q.ready...)
	return nil
}

func (q *queue) state() (ready, out, acked int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.ready), len(q.out), len(q.acked)
}

// flakyStore fails Ingest while fail is above zero.
type flakyStore struct {
	courier.Store
	mu   sync.Mutex
	fail int
}

func (f *flakyStore) Ingest(ctx context.Context, msgs []*courier.Message) ([]courier.IngestResult, error) {
	f.mu.Lock()
	failing := f.fail > 0
	if failing {
		f.fail--
	}
	f.mu.Unlock()
	if failing {
		return nil, courier.Unavailable("the store", errors.New("disk on fire"))
	}
	return f.Store.Ingest(ctx, msgs)
}

type harness struct {
	t     *testing.T
	store courier.Store
	q     *queue
	svc   *receiver.Service
	top   *courier.Topology
	mu    sync.Mutex
	// events are the operational events the service made, under mu.
	events []courier.Event
}

// stopEvents returns the receiver.stopped events the service made.
func (h *harness) stopEvents() []courier.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []courier.Event
	for _, ev := range h.events {
		if ev.Kind == courier.EventReceiverStopped {
			out = append(out, ev)
		}
	}
	return out
}

func newHarness(t *testing.T, r *courier.Receiver, q *queue, wrap func(courier.Store) courier.Store) *harness {
	t.Helper()
	s := sqlitetest.Open(t)
	h := &harness{t: t, store: s, q: q, top: &courier.Topology{
		Routes:   map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"a"}}},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy()},
	}}
	var store courier.Store = s
	if wrap != nil {
		store = wrap(s)
	}
	if r.Batch == 0 {
		r.Batch = 10
	}
	h.svc = receiver.New(receiver.Options{Store: store, Receivers: []*courier.Receiver{r},
		TopologyFunc: h.topology, MaxPayload: 1 << 20,
		OpenFunc:     func(context.Context, *courier.Receiver) (courier.Source, error) { return q, nil },
		RetryInitial: 5 * time.Millisecond, RetryMax: 20 * time.Millisecond, PendingInterval: time.Millisecond,
		EventFunc: func(ev courier.Event) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, ev)
		}})
	startstoptest.Start(t, h.svc)
	return h
}

func (h *harness) topology() *courier.Topology {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.top
}

func (h *harness) addRoute(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	next := *h.top
	next.Routes = map[string]*courier.Route{name: {Name: name, Endpoints: []string{"a"}}}
	for k, v := range h.top.Routes {
		next.Routes[k] = v
	}
	h.top = &next
}

// waitFor polls cond until it holds, failing the test with the receivers'
// status if it does not.
func (h *harness) waitFor(what string, cond func() bool) {
	h.t.Helper()
	if !poll.Wait(cond) {
		h.t.Fatalf("timed out waiting for %s; status %+v", what, h.svc.Statuses())
	}
}

func (h *harness) message(id string) *courier.Message {
	h.t.Helper()
	m, err := h.store.Message(context.Background(), id)
	if err != nil {
		h.t.Fatalf("message %s: %v", id, err)
	}
	return m
}

func item(id, route string) *courier.InboundItem {
	return &courier.InboundItem{Body: []byte(`{"id":"` + id + `"}`), ContentType: "application/json",
		Headers: map[string]string{"message-id": id, "x-route": route}}
}

func receiverFor(onError courier.OnError) *courier.Receiver {
	return &courier.Receiver{Name: "erp", Transport: courier.ReceiveAMQP, Type: "invoice", RouteHeader: "x-route",
		IDHeader: "message-id", OnError: onError}
}

// Good items become queued messages and bad ones suspended messages with
// their reason; all are acknowledged, each once.
func TestStoresThenAcks(t *testing.T) {
	q := newQueue()
	for i := 0; i < 25; i++ {
		route := "acme"
		switch i {
		case 7:
			route = "globex" // not configured
		case 13:
			route = ""
		}
		it := item(fmt.Sprintf("m-%02d", i), route)
		if route == "" {
			delete(it.Headers, "x-route")
		}
		q.put(it)
	}
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	h.waitFor("every item acknowledged", func() bool { _, _, acked := q.state(); return acked == 25 })
	for i := 0; i < 25; i++ {
		m := h.message(fmt.Sprintf("m-%02d", i))
		switch i {
		case 7:
			if m.State != courier.StateSuspended || m.Reason != courier.ReasonNoRoute || !strings.Contains(m.LastError, `route "globex" is not configured`) {
				t.Errorf("m-07: %s %s %q", m.State, m.Reason, m.LastError)
			}
		case 13:
			if m.State != courier.StateSuspended || m.Reason != courier.ReasonInvalid || !strings.Contains(m.LastError, "no route") {
				t.Errorf("m-13: %s %s %q", m.State, m.Reason, m.LastError)
			}
		default:
			if m.State != courier.StateQueued || m.Route != "acme" || m.Type != "invoice" || string(m.Payload) != `{"id":"`+m.ID+`"}` {
				t.Errorf("%s: %+v", m.ID, m)
			}
		}
	}
	h.waitFor("the counts", func() bool {
		st := h.svc.Statuses()[0]
		return st.Received == 25 && st.Invalid == 2 && st.Pending == 0
	})
	if st := h.svc.Statuses()[0]; st.State != courier.ReceiverRunning || st.StopReason != "" {
		t.Fatalf("status %+v", st)
	}
}

// Items stored and then handed out again (the acknowledgement was lost in
// a crash) are stored once: the second ingest is a no-op, and the counts
// do not grow.
func TestRedeliveryStoresNothingTwice(t *testing.T) {
	q := newQueue(item("a", "acme"), item("b", "acme"))
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	h.waitFor("two acknowledged", func() bool { _, _, acked := q.state(); return acked == 2 })
	q.put(item("a", "acme"), item("b", "acme"), item("c", "acme"))
	h.waitFor("five acknowledged", func() bool { _, _, acked := q.state(); return acked == 5 })
	h.waitFor("the counts", func() bool { return h.svc.Statuses()[0].Received == 3 })
	page, err := h.store.Messages(context.Background(), courier.MessageFilter{Limit: 100})
	if err != nil || len(page.Messages) != 3 {
		t.Fatalf("%d messages stored, %v; want 3", len(page.Messages), err)
	}
}

// An item whose id is taken by a message of other content is kept as an
// invalid message of its own.
func TestTakenIDKeptApart(t *testing.T) {
	q := newQueue(item("a", "acme"))
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	h.waitFor("one acknowledged", func() bool { _, _, acked := q.state(); return acked == 1 })
	other := item("a", "acme")
	other.Body = []byte(`{"other": true}`)
	q.put(other)
	h.waitFor("two acknowledged", func() bool { _, _, acked := q.state(); return acked == 2 })
	page, err := h.store.Messages(context.Background(), courier.MessageFilter{State: courier.StateSuspended, Limit: 10})
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("suspended: %d, %v", len(page.Messages), err)
	}
	m := h.message(page.Messages[0].ID)
	if !strings.HasPrefix(m.ID, "a.conflict-") || m.Reason != courier.ReasonInvalid || string(m.Payload) != `{"other": true}` ||
		!strings.Contains(m.LastError, "id a is taken by a message of other content") {
		t.Fatalf("kept as %s: %s %q %q", m.ID, m.Reason, m.Payload, m.LastError)
	}
	if got := h.message("a"); string(got.Payload) != `{"id":"a"}` {
		t.Fatalf("the first message changed: %q", got.Payload)
	}
}

// With on_error: stop the items before the bad one are stored, the bad one
// and those after it stay at the source, and the receiver says why it
// stopped; started again once the route exists, it takes them all in order.
func TestOnErrorStop(t *testing.T) {
	q := newQueue(item("a", "acme"), item("b", "acme"), item("c", "later"), item("d", "acme"))
	h := newHarness(t, receiverFor(courier.OnErrorStop), q, nil)
	h.waitFor("stopped", func() bool { return h.svc.Statuses()[0].State == courier.ReceiverStopped })
	st := h.svc.Statuses()[0]
	if !strings.Contains(st.StopReason, "on_error: stop: item c cannot be taken") || !strings.Contains(st.StopReason, `route "later" is not configured`) {
		t.Fatalf("stop reason %q", st.StopReason)
	}
	if evs := h.stopEvents(); len(evs) != 1 || evs[0].Details.Reason != st.StopReason || evs[0].Kind != courier.EventReceiverStopped {
		t.Fatalf("events %+v; want one receiver.stopped with the reason", evs)
	}
	if ready, out, acked := q.state(); ready != 2 || out != 0 || acked != 2 {
		t.Fatalf("source: %d ready, %d out, %d acked; want c and d back at the source", ready, out, acked)
	}
	if _, err := h.store.Message(context.Background(), "c"); err == nil {
		t.Fatal("c was stored although the receiver stops on errors")
	}
	// Stopped, it reads nothing more.
	q.put(item("e", "acme"))
	time.Sleep(50 * time.Millisecond)
	if _, _, acked := q.state(); acked != 2 {
		t.Fatalf("a stopped receiver acknowledged %d items", acked)
	}
	h.addRoute("later")
	if err := h.svc.StartReceiver("erp", "ops"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("all acknowledged", func() bool { _, _, acked := q.state(); return acked == 5 })
	if m := h.message("c"); m.State != courier.StateQueued || m.Route != "later" {
		t.Fatalf("c: %s on %s", m.State, m.Route)
	}
	if st := h.svc.Statuses()[0]; st.State != courier.ReceiverRunning {
		t.Fatalf("after start: %+v", st)
	}
}

// While the store fails nothing is acknowledged: the items go back to the
// source. The receiver then takes single items and grows back to its batch.
func TestStoreFailureReleasesAndIsolates(t *testing.T) {
	q := newQueue()
	for i := 0; i < 200; i++ {
		q.put(item(fmt.Sprintf("m-%03d", i), "acme"))
	}
	fs := &flakyStore{fail: 3}
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, func(s courier.Store) courier.Store { fs.Store = s; return fs })
	h.waitFor("all acknowledged", func() bool { _, _, acked := q.state(); return acked == 200 })
	st := h.svc.Statuses()[0]
	if st.Received != 200 || !strings.Contains(st.LastError, "disk on fire") {
		t.Fatalf("status %+v", st)
	}
	q.mu.Lock()
	fetches := slices.Clone(q.fetches)
	q.mu.Unlock()
	if fetches[0] != 10 || !slices.Contains(fetches, 1) || fetches[len(fetches)-1] != 10 {
		t.Fatalf("batch sizes asked for: %v; want 10, then 1 after the failures, then back to 10", fetches)
	}
}

// An operator stops and starts a receiver; unknown names are not found.
func TestStopAndStart(t *testing.T) {
	q := newQueue(item("a", "acme"))
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	h.waitFor("a acknowledged", func() bool { _, _, acked := q.state(); return acked == 1 })
	if err := h.svc.StopReceiver("erp", "ops"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("stopped", func() bool { return h.svc.Statuses()[0].State == courier.ReceiverStopped })
	if st := h.svc.Statuses()[0]; st.StopReason != "stopped by ops" {
		t.Fatalf("stop reason %q", st.StopReason)
	}
	if err := h.svc.StopReceiver("erp", "ops"); err != nil { // stopped already: no second event
		t.Fatal(err)
	}
	if evs := h.stopEvents(); len(evs) != 1 || evs[0].Subject != "erp" || evs[0].Details.Reason != "stopped by ops" {
		t.Fatalf("events %+v; want one receiver.stopped of erp, by ops", evs)
	}
	q.put(item("b", "acme"))
	time.Sleep(50 * time.Millisecond)
	if _, _, acked := q.state(); acked != 1 {
		t.Fatal("a stopped receiver went on reading")
	}
	if err := h.svc.StartReceiver("erp", "ops"); err != nil {
		t.Fatal(err)
	}
	h.waitFor("b acknowledged", func() bool { _, _, acked := q.state(); return acked == 2 })
	var ce *courier.Error
	if err := h.svc.StopReceiver("nope", "ops"); !errors.As(err, &ce) || ce.Code != courier.CodeNotFound {
		t.Fatalf("stop of an unknown receiver: %v", err)
	}
}

// The status shows the batch size in use: 1 after the store failed, and
// the configured size again once it has grown back.
func TestStatusShowsBatchInUse(t *testing.T) {
	q := newQueue()
	fs := &flakyStore{fail: 1 << 30}
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, func(s courier.Store) courier.Store { fs.Store = s; return fs })
	if got := h.svc.Statuses()[0].Batch; got != 10 {
		t.Fatalf("batch before any failure = %d, want 10", got)
	}
	q.put(item("a", "acme"))
	h.waitFor("the store failure", func() bool { return strings.Contains(h.svc.Statuses()[0].LastError, "disk on fire") })
	if got := h.svc.Statuses()[0].Batch; got != 1 {
		t.Fatalf("batch after a store failure = %d, want 1", got)
	}
	fs.mu.Lock()
	fs.fail = 0
	fs.mu.Unlock()
	// 1, 2, 4 and 8 items, four batches each, before it is 10 again.
	for i := 0; i < 100; i++ {
		q.put(item(fmt.Sprintf("m-%03d", i), "acme"))
	}
	h.waitFor("the batch grown back", func() bool { return h.svc.Statuses()[0].Batch == 10 })
}

// A receiver without a batch size takes the default, on its own copy of
// the configuration.
func TestDefaultBatch(t *testing.T) {
	r := receiverFor(courier.OnErrorSuspend)
	svc := receiver.New(receiver.Options{Receivers: []*courier.Receiver{r}})
	if got := svc.Statuses()[0].Batch; got != courier.DefaultReceiveBatch {
		t.Fatalf("batch = %d, want %d", got, courier.DefaultReceiveBatch)
	}
	if r.Batch != 0 {
		t.Fatalf("the caller's configuration changed: batch %d", r.Batch)
	}
}

// With on_error: stop, a batch fetched as the service stops is stored and
// acknowledged up to the bad item, which goes back to the source.
func TestOnErrorStopDuringShutdown(t *testing.T) {
	q := newQueue()
	h := newHarness(t, receiverFor(courier.OnErrorStop), q, nil)
	stopped := make(chan error, 1)
	q.mu.Lock()
	q.fetched = func(ctx context.Context) {
		go func() { stopped <- h.svc.Stop(context.Background()) }()
		<-ctx.Done()
	}
	q.mu.Unlock()
	q.put(item("a", "acme"), item("b", "acme"), item("c", "later"), item("d", "acme"))
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not stop")
	}
	if ready, out, acked := q.state(); ready != 2 || out != 0 || acked != 2 {
		t.Fatalf("source: %d ready, %d out, %d acked; want a and b acknowledged, c and d back at the source", ready, out, acked)
	}
	if m := h.message("b"); m.State != courier.StateQueued {
		t.Fatalf("b: %s", m.State)
	}
}

// With on_error: stop, when the bad item cannot be handed back the items
// stored before it are acknowledged all the same; closing the source hands
// back the rest.
func TestOnErrorStopReleaseFails(t *testing.T) {
	q := newQueue()
	q.releaseErr = errors.New("channel closed")
	h := newHarness(t, receiverFor(courier.OnErrorStop), q, nil)
	q.put(item("a", "acme"), item("b", "acme"), item("c", "later"), item("d", "acme"))
	h.waitFor("stopped", func() bool { return h.svc.Statuses()[0].State == courier.ReceiverStopped })
	if ready, out, acked := q.state(); ready != 2 || out != 0 || acked != 2 {
		t.Fatalf("source: %d ready, %d out, %d acked; want a and b acknowledged, c and d back at the source", ready, out, acked)
	}
}

// Status reports one receive location; unknown names are not found.
func TestStatus(t *testing.T) {
	q := newQueue(item("a", "acme"))
	h := newHarness(t, receiverFor(courier.OnErrorSuspend), q, nil)
	h.waitFor("a stored", func() bool { st, err := h.svc.Status("erp"); return err == nil && st.Received == 1 })
	if st, err := h.svc.Status("erp"); err != nil || st.Name != "erp" || st.Transport != courier.ReceiveAMQP || st.Batch != 10 {
		t.Fatalf("status %+v, %v", st, err)
	}
	var ce *courier.Error
	if _, err := h.svc.Status("nope"); !errors.As(err, &ce) || ce.Code != courier.CodeNotFound {
		t.Fatalf("status of an unknown receiver: %v", err)
	}
}
