package engine_test

import (
	"context"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	natstransport "github.com/courier-gw/courier/transport/nats"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/tcpproxy"
	"github.com/courier-gw/courier/internal/testkit/amqptest"
	"github.com/courier-gw/courier/internal/testkit/natstest"
	"github.com/courier-gw/courier/internal/testkit/testenv"
)

// TestBrokerBackDelivers sends to a broker that is away (its address, a
// proxy in front of the machine's broker, has nothing listening): the
// attempt fails with a transient class, the endpoint is suspended and its
// message held, and once the broker is back the probe after the suspension
// delivers it. The message is then consumed from the broker.
func TestBrokerBackDelivers(t *testing.T) {
	for _, tc := range []struct {
		name      string
		env, ex   string
		transport courier.Transport
		// target readies the broker and returns the endpoint's settings
		// for its address, and a function that takes the message back.
		target func(t *testing.T, serviceURL string) (func(e *courier.Endpoint, addr string), func() []byte)
	}{
		{"amqp", "COURIER_TEST_AMQP", "amqp://guest:guest@127.0.0.1:5672/", courier.TransportAMQP, amqpTarget},
		{"nats", "COURIER_TEST_NATS", "nats://127.0.0.1:4222", courier.TransportNATS, natsTarget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			serviceURL := testenv.Service(t, tc.env, tc.ex)
			u, _ := url.Parse(serviceURL)
			addr, err := tcpproxy.FreeAddr()
			if err != nil {
				t.Fatal(err)
			}
			configure, take := tc.target(t, serviceURL)
			h := newHarness(t, func(h *harness) {
				e := courier.NewEndpoint("broker", tc.transport)
				e.Timeout = 5 * time.Second
				e.Suspension = courier.Backoff{Initial: 200 * time.Millisecond, Factor: 1, Max: 200 * time.Millisecond}
				configure(e, addr)
				h.top.Endpoints["broker"] = e
				h.route("orders", "broker")
				h.policy(schedulePolicy("order", 100*time.Millisecond, 100*time.Millisecond, 100*time.Millisecond, time.Second, time.Second))
			})
			h.send("ord-1", "order", "orders")

			// The first attempt fails, transiently.
			deadline := time.Now().Add(20 * time.Second)
			for len(h.attempts("ord-1")) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("no attempt")
				}
				time.Sleep(10 * time.Millisecond)
			}
			first := h.attempts("ord-1")[0]
			if first.Class != courier.ClassConnectRefused {
				t.Fatalf("first attempt %+v, want connect_refused", first)
			}
			if m, _ := h.store.Message(context.Background(), "ord-1"); m.State.Terminal() || m.State == courier.StateSuspended {
				t.Fatalf("after the first attempt: %s, want it waiting for a retry", m.State)
			}

			p, err := tcpproxy.Start(addr, u.Host)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(p.Close)
			m := h.waitState("ord-1", courier.StateDelivered)
			if m.Endpoint != "broker" {
				t.Errorf("delivered %+v", m)
			}
			if got := take(); string(got) != `{"id":"ord-1"}` {
				t.Errorf("the broker has %q", got)
			}
		})
	}
}

// amqpTarget declares a queue for the test and reads from it.
func amqpTarget(t *testing.T, serviceURL string) (func(*courier.Endpoint, string), func() []byte) {
	a := amqptest.NewAdmin(t)
	queue := a.Queue(nil)
	configure := func(e *courier.Endpoint, addr string) {
		u, _ := url.Parse(serviceURL)
		u.Host = addr
		e.Settings = &amqptransport.Settings{URL: u.String(), RoutingKey: queue}
	}
	take := func() []byte {
		d, ok, err := a.Ch.Get(queue, true)
		if err != nil || !ok {
			t.Fatalf("nothing on the queue: %v", err)
		}
		return d.Body
	}
	return configure, take
}

// natsTarget makes a stream for the test and reads from it.
func natsTarget(t *testing.T, serviceURL string) (func(*courier.Endpoint, string), func() []byte) {
	s := natstest.NewStream(t, jetstream.StreamConfig{Storage: jetstream.MemoryStorage})
	configure := func(e *courier.Endpoint, addr string) {
		u, _ := url.Parse(serviceURL)
		u.Host = addr
		e.Settings = &natstransport.Settings{URL: u.String(), Subject: s.Subject}
	}
	take := func() []byte {
		m, err := s.GetMsg(context.Background(), 1)
		if err != nil {
			t.Fatalf("nothing in the stream: %v", err)
		}
		return m.Data
	}
	return configure, take
}
