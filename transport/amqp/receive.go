package amqp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/courier-gw/courier"
)

// fetchWait is how long Fetch waits for a first delivery before it returns
// none: long enough not to spin, short enough for a receiver to notice that
// it must stop.
const fetchWait = time.Second

// maxPrefetch is the largest prefetch count AMQP 0-9-1 can carry (a short).
const maxPrefetch = math.MaxUint16

// Source consumes a receive location's RabbitMQ queue with manual acks. It
// holds one connection with one consuming channel, and a second channel for
// Pending, whose passive declare the broker answers with a channel close
// when the queue is gone. A lost connection is not repaired: Fetch returns
// an error and the receiver closes the Source and opens a new one, whose
// deliveries include the ones the broker took back. A message comes whole,
// in Body, as the broker delivers it; the receiver keeps one over
// courier.InlineMax as a blob of the store's, so that its row stays small.
type Source struct {
	queue string
	addr  string // host:port, for errors; never the credentials
	conn  *amqp.Connection
	ch    *amqp.Channel

	deliveries <-chan amqp.Delivery
	chClosed   chan *amqp.Error // the consuming channel's close, with the broker's reason
	cancelled  chan string      // the broker ended the consumer (the queue was deleted)

	mu sync.Mutex
	// unacked holds the tags handed out by Fetch and neither acked nor
	// released: a multiple ack is correct only when no other tag below
	// its own is outstanding.
	unacked map[uint64]bool

	pendingMu sync.Mutex    // held across the broker's answer, so apart from mu
	pending   *amqp.Channel // for Pending; opened when first needed

	closeOnce sync.Once
	closeErr  error
}

var _ courier.Source = (*Source)(nil)

// Open connects to r's broker and starts consuming r.AMQP.Queue with manual
// acks and a prefetch of twice r.Batch, so that a batch is ready while the
// last one is stored. The queue must exist: a missing one is an error that
// names it. Connecting and setting up take at most DefaultConnectTimeout and
// ctx.
func Open(ctx context.Context, r *courier.Receiver) (*Source, error) {
	src := r.AMQP
	addr := brokerAddr(src.URL)
	ctx, cancel := context.WithTimeout(ctx, DefaultConnectTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}

	cfg := amqp.Config{
		Heartbeat:  DefaultHeartbeat,
		Dial:       amqp.DefaultDial(time.Until(deadline)),
		Properties: amqp.Table{"connection_name": "courier receiver " + r.Name, "product": "courier"},
	}
	// The dial has no context; a canceled ctx is noticed when it returns,
	// at the latest after the dial timeout.
	conn, err := amqp.DialConfig(src.URL, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	if err := ctx.Err(); err != nil {
		conn.CloseDeadline(time.Now().Add(closeWait))
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	// The broker's answers to the setup below have no deadline: when ctx
	// ends first, closing the connection makes the waiting call return.
	stop := context.AfterFunc(ctx, func() { conn.CloseDeadline(time.Now().Add(closeWait)) })
	s, err := setUp(conn, src.Queue, addr, prefetch(r.Batch))
	if !stop() {
		err = errors.Join(err, ctx.Err())
	}
	if err != nil {
		conn.CloseDeadline(time.Now().Add(closeWait))
		return nil, err
	}
	return s, nil
}

// prefetch is the broker's limit of unacked deliveries for a batch size;
// a batch below 1 counts as 1, as in Fetch (a prefetch of 0 would be no
// limit at all).
func prefetch(batch int) int {
	return min(2*max(batch, 1), maxPrefetch)
}

// setUp opens the consuming channel on conn and starts the consumer.
func setUp(conn *amqp.Connection, queue, addr string, prefetch int) (*Source, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open a channel on %s: %w", addr, err)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		return nil, fmt.Errorf("set prefetch %d on %s: %w", prefetch, addr, err)
	}
	// Consuming a missing queue fails too, but the passive declare says so
	// plainly and before the consumer exists.
	if _, err := ch.QueueDeclarePassive(queue, false, false, false, false, nil); err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.Code == amqp.NotFound {
			return nil, fmt.Errorf("queue %q does not exist on %s: %w", queue, addr, err)
		}
		return nil, fmt.Errorf("check queue %q on %s: %w", queue, addr, err)
	}
	s := &Source{
		queue:   queue,
		addr:    addr,
		conn:    conn,
		ch:      ch,
		unacked: make(map[uint64]bool),
		// Buffered: the client sends each once and must not block on it.
		chClosed:  ch.NotifyClose(make(chan *amqp.Error, 1)),
		cancelled: ch.NotifyCancel(make(chan string, 1)),
	}
	s.deliveries, err = ch.Consume(queue, "", false, false, false, false, nil)
	if err != nil {
		return nil, fmt.Errorf("consume queue %q on %s: %w", queue, addr, err)
	}
	return s, nil
}

// Fetch waits up to about a second (and ctx) for a first delivery, then
// takes the ones already here, up to max (below 1 counts as 1). It returns
// an error once the consumer has stopped: the channel or connection
// closed, or the broker cancelled it.
func (s *Source) Fetch(ctx context.Context, max int) ([]*courier.InboundItem, error) {
	if max < 1 {
		max = 1
	}
	timer := time.NewTimer(fetchWait)
	defer timer.Stop()
	var items []*courier.InboundItem
	select {
	case d, ok := <-s.deliveries:
		if !ok {
			return nil, s.stopped()
		}
		items = append(items, s.item(d))
	case <-timer.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	// The client hands deliveries over one at a time through a goroutine
	// of its own: the batch waits a moment for the next one, so that a
	// full queue fills a batch instead of making one commit per item.
	linger := time.NewTimer(fetchLinger)
	defer linger.Stop()
	for len(items) < max {
		select {
		case d, ok := <-s.deliveries:
			if !ok {
				// The next Fetch reports it; these are handed out and
				// their ack fails, so the broker delivers them again.
				return items, nil
			}
			items = append(items, s.item(d))
			linger.Reset(fetchLinger)
		case <-linger.C:
			return items, nil
		case <-ctx.Done():
			return items, nil
		}
	}
	return items, nil
}

// fetchLinger is how long a batch waits for one more delivery: far below
// the cost of the commit it saves.
const fetchLinger = 2 * time.Millisecond

// stopped says why the consumer's deliveries ended.
func (s *Source) stopped() error {
	select {
	case e, ok := <-s.chClosed:
		if ok && e != nil {
			return fmt.Errorf("consuming queue %q on %s stopped: the channel closed: %w", s.queue, s.addr, e)
		}
	default:
	}
	select {
	case _, ok := <-s.cancelled:
		if !ok {
			// Closed with the channel: no cancel came.
			break
		}
		return fmt.Errorf("consuming queue %q on %s stopped: the broker cancelled the consumer (was the queue deleted?)", s.queue, s.addr)
	default:
	}
	return fmt.Errorf("consuming queue %q on %s stopped: %w", s.queue, s.addr, amqp.ErrClosed)
}

// item maps a delivery to an inbound item and remembers its tag as
// outstanding.
func (s *Source) item(d amqp.Delivery) *courier.InboundItem {
	s.mu.Lock()
	s.unacked[d.DeliveryTag] = true
	s.mu.Unlock()
	headers, unreadable := readHeaders(d)
	return &courier.InboundItem{
		Body:        d.Body,
		Headers:     headers,
		Unreadable:  unreadable,
		ContentType: d.ContentType,
		Redelivered: d.Redelivered,
		Handle:      d,
	}
}

// readHeaders turns a delivery's headers table and its message properties
// into text headers. A header whose value is not text (a nested table, an
// array, invalid UTF-8) is named in unreadable instead. The properties come
// under lowercase names and never replace a header of the same name, whose
// sender meant it.
func readHeaders(d amqp.Delivery) (headers map[string]string, unreadable []string) {
	headers = make(map[string]string, len(d.Headers)+5)
	for k, v := range d.Headers {
		if text, ok := headerText(v); ok {
			headers[k] = text
		} else {
			unreadable = append(unreadable, k)
		}
	}
	slices.Sort(unreadable)
	taken := func(name string) bool {
		for k := range d.Headers {
			if strings.EqualFold(k, name) {
				return true
			}
		}
		return false
	}
	for _, p := range []struct{ name, value string }{
		{"message-id", d.MessageId},
		{"type", d.Type},
		{"correlation-id", d.CorrelationId},
		{"app-id", d.AppId},
		{"content-type", d.ContentType},
	} {
		if p.value != "" && !taken(p.name) {
			headers[p.name] = p.value
		}
	}
	return headers, unreadable
}

// headerText is an AMQP field value as text; ok is false when it has none.
func headerText(v any) (text string, ok bool) {
	switch v := v.(type) {
	case string:
		if !utf8.ValidString(v) {
			return "", false
		}
		return v, true
	case []byte:
		if !utf8.Valid(v) {
			return "", false
		}
		return string(v), true
	case bool:
		return strconv.FormatBool(v), true
	case int8, int16, int32, int64, int, uint8, uint16, uint32, uint64:
		return fmt.Sprint(v), true // in decimal, as strconv writes them
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case time.Time:
		return v.UTC().Format(time.RFC3339), true
	case amqp.Decimal:
		return decimalText(v), true
	}
	return "", false
}

// decimalText writes an AMQP decimal (Value × 10^-Scale) out in full.
func decimalText(d amqp.Decimal) string {
	digits := strconv.FormatInt(int64(d.Value), 10)
	sign := ""
	if d.Value < 0 {
		sign, digits = "-", digits[1:]
	}
	if d.Scale == 0 {
		return sign + digits
	}
	scale := int(d.Scale)
	if len(digits) <= scale {
		digits = strings.Repeat("0", scale-len(digits)+1) + digits
	}
	return sign + digits[:len(digits)-scale] + "." + digits[len(digits)-scale:]
}

// tags returns the delivery tags of items, checking that each was fetched
// from s and is still outstanding, and takes them out of the outstanding
// set. run reports whether they are every outstanding tag up to the
// highest, so that one multiple ack or nack settles exactly them.
func (s *Source) tags(items []*courier.InboundItem) (tags []uint64, run bool, err error) {
	tags = make([]uint64, 0, len(items))
	for _, it := range items {
		d, ok := it.Handle.(amqp.Delivery)
		if !ok || d.Acknowledger != amqp.Acknowledger(s.ch) {
			return nil, false, errors.New("an item was not fetched from this source")
		}
		tags = append(tags, d.DeliveryTag)
	}
	slices.Sort(tags)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, tag := range tags {
		if !s.unacked[tag] || (i > 0 && tags[i-1] == tag) {
			return nil, false, fmt.Errorf("delivery %d was already acked or released", tag)
		}
	}
	below := 0
	for tag := range s.unacked {
		if len(tags) > 0 && tag <= tags[len(tags)-1] {
			below++
		}
	}
	for _, tag := range tags {
		delete(s.unacked, tag)
	}
	return tags, below == len(tags), nil
}

// Ack tells the broker that the items are stored, so it forgets them: one
// multiple ack when they are all the outstanding deliveries up to the
// highest, else one ack each. An ack that cannot be sent leaves the item
// with the broker, which delivers it again.
func (s *Source) Ack(ctx context.Context, items []*courier.InboundItem) error {
	return s.settle(items, "ack", func(tag uint64, multiple bool) error { return s.ch.Ack(tag, multiple) })
}

// Release hands the items back to the queue (a nack with requeue), to be
// delivered again, marked redelivered.
func (s *Source) Release(ctx context.Context, items []*courier.InboundItem) error {
	return s.settle(items, "release", func(tag uint64, multiple bool) error { return s.ch.Nack(tag, multiple, true) })
}

// settle acks or nacks items with send.
func (s *Source) settle(items []*courier.InboundItem, what string, send func(tag uint64, multiple bool) error) error {
	if len(items) == 0 {
		return nil
	}
	tags, run, err := s.tags(items)
	if err != nil {
		return fmt.Errorf("%s deliveries of queue %q: %w", what, s.queue, err)
	}
	if run {
		if err := send(tags[len(tags)-1], true); err != nil {
			return fmt.Errorf("%s %d deliveries of queue %q: %w", what, len(tags), s.queue, err)
		}
		return nil
	}
	for _, tag := range tags {
		if err := send(tag, false); err != nil {
			return fmt.Errorf("%s delivery %d of queue %q: %w", what, tag, s.queue, err)
		}
	}
	return nil
}

// Pending is the number of the queue's messages ready for delivery (not
// those delivered and unacked), from a passive declare on a channel of its
// own; -1 with an error when the broker does not tell.
func (s *Source) Pending(ctx context.Context) (int64, error) {
	// A declare that ctx gave up on returns when its answer comes or
	// Close closes the connection.
	n, _, err := await(ctx, s.count, nil)
	if err != nil {
		return -1, fmt.Errorf("count the messages of queue %q: %w", s.queue, err)
	}
	return n, nil
}

// count asks the broker for the queue's ready messages.
func (s *Source) count() (int64, error) {
	s.pendingMu.Lock()
	defer s.pendingMu.Unlock()
	if s.pending == nil || s.pending.IsClosed() {
		ch, err := s.conn.Channel()
		if err != nil {
			return -1, err
		}
		s.pending = ch
	}
	q, err := s.pending.QueueDeclarePassive(s.queue, false, false, false, false, nil)
	if err != nil {
		return -1, err
	}
	return int64(q.Messages), nil
}

// Close closes the connection and with it both channels; the broker puts
// deliveries not acked back in the queue. A second Close does nothing.
func (s *Source) Close() error {
	s.closeOnce.Do(func() {
		// A broker that stopped answering must not hold up a shutdown.
		err := s.conn.CloseDeadline(time.Now().Add(closeWait))
		if err != nil && !errors.Is(err, amqp.ErrClosed) {
			s.closeErr = fmt.Errorf("close the connection to %s: %w", s.addr, err)
		}
	})
	return s.closeErr
}
