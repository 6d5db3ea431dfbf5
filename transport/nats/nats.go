// Package nats delivers messages to NATS JetStream: each attempt publishes
// once to the endpoint's subject and counts as delivered only when the
// stream acks it. The delivery's id (courier.Delivery.DeliveryID, the
// webhook-id of HTTP) goes as Nats-Msg-Id, so that the stream drops a
// repeated attempt within its duplicate window instead of storing it
// twice, and keeps two subscriptions' deliveries of one message apart. A subject that no stream takes is rejected.
//
// Callers import it under an alias (natstransport
// "github.com/courier-gw/courier/transport/nats").
package nats

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/conncache"
	"github.com/courier-gw/courier/internal/sendopts"
	"github.com/courier-gw/courier/tracing"
)

// Defaults of Options.
const (
	DefaultTimeout        = sendopts.DefaultTimeout // the attempt timeout of an endpoint that sets none
	DefaultConnectTimeout = sendopts.DefaultConnectTimeout
)

// Options configure a Transport. Every field has a default.
type Options struct {
	Logger *slog.Logger

	DefaultTimeout time.Duration
	ConnectTimeout time.Duration
	// TLSConfig is used for tls:// URLs and servers that require TLS; nil
	// uses the system roots.
	TLSConfig *tls.Config
}

// Transport publishes deliveries to nats endpoints. It keeps one connection
// per endpoint, which any number of attempts share, and is safe for
// concurrent use.
type Transport struct {
	opts Options
	log  *slog.Logger

	conns *conncache.Cache[*conn] // by endpoint name
}

var _ courier.Sender = (*Transport)(nil)

// New returns a Transport with o's unset fields at their defaults.
func New(o Options) *Transport {
	sendopts.Common{Logger: &o.Logger, DefaultTimeout: &o.DefaultTimeout, ConnectTimeout: &o.ConnectTimeout}.SetDefaults()
	return &Transport{opts: o, log: o.Logger, conns: conncache.New(func(c *conn) { c.nc.Close() })}
}

// Close closes every connection. The Transport stays usable and connects
// again when asked.
func (t *Transport) Close() { t.conns.Close() }

// conn is the connection of one endpoint.
type conn struct {
	url string
	nc  *nats.Conn
	js  jetstream.JetStream
}

// connFor returns the live connection of e, dialling when there is none,
// it closed, or the endpoint's URL changed. The client's own reconnecting
// is off: while it reconnects, a publish would wait in its buffer for a
// server that may not come, where an attempt should fail and be retried
// by courier's policy; the next attempt dials again instead.
func (t *Transport) connFor(e *courier.Endpoint, timeout time.Duration) (*conn, error) {
	fresh := func(c *conn) bool { return c.url == settingsOf(e).URL && !c.nc.IsClosed() }
	return t.conns.Get(e.Name, fresh, func() (*conn, error) { return t.dial(e, timeout) })
}

// dial connects to e's server within the connect timeout and the attempt's
// timeout.
func (t *Transport) dial(e *courier.Endpoint, timeout time.Duration) (*conn, error) {
	connectTimeout := min(t.opts.ConnectTimeout, timeout)
	d := &dialer{d: net.Dialer{Timeout: connectTimeout}}
	opts := []nats.Option{
		nats.Name("courier endpoint " + e.Name),
		nats.Timeout(connectTimeout),
		nats.NoReconnect(),
		nats.SetCustomDialer(d),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			t.log.Warn("nats transport: asynchronous error", "endpoint", e.Name, "err", err)
		}),
	}
	if t.opts.TLSConfig != nil {
		opts = append(opts, nats.Secure(t.opts.TLSConfig))
	}
	nc, err := nats.Connect(settingsOf(e).URL, opts...)
	if err != nil {
		return nil, &dialError{err: err, cause: d.lastError()}
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, &dialError{err: err}
	}
	c := &conn{url: settingsOf(e).URL, nc: nc, js: js}
	t.log.Debug("nats transport: connected", "endpoint", e.Name, "server", nc.ConnectedUrlRedacted())
	return c, nil
}

// Send publishes d.Message once and waits for the stream's ack. It never
// returns an error: every failure is a Result with a class.
func (t *Transport) Send(ctx context.Context, d courier.Delivery) courier.Result {
	if fail := sendopts.Unsendable(d); fail != nil {
		return *fail
	}
	m, e := d.Message, d.Endpoint
	timeout := sendopts.Timeout(e, t.opts.DefaultTimeout)
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	c, err := t.connFor(e, timeout)
	if err != nil {
		return classify(err, settingsOf(e).Subject, serverAddr(settingsOf(e).URL), timeout)
	}
	data, fail := payload(actx, d, c.nc.MaxPayload())
	if fail != nil {
		return *fail
	}
	msg := nats.NewMsg(settingsOf(e).Subject)
	msg.Data = data
	// Set directly: NATS header names are case-sensitive and arrive as
	// written.
	for k, v := range m.Headers {
		msg.Header[k] = []string{v}
	}
	ct := m.ContentType
	if ct == "" {
		ct = "application/octet-stream"
	}
	msg.Header["Content-Type"] = []string{ct}
	msg.Header["Courier-Type"] = []string{m.Type}
	msg.Header["Courier-Attempt"] = []string{strconv.Itoa(d.Attempt)}
	if m.Sequence != 0 {
		msg.Header["Courier-Sequence"] = []string{strconv.FormatInt(m.Sequence, 10)}
		if m.PreviousID != "" {
			msg.Header["Courier-Previous-Id"] = []string{m.PreviousID}
		}
	}
	// The delivery's id: the stream deduplicates by it, and two subscriptions
	// that reach it make two deliveries of one message.
	msg.Header[jetstream.MsgIDHeader] = []string{d.DeliveryID()}
	if tp := tracing.TraceParent(ctx); tp != "" {
		msg.Header["traceparent"] = []string{tp}
	}

	ack, err := c.js.PublishMsg(actx, msg)
	if err != nil {
		if ctx.Err() == context.Canceled {
			return courier.Result{Class: courier.ClassTransport, Error: "attempt canceled"}
		}
		return classify(err, settingsOf(e).Subject, serverAddr(settingsOf(e).URL), timeout)
	}
	if ack.Duplicate {
		return courier.Result{Response: fmt.Sprintf("stream %s has it already (sequence %d): a duplicate, not stored again", ack.Stream, ack.Sequence)}
	}
	return courier.Result{Response: fmt.Sprintf("stored by stream %s as sequence %d", ack.Stream, ack.Sequence)}
}

// payload returns the data to publish: the message's payload, a blob read
// whole. One over limit, the max_payload the server announced, is rejected
// for good: the server takes no message larger, whatever the attempt.
func payload(ctx context.Context, d courier.Delivery, limit int64) ([]byte, *courier.Result) {
	m := d.Message
	if size := max(m.Size, len(m.Payload)); int64(size) > limit {
		return nil, &courier.Result{Class: courier.ClassRejected,
			Error: fmt.Sprintf("payload of %d bytes is over the broker's limit of %d bytes (the server's max_payload)", size, limit)}
	}
	if !m.HasBlob() {
		return m.Payload, nil
	}
	data, err := m.ReadPayload(ctx, d.Blobs, limit)
	if err != nil {
		// The store's fault, not the server's: transient.
		return nil, &courier.Result{Class: courier.ClassTransport, Error: "cannot read the payload from the store: " + err.Error()}
	}
	return data, nil
}

// dialer connects as net.Dialer does and keeps the last error: the client
// reports a failed connect only as "no servers available".
type dialer struct {
	d    net.Dialer
	mu   sync.Mutex
	last error
}

func (d *dialer) Dial(network, address string) (net.Conn, error) {
	c, err := d.d.Dial(network, address)
	if err != nil {
		d.mu.Lock()
		d.last = err
		d.mu.Unlock()
	}
	return c, err
}

func (d *dialer) lastError() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.last
}

// dialError marks a failed connect; cause is the network's error behind
// it, when there was one.
type dialError struct {
	err   error
	cause error
}

func (e *dialError) Error() string {
	if e.cause != nil {
		return e.cause.Error()
	}
	return e.err.Error()
}

func (e *dialError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.err, e.cause}
	}
	return []error{e.err}
}
