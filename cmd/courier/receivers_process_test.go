package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/amqptest"
	"github.com/courier-gw/courier/internal/testkit/natstest"
	"github.com/courier-gw/courier/internal/testkit/sink"
	"github.com/courier-gw/courier/sqlite"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// brokerItem is one item put on a queue or stream for a receiver: every
// hundredth is malformed in one of four ways.
type brokerItem struct {
	id      string // the message-id header; "" for none
	headers map[string]any
	body    []byte
	bad     courier.Reason // the reason it is suspended with; "" for a good item
}

func brokerItems(prefix string, n int, nested bool) []brokerItem {
	items := make([]brokerItem, n)
	for i := range items {
		id := fmt.Sprintf("%s-%05d", prefix, i)
		it := brokerItem{id: id, body: []byte(fmt.Sprintf(`{"n":%d,"source":%q}`, i, prefix)),
			headers: map[string]any{"message-id": id, "x-type": "order", "x-route": "shop"}}
		if i%100 == 99 {
			switch (i / 100) % 4 {
			case 0:
				delete(it.headers, "x-type")
				it.bad = courier.ReasonInvalid
			case 1:
				it.headers["x-route"] = "nowhere"
				it.bad = courier.ReasonNoRoute
			case 2:
				if nested {
					it.headers["x-route"] = amqp.Table{"not": "text"}
				} else {
					it.headers["x-route"] = "shop\x01"
				}
				it.bad = courier.ReasonInvalid
			case 3:
				it.headers["message-id"] = "not an id"
				it.id = ""
				it.bad = courier.ReasonInvalid
			}
		}
		items[i] = it
	}
	return items
}

// publishAMQP puts the items on the queue as persistent messages and waits
// for the broker's confirms.
func publishAMQP(t *testing.T, ch *amqp.Channel, queue string, items []brokerItem) {
	t.Helper()
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var confirms []*amqp.DeferredConfirmation
	for _, it := range items {
		c, err := ch.PublishWithDeferredConfirm("", queue, false, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "application/json", Headers: amqp.Table(it.headers), Body: it.body})
		if err != nil {
			t.Fatal(err)
		}
		confirms = append(confirms, c)
	}
	for _, c := range confirms {
		if !c.Wait() {
			t.Fatal("the broker refused a publish")
		}
	}
}

// amqpReady returns how many messages wait on the queue, asked on the
// test's own channel.
func amqpReady(t *testing.T, ch *amqp.Channel, queue string) int {
	t.Helper()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	return q.Messages
}

func publishNATS(t *testing.T, js jetstream.JetStream, subject string, items []brokerItem) {
	t.Helper()
	// Acks are awaited every window: with thousands outstanding on a busy
	// machine the client refuses more ("stalled with too many outstanding
	// async published messages").
	const window = 256
	for i, it := range items {
		msg := nats.NewMsg(subject)
		msg.Data = it.body
		for k, v := range it.headers {
			msg.Header.Set(k, fmt.Sprint(v))
		}
		msg.Header.Set("Content-Type", "application/json")
		if _, err := js.PublishMsgAsync(msg); err != nil {
			t.Fatal(err)
		}
		if (i+1)%window == 0 || i == len(items)-1 {
			select {
			case <-js.PublishAsyncComplete():
			case <-time.After(30 * time.Second):
				t.Fatal("JetStream did not ack the publishes")
			}
		}
	}
}

// receivers reads GET /v1/receivers from the process.
func (p *process) receivers(t *testing.T) map[string]courier.ReceiverStatus {
	t.Helper()
	var list api.ReceiverList
	getJSON(t, p.url+"/v1/receivers", &list)
	out := map[string]courier.ReceiverStatus{}
	for _, r := range list.Receivers {
		out[r.Name] = r
	}
	return out
}

// deliveredOnce checks that the sink got every good item exactly once.
func deliveredOnce(t *testing.T, sk *sink.Sink, items []brokerItem) {
	t.Helper()
	seen := countByID(sk.All())
	for _, it := range items {
		switch n := seen[it.id]; {
		case it.bad == "" && n != 1:
			t.Fatalf("%s arrived %d times at the receiver; want once", it.id, n)
		case it.bad != "" && it.id != "" && n != 0:
			t.Fatalf("malformed %s was delivered", it.id)
		}
	}
}

// TestReceiveFromBrokers: 10,000 items on a RabbitMQ queue and 10,000 on a
// JetStream stream, 1 % malformed. Every good item is delivered once, every
// bad one is in the suspended queue with its reason, the sources are empty
// and nothing was handed out twice.
func TestReceiveFromBrokers(t *testing.T) {
	skipIfShort(t)
	mq := amqptest.NewAdmin(t)
	ns := natstest.NewStream(t, jetstream.StreamConfig{Storage: jetstream.FileStorage})
	sk := sink.MustStart(t, sink.Options{})
	const n = 10000
	queue := mq.Queue(nil)
	amqpItems := brokerItems("amqp", n, true)
	publishAMQP(t, mq.Ch, queue, amqpItems)
	natsItems := brokerItems("nats", n, false)
	publishNATS(t, ns.JS, ns.Subject, natsItems)

	cfg := writeConfig(t, t.TempDir(), freeAddr(t), fmt.Sprintf(`endpoints:
  shop: {transport: http, url: "%s/shop", max_concurrency: 64}
routes:
  shop: {endpoints: [shop]}
receivers:
  erp:
    transport: amqp
    url: %q
    queue: %s
    type_header: x-type
    route_header: x-route
    id_header: message-id
    batch: 200
  events:
    transport: nats
    url: %q
    stream: %s
    type_header: x-type
    route_header: x-route
    id_header: message-id
    batch: 200
`, sk.URL(), mq.URL, queue, ns.URL, ns.Name))
	start := time.Now()
	p := startServerWith(t, cfg)
	good := 0
	for _, it := range append(amqpItems, natsItems...) {
		if it.bad == "" {
			good++
		}
	}
	stored := map[string]time.Duration{}
	waitUntil(t, p, 3*time.Minute, "every item stored", func() bool {
		for name, r := range p.receivers(t) {
			if _, done := stored[name]; !done && r.Received == n {
				stored[name] = time.Since(start)
			}
		}
		return len(stored) == 2
	})
	waitUntil(t, p, 3*time.Minute, "every good item delivered", func() bool { return sk.Count("/shop") >= good })
	rs := p.receivers(t)
	t.Logf("from the start of courier: %d items from RabbitMQ stored in %s, %d from JetStream in %s, their %d good ones delivered in %s",
		n, stored["erp"].Round(time.Millisecond), n, stored["events"].Round(time.Millisecond), good, time.Since(start).Round(time.Millisecond))
	for _, name := range []string{"erp", "events"} {
		if r := rs[name]; r.Invalid != n/100 || r.Redelivered != 0 || r.State != courier.ReceiverRunning {
			t.Fatalf("%s: %+v; want %d invalid, nothing handed out twice, running", name, r, n/100)
		}
	}
	deliveredOnce(t, sk, amqpItems)
	deliveredOnce(t, sk, natsItems)

	// The malformed ones wait in the suspended queue with their reason.
	client := api.NewClient(p.url, "")
	for _, items := range [][]brokerItem{amqpItems, natsItems} {
		for _, it := range items {
			if it.bad == "" || it.id == "" {
				continue
			}
			m, err := client.Message(context.Background(), it.id)
			if err != nil {
				t.Fatalf("%s: %v", it.id, err)
			}
			if m.State != courier.StateSuspended || m.Reason != it.bad {
				t.Fatalf("%s: %s %s (%s); want suspended %s", it.id, m.State, m.Reason, m.LastError, it.bad)
			}
		}
	}
	list, err := client.Messages(context.Background(), courier.MessageFilter{State: courier.StateSuspended, Limit: 1000})
	if err != nil || len(list.Messages) != 2*n/100 {
		t.Fatalf("%d suspended messages, %v; want %d", len(list.Messages), err, 2*n/100)
	}

	// The sources are empty, and the consumer was handed each message once.
	if ready := amqpReady(t, mq.Ch, queue); ready != 0 {
		t.Fatalf("%d messages left on the queue", ready)
	}
	cons, err := ns.JS.Consumer(context.Background(), ns.Name, "events")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.NumPending != 0 || info.NumAckPending != 0 || info.NumRedelivered != 0 || info.Delivered.Consumer != n {
		t.Fatalf("JetStream consumer: %d pending, %d unacknowledged, %d redelivered, %d deliveries; want 0, 0, 0, %d",
			info.NumPending, info.NumAckPending, info.NumRedelivered, info.Delivered.Consumer, n)
	}
}

// TestReceiveSurvivesKill: courier is killed with SIGKILL while it takes
// in 10,000 items from RabbitMQ; after a restart every item is stored, once,
// under its id, and the queue is empty.
func TestReceiveSurvivesKill(t *testing.T) {
	skipIfShort(t)
	mq := amqptest.NewAdmin(t)
	sk := sink.MustStart(t, sink.Options{})
	const n = 10000
	queue := mq.Queue(nil)
	items := brokerItems("kill", n, true)
	for i := range items {
		items[i].headers = map[string]any{"message-id": items[i].id}
		items[i].bad = ""
		if items[i].id == "" {
			items[i].id = fmt.Sprintf("kill-%05d", i)
			items[i].headers["message-id"] = items[i].id
		}
	}
	publishAMQP(t, mq.Ch, queue, items)

	dir := t.TempDir()
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  shop: {transport: http, url: "%s/shop"}
routes:
  shop: {endpoints: [shop]}
receivers:
  erp: {transport: amqp, url: %q, queue: %s, type: order, route: shop, id_header: message-id, batch: 50}
`, sk.URL(), mq.URL, queue))
	var before int64
	waitUntil(t, p, time.Minute, "a part stored", func() bool {
		before = p.receivers(t)["erp"].Received
		return before >= n/4
	})
	p.kill(t)
	t.Logf("killed after at least %d of %d items were stored", before, n)

	p2 := startServerWith(t, p.config)
	waitUntil(t, p2, 2*time.Minute, "the queue emptied", func() bool {
		r := p2.receivers(t)["erp"]
		return r.Pending == 0 && amqpReady(t, mq.Ch, queue) == 0 && sk.Count("/shop") >= n
	})
	r := p2.receivers(t)["erp"]
	t.Logf("after the restart: %d stored, %d handed out again by the broker (they were in flight at the kill)", r.Received, r.Redelivered)
	p2.terminate(t, time.Minute)

	s, err := sqlite.Open(storePath(dir), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if total := len(allMessages(t, s, courier.MessageFilter{})); total != n {
		t.Fatalf("%d messages stored; want exactly %d, one per item", total, n)
	}
	for _, it := range items {
		m, err := s.Message(context.Background(), it.id)
		if err != nil || string(m.Payload) != string(it.body) {
			t.Fatalf("%s: %v", it.id, err)
		}
	}
}

// TestPickUpDirectory: 5,000 files dropped into a pick-up directory while
// courier runs, one in fifty written slowly in pieces. Every file is
// delivered once, whole, and ends in processed/.
func TestPickUpDirectory(t *testing.T) {
	skipIfShort(t)
	sk := sink.MustStart(t, sink.Options{})
	dir := t.TempDir()
	inbox := filepath.Join(dir, "inbox")
	os.Mkdir(inbox, 0o755)
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  shop: {transport: http, url: "%s/shop", max_concurrency: 64}
routes:
  shop: {endpoints: [shop]}
receivers:
  drop: {transport: dir, path: %s, pattern: "*.xml", settle: 500ms, type: invoice, route: shop, batch: 200}
`, sk.URL(), inbox))

	const n, slowEvery = 5000, 50
	content := func(i int) []byte {
		return []byte(fmt.Sprintf("<invoice n=\"%d\">%s</invoice>\n", i, strings.Repeat("x", 200+i%700)))
	}
	start := time.Now()
	var slow []chan struct{}
	for i := 0; i < n; i++ {
		name := filepath.Join(inbox, fmt.Sprintf("inv-%05d.xml", i))
		body := content(i)
		if i%slowEvery != 0 {
			if err := os.WriteFile(name, body, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		// Written in ten pieces with pauses shorter than the settle time:
		// a reader that took it early would see a part.
		done := make(chan struct{})
		slow = append(slow, done)
		go func() {
			defer close(done)
			f, err := os.Create(name)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			step := (len(body) + 9) / 10
			for off := 0; off < len(body); off += step {
				f.Write(body[off:min(off+step, len(body))])
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	for _, done := range slow {
		<-done
	}
	waitUntil(t, p, 3*time.Minute, "every file delivered", func() bool { return sk.Count("/shop") >= n })
	t.Logf("%d files dropped and delivered in %s", n, time.Since(start).Round(time.Millisecond))
	got := map[string]int{}
	for _, a := range sk.All() {
		got[string(a.Body)]++
	}
	for i := 0; i < n; i++ {
		if c := got[string(content(i))]; c != 1 {
			t.Fatalf("inv-%05d.xml arrived whole %d times; want once (slow: %v)", i, c, i%slowEvery == 0)
		}
	}
	if len(got) != n {
		t.Fatalf("%d different bodies arrived; want %d: some file was read while it was written", len(got), n)
	}
	left, _ := filepath.Glob(filepath.Join(inbox, "*.xml"))
	processed, _ := filepath.Glob(filepath.Join(inbox, "processed", "*.xml"))
	if len(left) != 0 || len(processed) != n {
		t.Fatalf("%d files left in the inbox, %d in processed/; want 0 and %d", len(left), len(processed), n)
	}
	if r := p.receivers(t)["drop"]; r.Received != n || r.Invalid != 0 {
		t.Fatalf("receiver: %+v", r)
	}
}

// TestReceiverStopsOnError: a receiver with on_error: stop meets an item
// for a route that does not exist yet. It stores what came before, stops
// with the reason, and leaves the item and those after it in the stream;
// once the route is added (SIGHUP) and the receiver started, all arrive in
// order (one ordering key; the two routes share the endpoint).
func TestReceiverStopsOnError(t *testing.T) {
	skipIfShort(t)
	ns := natstest.NewStream(t, jetstream.StreamConfig{Storage: jetstream.FileStorage})
	sk := sink.MustStart(t, sink.Options{})
	var items []brokerItem
	for i, route := range []string{"shop", "shop", "later", "later", "later"} {
		id := fmt.Sprintf("feed-%d", i)
		items = append(items, brokerItem{id: id, body: []byte(`"` + id + `"`),
			headers: map[string]any{"message-id": id, "x-route": route, "x-key": "feed"}})
	}
	publishNATS(t, ns.JS, ns.Subject, items)

	dir := t.TempDir()
	config := func(routes string) string {
		return writeConfig(t, dir, "127.0.0.1:0", fmt.Sprintf(`endpoints:
  shop: {transport: http, url: "%s/shop", max_concurrency: 1}
routes:
%s
receivers:
  feed: {transport: nats, url: %q, stream: %s, type: order, route_header: x-route, id_header: message-id, ordering_key_header: x-key, on_error: stop}
`, sk.URL(), routes, ns.URL, ns.Name))
	}
	p := startServerWith(t, config("  shop: {endpoints: [shop]}"))
	waitUntil(t, p, 30*time.Second, "the receiver stopped", func() bool { return p.receivers(t)["feed"].State == courier.ReceiverStopped })
	r := p.receivers(t)["feed"]
	if r.Received != 2 || !strings.Contains(r.StopReason, "item feed-2 cannot be taken") || !strings.Contains(r.StopReason, `route "later" is not configured`) {
		t.Fatalf("stopped receiver: %+v", r)
	}
	cons, err := ns.JS.Consumer(context.Background(), ns.Name, "feed")
	if err != nil {
		t.Fatal(err)
	}
	if info, err := cons.Info(context.Background()); err != nil || info.NumPending+uint64(info.NumAckPending) != 3 {
		t.Fatalf("stream after the stop: %+v, %v; want the 3 items from feed-2 on still there", info, err)
	}

	config("  shop: {endpoints: [shop]}\n  later: {endpoints: [shop]}")
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, p, 10*time.Second, "the reload", func() bool { return strings.Contains(p.log(), "configuration reloaded") })
	client := api.NewClient(p.url, "")
	if _, err := client.SwitchReceiver(context.Background(), "feed", true); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, p, 30*time.Second, "all five delivered", func() bool { return sk.Count("/shop") == 5 })
	for i, a := range sk.Arrivals("/shop") {
		if got, want := a.Header.Get("webhook-id"), fmt.Sprintf("feed-%d", i); got != want {
			t.Fatalf("arrival %d is %s; want %s: the feed's order was not kept", i, got, want)
		}
	}
}
