// Package amqp delivers messages to an AMQP 0-9-1 broker (RabbitMQ): each
// attempt publishes once to the endpoint's exchange with its routing key,
// persistent and mandatory, on a channel in confirm mode, and counts as
// delivered only when the broker acks it. A return (no queue takes the
// message) is rejected, a nack is transport, and a broken connection or
// channel is dropped and opened anew by the next attempt.
//
// Callers import it under an alias (amqptransport
// "github.com/courier-gw/courier/transport/amqp").
package amqp

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/conncache"
	"github.com/courier-gw/courier/internal/sendopts"
	"github.com/courier-gw/courier/tracing"
)

// Defaults of Options.
const (
	DefaultTimeout        = sendopts.DefaultTimeout        // the attempt timeout of an endpoint that sets none
	DefaultConnectTimeout = sendopts.DefaultConnectTimeout // connect, TLS and AMQP handshake
	DefaultMaxChannels    = 16                             // channels kept per endpoint when its max_concurrency is unset
	DefaultHeartbeat      = 10 * time.Second
	// DefaultMaxPayload is the largest payload published. An AMQP broker
	// announces no limit, and an endpoint's settings name none, so this is
	// RabbitMQ's default max_message_size (128 MiB from 3.8 to 3.13; 4.0
	// lowered it to 16 MiB, and a broker set lower refuses a larger
	// message itself, which is rejected all the same).
	DefaultMaxPayload = 128 << 20
)

// Options configure a Transport. Every field has a default.
type Options struct {
	Logger *slog.Logger
	Clock  courier.Clock // gives the message's timestamp property

	DefaultTimeout time.Duration
	ConnectTimeout time.Duration
	Heartbeat      time.Duration
	// TLSConfig is used for amqps:// URLs (private root CAs, client
	// certificates); nil uses the system roots.
	TLSConfig *tls.Config
	// MaxPayload bounds the payload of a message: a broker takes a
	// message whole, so a blob is read into memory to publish it, and a
	// larger one is rejected without reading it or asking the broker.
	MaxPayload int64
}

// Transport publishes deliveries to amqp endpoints. It keeps one connection
// per endpoint with a pool of confirm-mode channels, one publish in flight
// on each, and is safe for concurrent use.
type Transport struct {
	opts Options
	log  *slog.Logger

	conns *conncache.Cache[*conn] // by endpoint name
}

var _ courier.Sender = (*Transport)(nil)

// New returns a Transport with o's unset fields at their defaults.
func New(o Options) *Transport {
	sendopts.Common{Logger: &o.Logger, Clock: &o.Clock, DefaultTimeout: &o.DefaultTimeout, ConnectTimeout: &o.ConnectTimeout}.SetDefaults()
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	if o.MaxPayload <= 0 {
		o.MaxPayload = DefaultMaxPayload
	}
	return &Transport{opts: o, log: o.Logger, conns: conncache.New((*conn).close)}
}

// Close closes every connection. Attempts still running fail with a closed
// connection; the Transport stays usable and connects again when asked.
func (t *Transport) Close() { t.conns.Close() }

// conn is the connection of one endpoint and its idle channels.
type conn struct {
	url     string
	amqp    *amqp.Connection
	blocked atomic.Bool // the broker stopped taking publishes (a resource alarm)

	mu   sync.Mutex
	idle []*channel
	max  int
}

// channel is one confirm-mode channel; one publish at a time uses it, so
// that a return on it belongs to that publish.
type channel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
}

// closeWait bounds the wait for a broker's answer to a close: one that has
// stopped answering must not hold up an attempt or a shutdown.
const closeWait = 5 * time.Second

func (c *conn) close() {
	c.mu.Lock()
	c.idle = nil
	c.mu.Unlock()
	c.amqp.CloseDeadline(time.Now().Add(closeWait))
}

// connFor returns the live connection of e, dialling when there is none,
// it died, or the endpoint's URL changed.
func (t *Transport) connFor(e *courier.Endpoint, timeout time.Duration) (*conn, error) {
	fresh := func(c *conn) bool { return c.url == settingsOf(e).URL && !c.amqp.IsClosed() }
	return t.conns.Get(e.Name, fresh, func() (*conn, error) { return t.dial(e, timeout) })
}

// dial connects to e's broker. The connect and handshake take at most the
// connect timeout and the attempt's timeout.
func (t *Transport) dial(e *courier.Endpoint, timeout time.Duration) (*conn, error) {
	cfg := amqp.Config{
		Heartbeat:       t.opts.Heartbeat,
		TLSClientConfig: t.opts.TLSConfig,
		Dial:            amqp.DefaultDial(min(t.opts.ConnectTimeout, timeout)),
		Properties:      amqp.Table{"connection_name": "courier endpoint " + e.Name, "product": "courier"},
	}
	ac, err := amqp.DialConfig(settingsOf(e).URL, cfg)
	if err != nil {
		return nil, &dialError{err: err}
	}
	c := &conn{url: settingsOf(e).URL, amqp: ac, max: e.MaxConcurrency}
	if c.max <= 0 {
		c.max = DefaultMaxChannels
	}
	blocked := ac.NotifyBlocked(make(chan amqp.Blocking, 1))
	go func() {
		for b := range blocked {
			c.blocked.Store(b.Active)
			if b.Active {
				t.log.Warn("amqp transport: the broker blocks publishing", "endpoint", e.Name, "reason", b.Reason)
			}
		}
	}()
	t.log.Debug("amqp transport: connected", "endpoint", e.Name)
	return c, nil
}

// channel takes an idle channel of c or opens one.
func (c *conn) channel() (*channel, error) {
	c.mu.Lock()
	for len(c.idle) > 0 {
		ch := c.idle[len(c.idle)-1]
		c.idle = c.idle[:len(c.idle)-1]
		if !ch.ch.IsClosed() {
			c.mu.Unlock()
			return ch, nil
		}
	}
	c.mu.Unlock()
	ac, err := c.amqp.Channel()
	if err != nil {
		return nil, err
	}
	if err := ac.Confirm(false); err != nil {
		ac.Close()
		return nil, err
	}
	return &channel{
		ch:      ac,
		returns: ac.NotifyReturn(make(chan amqp.Return, 1)),
		closed:  ac.NotifyClose(make(chan *amqp.Error, 1)),
	}, nil
}

// channel takes a channel of c within ctx. Opening one waits for the
// broker's answer, which has no deadline of its own: when ctx ends first,
// the connection is given up (a broker that does not open a channel will
// not confirm a publish either) and a channel that opens late is put back.
func (t *Transport) channel(ctx context.Context, name string, c *conn) (*channel, error) {
	ch, answered, err := await(ctx, c.channel, func(ch *channel, _ error) {
		if ch != nil {
			c.release(ch)
		}
	})
	if err != nil && (!answered || c.amqp.IsClosed()) {
		t.conns.Drop(name, c)
	}
	return ch, err
}

// await runs f and waits for its results or for ctx to end, whichever
// comes first: the client's calls wait for the broker's answer without a
// deadline of their own. answered is false when ctx ended first; err is
// then ctx's, and late, when not nil, gets f's results once they come.
func await[T any](ctx context.Context, f func() (T, error), late func(T, error)) (v T, answered bool, err error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, true, r.err
	case <-ctx.Done():
		if late != nil {
			go func() {
				r := <-done
				late(r.v, r.err)
			}()
		}
		return v, false, ctx.Err()
	}
}

// release gives a channel that is fit for the next publish back to the pool.
func (c *conn) release(ch *channel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) < c.max && !ch.ch.IsClosed() && !c.amqp.IsClosed() {
		c.idle = append(c.idle, ch)
		return
	}
	go ch.ch.Close()
}

// Send publishes d.Message once and waits for the broker's confirm. It
// never returns an error: every failure is a Result with a class.
func (t *Transport) Send(ctx context.Context, d courier.Delivery) courier.Result {
	if fail := sendopts.Unsendable(d); fail != nil {
		return *fail
	}
	e := d.Endpoint
	timeout := sendopts.Timeout(e, t.opts.DefaultTimeout)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	// The payload is read before the broker is asked for anything, so
	// that a failed read holds no channel.
	body, fail := t.payload(actx, d)
	if fail != nil {
		return *fail
	}
	target := fmt.Sprintf("exchange %q with routing key %q", settingsOf(e).Exchange, settingsOf(e).RoutingKey)
	c, err := t.connFor(e, timeout)
	if err != nil {
		return classify(err, target, brokerAddr(settingsOf(e).URL))
	}
	if c.blocked.Load() {
		return courier.Result{Class: courier.ClassTransport, Error: "the broker blocks publishing (a resource alarm: memory or disk)"}
	}
	ch, err := t.channel(actx, e.Name, c)
	if err != nil {
		if ctx.Err() == context.Canceled {
			return courier.Result{Class: courier.ClassTransport, Error: "attempt canceled"}
		}
		if actx.Err() != nil {
			return courier.Result{Class: courier.ClassTimeout, Error: fmt.Sprintf("the broker did not open a channel within %s", timeout)}
		}
		return classify(err, target, brokerAddr(settingsOf(e).URL))
	}
	res, keep := t.publish(actx, ch, e, d, body, target)
	if keep {
		c.release(ch)
	} else {
		// A channel close waits for the broker's answer, which a broker
		// that let this publish time out may never give.
		go ch.ch.Close()
		if c.amqp.IsClosed() {
			t.conns.Drop(e.Name, c)
		}
	}
	if !res.Delivered() && ctx.Err() == context.Canceled {
		return courier.Result{Class: courier.ClassTransport, Error: "attempt canceled"}
	}
	return res
}

// payload returns the body to publish: the message's payload, a blob read
// whole. One over MaxPayload is rejected for good: no attempt can publish
// it.
func (t *Transport) payload(ctx context.Context, d courier.Delivery) ([]byte, *courier.Result) {
	m := d.Message
	if size := max(m.Size, len(m.Payload)); int64(size) > t.opts.MaxPayload {
		return nil, &courier.Result{Class: courier.ClassRejected,
			Error: fmt.Sprintf("payload of %d bytes is over the broker's limit of %d bytes", size, t.opts.MaxPayload)}
	}
	if !m.HasBlob() {
		return m.Payload, nil
	}
	body, err := m.ReadPayload(ctx, d.Blobs, t.opts.MaxPayload)
	if err != nil {
		// The store's fault, not the broker's: transient.
		return nil, &courier.Result{Class: courier.ClassTransport, Error: "cannot read the payload from the store: " + err.Error()}
	}
	return body, nil
}

// publish sends one message with body on ch and waits for its confirm.
// keep reports whether ch is fit for the next publish: not after a
// timeout, whose confirm might still come and be taken for the next one's.
func (t *Transport) publish(ctx context.Context, ch *channel, e *courier.Endpoint, d courier.Delivery, body []byte, target string) (res courier.Result, keep bool) {
	m := d.Message
	headers := amqp.Table{}
	for k, v := range m.Headers {
		headers[k] = v
	}
	headers["courier-attempt"] = int64(d.Attempt)
	if tp := tracing.TraceParent(ctx); tp != "" {
		headers["traceparent"] = tp
	}
	if m.Sequence != 0 {
		headers["courier-sequence"] = m.Sequence
		if m.PreviousID != "" {
			headers["courier-previous-id"] = m.PreviousID
		}
	}
	pub := amqp.Publishing{
		Headers:      headers,
		ContentType:  m.ContentType,
		DeliveryMode: amqp.Persistent,
		Priority:     uint8(m.Priority),
		MessageId:    d.DeliveryID(), // each delivery its own, as webhook-id
		Timestamp:    t.opts.Clock.Now(),
		Type:         m.Type,
		AppId:        "courier",
		Body:         body,
	}
	if m.ContentType == "" {
		pub.ContentType = "application/octet-stream"
	}
	// Mandatory: a message that no queue takes comes back instead of
	// being dropped by the broker and acked all the same.
	dc, err := ch.ch.PublishWithDeferredConfirmWithContext(ctx, settingsOf(e).Exchange, settingsOf(e).RoutingKey, true, false, pub)
	if err != nil {
		return classify(err, target, brokerAddr(settingsOf(e).URL)), false
	}
	select {
	case <-dc.Done():
	case <-ctx.Done():
		return courier.Result{Class: courier.ClassTimeout, Error: fmt.Sprintf("no confirm from the broker for %s within %s", target, e.Timeout)}, false
	}
	// The broker sends a return before the ack of the same message, and
	// the client hands it over before it reads the ack: it is here now.
	// A closed channel closes this Go channel too: a zero Return is no
	// return.
	select {
	case ret, ok := <-ch.returns:
		if !ok {
			break
		}
		return courier.Result{Class: courier.ClassRejected, Status: int(ret.ReplyCode),
			Response: fmt.Sprintf("%d %s", ret.ReplyCode, ret.ReplyText),
			Error:    fmt.Sprintf("the broker returned the message: %s %s (no queue is bound to %s)", strconv.Itoa(int(ret.ReplyCode)), ret.ReplyText, target)}, true
	default:
	}
	if dc.Acked() {
		return courier.Result{Response: "confirmed by the broker"}, true
	}
	// Without an ack: a nack, or the channel closed under the publish.
	if ch.ch.IsClosed() {
		select {
		case cerr := <-ch.closed:
			if cerr != nil {
				return classify(cerr, target, brokerAddr(settingsOf(e).URL)), false
			}
		default:
		}
		return courier.Result{Class: courier.ClassConnectionClosed, Error: "the channel closed before the broker confirmed " + target}, false
	}
	return courier.Result{Class: courier.ClassTransport, Error: "the broker nacked the message for " + target + " (it could not take it; a queue may be full)"}, true
}

// dialError marks a failed connect, TLS or AMQP handshake.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// brokerAddr is the host:port of an AMQP URL, for error messages; never the
// credentials.
func brokerAddr(url string) string {
	u, err := amqp.ParseURI(url)
	if err != nil {
		return "the broker"
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
}
