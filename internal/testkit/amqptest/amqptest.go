// Package amqptest gives tests a connection of their own to the RabbitMQ
// broker of COURIER_TEST_AMQP, to declare queues and exchanges that go
// away with the test, publish to them and take from them.
package amqptest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier/internal/testkit/testenv"
)

// Admin is a test's own connection to the broker.
type Admin struct {
	URL  string // the broker's, from COURIER_TEST_AMQP
	Conn *amqp.Connection
	Ch   *amqp.Channel

	t testing.TB
}

// NewAdmin connects to the broker; the test skips without one (fails in
// CI), and the connection closes when it ends.
func NewAdmin(t testing.TB) *Admin {
	t.Helper()
	u := testenv.AMQP.URL(t)
	conn, err := amqp.Dial(u)
	if err != nil {
		t.Fatalf("connect to the broker: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	return &Admin{URL: u, Conn: conn, Ch: ch, t: t}
}

// Unique returns prefix with a random suffix, for names that tests running
// at once on one broker do not share.
func Unique(prefix string) string {
	var b [6]byte
	rand.Read(b[:])
	return prefix + "." + hex.EncodeToString(b[:])
}

// Queue declares a durable queue with the arguments args, deleted when the
// test ends.
func (a *Admin) Queue(args amqp.Table) string {
	a.t.Helper()
	name := Unique("courier.test")
	if _, err := a.Ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() {
		// A channel of its own: the test may have closed a.Ch.
		ch, err := a.Conn.Channel()
		if err != nil {
			a.t.Errorf("delete queue %s: %v", name, err)
			return
		}
		defer ch.Close()
		if _, err := ch.QueueDelete(name, false, false, false); err != nil {
			a.t.Errorf("delete queue %s: %v", name, err)
		}
	})
	return name
}

// Bind binds queue to exchange with key.
func (a *Admin) Bind(queue, exchange, key string) {
	a.t.Helper()
	if err := a.Ch.QueueBind(queue, key, exchange, false, nil); err != nil {
		a.t.Fatal(err)
	}
}

// Exchange declares an exchange of kind (direct, topic, ...), deleted when
// the test ends.
func (a *Admin) Exchange(kind string) string {
	a.t.Helper()
	name := Unique("courier.test")
	if err := a.Ch.ExchangeDeclare(name, kind, false, true, false, false, nil); err != nil {
		a.t.Fatal(err)
	}
	a.t.Cleanup(func() { a.Ch.ExchangeDelete(name, false, false) })
	return name
}

// Publish publishes p to queue through the default exchange.
func (a *Admin) Publish(queue string, p amqp.Publishing) {
	a.t.Helper()
	if err := a.Ch.PublishWithContext(context.Background(), "", queue, true, false, p); err != nil {
		a.t.Fatal(err)
	}
}

// PublishBodies publishes one message per body to queue, in order.
func (a *Admin) PublishBodies(queue string, bodies ...string) {
	a.t.Helper()
	for _, b := range bodies {
		a.Publish(queue, amqp.Publishing{Body: []byte(b)})
	}
}

// Get takes the next message from queue, waiting for it a while.
func (a *Admin) Get(queue string) amqp.Delivery {
	a.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, ok, err := a.Ch.Get(queue, true)
		if err != nil {
			a.t.Fatal(err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("nothing arrived on %s", queue)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
