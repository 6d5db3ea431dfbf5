package nats

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/courier-gw/courier"
)

// Settings of a receive location's consumer and pulls.
const (
	// receiveAckWait is how long the server waits for the ack of an item
	// handed out before it hands the item out again, for consumers Open
	// creates: long enough for a batch's durable commit.
	receiveAckWait = 60 * time.Second
	// fetchWait is how long Fetch waits for the first item.
	fetchWait = time.Second
	// flushTimeout bounds the wait for acks and naks to reach the server
	// when the caller's context sets no deadline.
	flushTimeout = 5 * time.Second
	// ackPendingBatches is how many batches may be handed out and not yet
	// acked: a few, so that a slow commit does not stall the consumer.
	ackPendingBatches = 4
)

// Source reads a receive location's items from a JetStream stream through a
// durable pull consumer. It is used by one goroutine at a time. A message
// comes whole, in Body, as the server delivers it (at most the server's
// max_payload, 1 MiB unless configured larger); the receiver keeps one over
// courier.InlineMax as a blob of the store's, so that its row stays small.
type Source struct {
	nc   *nats.Conn
	cons jetstream.Consumer
	// where names the consumer and server in errors; never credentials.
	where string
}

var _ courier.Source = (*Source)(nil)

// Open connects to r.NATS.URL (a comma-separated list of servers) and binds
// the durable pull consumer r.NATS.Consumer on stream r.NATS.Stream,
// creating it when it does not exist: explicit acks, from the stream's
// first message, AckWait 60s. A missing stream is an error naming it; so is
// an existing consumer that cannot give at-least-once (a push consumer, or
// one without explicit acks).
//
// The client's own reconnecting is off: a lost connection makes Fetch fail,
// and the caller opens a new Source, rather than pulls silently coming back
// empty while the client waits for a server.
func Open(ctx context.Context, r *courier.Receiver) (*Source, error) {
	src := r.NATS
	addr := serverAddr(src.URL)
	if src.Stream == "" || src.Consumer == "" {
		return nil, fmt.Errorf("receiver %s: a nats source needs a stream and a consumer", r.Name)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, err)
	}
	connectTimeout := DefaultConnectTimeout
	if deadline, ok := ctx.Deadline(); ok {
		connectTimeout = min(connectTimeout, time.Until(deadline))
	}
	d := &dialer{d: net.Dialer{Timeout: connectTimeout}}
	nc, err := nats.Connect(src.URL,
		nats.Name("courier receiver "+r.Name),
		nats.Timeout(connectTimeout),
		nats.NoReconnect(),
		nats.SetCustomDialer(d),
		// Else the client prints them on standard error, outside the log.
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			slog.Warn("nats receiver: asynchronous error", "receiver", r.Name, "err", err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", addr, &dialError{err: err, cause: d.lastError()})
	}
	cons, err := bind(ctx, nc, r, addr)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &Source{nc: nc, cons: cons, where: fmt.Sprintf("consumer %s of stream %s on %s", src.Consumer, src.Stream, addr)}, nil
}

// bind returns r's consumer, creating it when it does not exist.
func bind(ctx context.Context, nc *nats.Conn, r *courier.Receiver, addr string) (jetstream.Consumer, error) {
	src := r.NATS
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream on %s: %w", addr, err)
	}
	stream, err := js.Stream(ctx, src.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("stream %s does not exist on %s: %w", src.Stream, addr, err)
	}
	if err != nil {
		return nil, fmt.Errorf("look up stream %s on %s: %w", src.Stream, addr, err)
	}
	cons, err := stream.Consumer(ctx, src.Consumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
			Durable:       src.Consumer,
			Description:   "courier receiver " + r.Name,
			AckPolicy:     jetstream.AckExplicitPolicy,
			DeliverPolicy: jetstream.DeliverAllPolicy,
			AckWait:       receiveAckWait,
			// A batch below 1 counts as 1, as in Fetch.
			MaxAckPending: ackPendingBatches * max(r.Batch, 1),
		})
		if errors.Is(err, jetstream.ErrConsumerExists) {
			// Another process created it meanwhile, with its own settings.
			cons, err = stream.Consumer(ctx, src.Consumer)
		}
		if err != nil {
			return nil, fmt.Errorf("create consumer %s on stream %s on %s: %w", src.Consumer, src.Stream, addr, err)
		}
	}
	if errors.Is(err, jetstream.ErrNotPullConsumer) {
		return nil, fmt.Errorf("consumer %s of stream %s on %s is a push consumer: a receiver needs a pull consumer", src.Consumer, src.Stream, addr)
	}
	if err != nil {
		return nil, fmt.Errorf("look up consumer %s of stream %s on %s: %w", src.Consumer, src.Stream, addr, err)
	}
	// Without explicit acks an item would be gone before it is stored, or
	// one ack would take items that were released.
	if info := cons.CachedInfo(); info != nil && info.Config.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("consumer %s of stream %s on %s has ack policy %s: a receiver needs explicit acks",
			src.Consumer, src.Stream, addr, info.Config.AckPolicy)
	}
	return cons, nil
}

// Fetch returns up to max items (max below 1 counts as 1) in the stream's
// order. What is there already comes at once; when nothing is, it waits
// about a second.
func (s *Source) Fetch(ctx context.Context, max int) ([]*courier.InboundItem, error) {
	if max < 1 {
		max = 1
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", s.where, err)
	}
	if err := s.live(); err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", s.where, err)
	}
	// A pull that waits would wait its whole time for a full batch, also
	// when some items are there: take those first, and wait only for none.
	items, err := s.pull(ctx, max, false)
	for err == nil && len(items) > 0 && len(items) < max {
		// What one pull returns is what the server had ready at once:
		// items handed back (Release) may follow in the next one.
		var more []*courier.InboundItem
		more, err = s.pull(ctx, max-len(items), false)
		if len(more) == 0 {
			break
		}
		items = append(items, more...)
	}
	if err != nil {
		s.Release(context.WithoutCancel(ctx), items)
		return nil, err
	}
	if len(items) == 0 {
		items, err = s.pull(ctx, max, true)
	}
	// Redeliveries come in the order the server has them, not the
	// stream's; a batch goes in stream order, so that a feed handed back
	// (an ordered feed stopped at a bad item) is taken again as it was.
	sortByStreamSeq(items)
	return items, err
}

// sortByStreamSeq sorts items by their sequence in the stream, stably;
// each item's metadata is parsed once.
func sortByStreamSeq(items []*courier.InboundItem) {
	type keyed struct {
		seq uint64
		it  *courier.InboundItem
	}
	ks := make([]keyed, len(items))
	for i, it := range items {
		ks[i] = keyed{streamSeq(it), it}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return cmp.Compare(a.seq, b.seq) })
	for i, k := range ks {
		items[i] = k.it
	}
}

// streamSeq is an item's sequence in its stream.
func streamSeq(it *courier.InboundItem) uint64 {
	if m, ok := it.Handle.(jetstream.Msg); ok {
		if md, err := m.Metadata(); err == nil {
			return md.Sequence.Stream
		}
	}
	return 0
}

// pull makes one pull request, waiting for items when wait is set.
func (s *Source) pull(ctx context.Context, max int, wait bool) ([]*courier.InboundItem, error) {
	var batch jetstream.MessageBatch
	var err error
	if wait {
		wctx, cancel := context.WithTimeout(ctx, fetchWait)
		defer cancel()
		batch, err = s.cons.Fetch(max, jetstream.FetchContext(wctx))
	} else {
		batch, err = s.cons.FetchNoWait(max)
	}
	if err != nil {
		return nil, fmt.Errorf("fetch from %s: %w", s.where, err)
	}
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	err = batch.Error()
	if wait && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		err = nil // the wait ran out, not the caller's time
	}
	if err == nil {
		// A pull on a connection that closed meanwhile ends as an empty one.
		err = s.live()
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		// Hand back what came, so that it need not wait for AckWait; on a
		// lost connection it comes back after AckWait anyway.
		for _, m := range msgs {
			_ = m.Nak()
		}
		return nil, fmt.Errorf("fetch from %s: %w", s.where, err)
	}
	items := make([]*courier.InboundItem, len(msgs))
	for i, m := range msgs {
		items[i] = inboundItem(m)
	}
	return items, nil
}

// inboundItem maps a message onto an item. NATS header names are
// case-sensitive and are kept as sent; of a header with several values the
// first is taken.
func inboundItem(m jetstream.Msg) *courier.InboundItem {
	it := &courier.InboundItem{Body: m.Data(), Handle: m}
	if md, err := m.Metadata(); err == nil {
		it.Redelivered = md.NumDelivered > 1
	}
	h := m.Headers()
	if len(h) == 0 {
		return it
	}
	it.Headers = make(map[string]string, len(h))
	for name, vs := range h {
		if len(vs) == 0 {
			continue
		}
		if v := vs[0]; utf8.ValidString(v) && courier.ValidHeaderValue(v) {
			it.Headers[name] = v
		} else {
			it.Unreadable = append(it.Unreadable, name)
		}
	}
	slices.Sort(it.Unreadable)
	// The exact name first; a publisher that wrote it in other case still
	// says the content type. An unreadable one is kept as it is, so that
	// Admit refuses it rather than taking the item as octets.
	ct, ok := h["Content-Type"]
	if !ok {
		for name, vs := range h {
			if strings.EqualFold(name, "Content-Type") {
				ct, ok = vs, true
				break
			}
		}
	}
	if ok && len(ct) > 0 {
		it.ContentType = ct[0]
	}
	return it
}

// Ack acks each item and waits until the acks have reached the server.
// The server does not confirm them: an ack lost on the way redelivers the
// item, which stores as a no-op.
func (s *Source) Ack(ctx context.Context, items []*courier.InboundItem) error {
	return s.settle(ctx, items, "ack", jetstream.Msg.Ack)
}

// Release naks each item, so that the server hands it out again at once.
func (s *Source) Release(ctx context.Context, items []*courier.InboundItem) error {
	return s.settle(ctx, items, "release", jetstream.Msg.Nak)
}

// settle applies do to every item's message, then flushes the connection.
func (s *Source) settle(ctx context.Context, items []*courier.InboundItem, what string, do func(jetstream.Msg) error) error {
	if len(items) == 0 {
		return nil
	}
	for i, it := range items {
		m, ok := it.Handle.(jetstream.Msg)
		if !ok {
			return fmt.Errorf("%s item %d of %d: not an item of a nats source", what, i+1, len(items))
		}
		// An item settled already is settled: nothing to repeat.
		if err := do(m); err != nil && !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
			return fmt.Errorf("%s item %d of %d at %s: %w", what, i+1, len(items), s.where, err)
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flushTimeout)
		defer cancel()
	}
	if err := s.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("%s %d items at %s: %w", what, len(items), s.where, err)
	}
	return nil
}

// Pending is the number of the stream's messages the consumer has not
// handed out yet; items handed out and not acked are not counted.
func (s *Source) Pending(ctx context.Context) (int64, error) {
	info, err := s.cons.Info(ctx)
	if err != nil {
		return -1, fmt.Errorf("pending at %s: %w", s.where, err)
	}
	return int64(info.NumPending), nil
}

// Close closes the connection after sending what is buffered. Items
// neither acked nor released come back after the consumer's AckWait. It
// may be called more than once.
func (s *Source) Close() error {
	s.nc.Close()
	return nil
}

// live returns an error when the connection is gone.
func (s *Source) live() error {
	if s.nc.IsClosed() {
		err := s.nc.LastError()
		if err == nil {
			err = nats.ErrConnectionClosed
		}
		return fmt.Errorf("connection lost: %w", err)
	}
	return nil
}
