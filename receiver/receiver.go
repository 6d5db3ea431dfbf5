// Package receiver runs receive locations (docs/design.md §13): it reads items from
// a broker queue, a JetStream consumer or a pick-up directory, stores each
// batch in one durable commit, and only then acknowledges the items at their
// source. An item that cannot be used is stored as a suspended message with
// its reason, or, with on_error: stop, left at the source while the receiver
// stops; it is never dropped and never handed out again and again. An item
// over courier.InlineMax is streamed into the store's blob area as it is
// taken in, never held whole in memory when its source can stream it.
package receiver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// OpenFunc connects to a receive location's source.
type OpenFunc func(ctx context.Context, r *courier.Receiver) (courier.Source, error)

// Options configure a Service. Store, TopologyFunc and OpenFunc are required.
type Options struct {
	Store courier.Store
	// TopologyFunc returns the routes and policies in force: an item is
	// checked against them when it arrives.
	TopologyFunc func() *courier.Topology
	Receivers    []*courier.Receiver
	OpenFunc     OpenFunc
	// MaxPayload is max_payload: a larger item is stored whole as an
	// invalid message, up to courier.MaxPayloadCeiling; the receiver stops
	// at an item larger than that, which no message can hold.
	MaxPayload int64
	// DueFunc is called with the routes of messages due now after they
	// were stored (the engine's Due).
	DueFunc func(routes []string)
	Clock   courier.Clock
	Logger  *slog.Logger
	// RetryInitial and RetryMax bound the wait before a source is opened
	// again after a failure, or a batch is stored again after the store
	// failed (defaults 500ms and 30s); the wait doubles in between.
	RetryInitial, RetryMax time.Duration
	// PendingInterval is how often the items waiting at a source are
	// counted (default 5s).
	PendingInterval time.Duration
	// EventFunc, if set, is told of the operational event of a receive
	// location that stopped, by an operator or at an item it cannot take
	// (the engine's Event, which records it and sends its notices).
	EventFunc func(courier.Event)
}

// Service runs every configured receive location, each in a goroutine of
// its own. It implements courier.Receivers.
type Service struct {
	startstop.Base // runs the receive locations between Start and Stop

	opts    Options
	workers []*worker
	byName  map[string]*worker
}

var _ courier.Receivers = (*Service)(nil)

// New returns a service for the receive locations; Start runs them. Each
// runs on a copy of its configuration, a batch of 0 taken as
// courier.DefaultReceiveBatch.
func New(o Options) *Service {
	o.Clock = courier.ClockOrSystem(o.Clock)
	o.Logger = courier.LoggerOrDiscard(o.Logger)
	if o.DueFunc == nil {
		o.DueFunc = func([]string) {}
	}
	if o.EventFunc == nil {
		o.EventFunc = func(courier.Event) {}
	}
	if o.RetryInitial <= 0 {
		o.RetryInitial = 500 * time.Millisecond
	}
	if o.RetryMax <= 0 {
		o.RetryMax = 30 * time.Second
	}
	if o.PendingInterval <= 0 {
		o.PendingInterval = 5 * time.Second
	}
	s := &Service{opts: o, byName: map[string]*worker{}}
	rs := make([]*courier.Receiver, len(o.Receivers))
	for i, r := range o.Receivers {
		c := *r
		if c.Batch <= 0 {
			c.Batch = courier.DefaultReceiveBatch
		}
		rs[i] = &c
	}
	slices.SortFunc(rs, func(a, b *courier.Receiver) int { return strings.Compare(a.Name, b.Name) })
	now := o.Clock.Now()
	for _, r := range rs {
		w := &worker{s: s, r: r, logger: o.Logger.With("receiver", r.Name), poke: make(chan struct{}, 1)}
		w.status = courier.ReceiverStatus{Name: r.Name, Transport: r.Transport, Source: r.SourceName(),
			State: courier.ReceiverConnecting, Since: now, Pending: -1, Batch: r.Batch}
		s.workers = append(s.workers, w)
		s.byName[r.Name] = w
	}
	return s
}

// Start runs the receive locations until Stop. Stop ends every receive
// location: a batch being stored is stored and acknowledged, fetched items
// not yet stored go back to their source.
func (s *Service) Start(ctx context.Context) error {
	run, ok := s.StartInit(ctx)
	if !ok {
		return ctx.Err()
	}
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Go(func() { w.run(run.Ctx) })
	}
	go func() {
		wg.Wait()
		run.Stopped()
	}()
	return nil
}

// Statuses lists the receive locations and what each is doing.
func (s *Service) Statuses() []courier.ReceiverStatus {
	out := make([]courier.ReceiverStatus, len(s.workers))
	for i, w := range s.workers {
		out[i] = w.snapshot()
	}
	return out
}

// Status is what the receive location name is doing; CodeNotFound when
// it is not configured.
func (s *Service) Status(name string) (courier.ReceiverStatus, error) {
	w, err := s.worker(name)
	if err != nil {
		return courier.ReceiverStatus{}, err
	}
	return w.snapshot(), nil
}

// StopReceiver stops a receive location until StartReceiver.
func (s *Service) StopReceiver(name, who string) error {
	w, err := s.worker(name)
	if err != nil {
		return err
	}
	w.stop(fmt.Sprintf("stopped by %s", who), "")
	w.logger.Info("receiver stopped by an operator", "who", who)
	return nil
}

// StartReceiver lets a stopped receive location read again; an item it
// stopped at is taken again, and checked against the routes in force now.
func (s *Service) StartReceiver(name, who string) error {
	w, err := s.worker(name)
	if err != nil {
		return err
	}
	w.mu.Lock()
	was := w.stopped
	w.stopped = false
	if was {
		w.setStateLocked(courier.ReceiverConnecting, s.opts.Clock.Now())
		w.status.StopReason = ""
	}
	w.mu.Unlock()
	w.wake()
	if was {
		w.logger.Info("receiver started by an operator", "who", who)
	}
	return nil
}

func (s *Service) worker(name string) (*worker, error) {
	w := s.byName[name]
	if w == nil {
		return nil, courier.Errorf(courier.CodeNotFound, "receiver %q is not configured", name)
	}
	return w, nil
}

// worker runs one receive location.
type worker struct {
	s      *Service
	r      *courier.Receiver
	logger *slog.Logger
	poke   chan struct{} // a start, or a stop to act on

	mu      sync.Mutex
	stopped bool
	// status.Batch is the items per fetch: r.Batch, or fewer after an
	// error. It is kept nowhere else, so that the status shows the size
	// in use.
	status courier.ReceiverStatus

	src         courier.Source
	pendingAt   time.Time // when the source's backlog was last counted
	sinceFailed int       // batches stored since the last failure
}

func (w *worker) snapshot() courier.ReceiverStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status
}

func (w *worker) batch() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status.Batch
}

func (w *worker) setBatch(n int) {
	w.mu.Lock()
	w.status.Batch = n
	w.mu.Unlock()
}

func (w *worker) wake() {
	select {
	case w.poke <- struct{}{}:
	default:
	}
}

func (w *worker) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// stop marks the receiver stopped; the loop closes its source. A receiver
// that was running makes its receiver.stopped event.
func (w *worker) stop(reason, lastError string) {
	w.mu.Lock()
	was := w.stopped
	w.stopped = true
	now := w.s.opts.Clock.Now()
	w.setStateLocked(courier.ReceiverStopped, now)
	w.status.StopReason = reason
	if lastError != "" {
		w.status.LastError, w.status.LastErrorAt = lastError, now
	}
	w.mu.Unlock()
	w.wake()
	if !was {
		w.s.opts.EventFunc(courier.ReceiverEvent(w.r.Name, reason, now))
	}
}

func (w *worker) setStateLocked(state string, now time.Time) {
	if w.status.State != state {
		w.status.State, w.status.Since = state, now
	}
}

func (w *worker) setState(state string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.setStateLocked(state, w.s.opts.Clock.Now())
	}
}

// failed records an error that the loop will recover from by itself.
func (w *worker) failed(err error) {
	w.mu.Lock()
	w.status.LastError, w.status.LastErrorAt = err.Error(), w.s.opts.Clock.Now()
	w.mu.Unlock()
}

func (w *worker) closeSource() {
	if w.src != nil {
		if err := w.src.Close(); err != nil {
			w.logger.Debug("closing the source", "err", err)
		}
		w.src = nil
	}
}

// sleep waits d, or less when ctx ends or the receiver is poked.
func (w *worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.poke:
	case <-t.C:
	}
}

func (w *worker) run(ctx context.Context) {
	defer w.closeSource()
	o := w.s.opts
	w.setBatch(w.r.Batch)
	retry := o.RetryInitial
	backOff := func(err error, what string) {
		if ctx.Err() != nil {
			return
		}
		w.failed(err)
		w.logger.Warn(what+"; will try again", "err", err, "in", retry)
		w.sleep(ctx, retry)
		retry = min(retry*2, o.RetryMax)
	}
	for ctx.Err() == nil {
		if w.isStopped() {
			w.closeSource()
			w.sleep(ctx, time.Hour)
			continue
		}
		if w.src == nil {
			w.setState(courier.ReceiverConnecting)
			src, err := o.OpenFunc(ctx, w.r)
			if err != nil {
				backOff(err, "could not open the receiver's source")
				continue
			}
			w.src = src
			w.setState(courier.ReceiverRunning)
			w.logger.Info("receiver reading", "source", w.r.SourceName())
		}
		w.countPending(ctx)
		items, err := w.src.Fetch(ctx, w.batch())
		if err != nil {
			w.closeSource()
			backOff(err, "reading from the receiver's source failed")
			continue
		}
		if len(items) == 0 {
			continue
		}
		w.countRedelivered(items)
		if err := w.take(ctx, items); err != nil {
			// The store could not take the batch: it went back to the
			// source. Single items for a while, so that whatever failed
			// holds up no more than itself.
			w.setBatch(1)
			w.sinceFailed = 0
			backOff(err, "could not store the received items")
			continue
		}
		retry = o.RetryInitial
		w.grow()
	}
}

func (w *worker) countRedelivered(items []*courier.InboundItem) {
	n := 0
	for _, it := range items {
		if it.Redelivered {
			n++
		}
	}
	if n > 0 {
		w.mu.Lock()
		w.status.Redelivered += int64(n)
		w.mu.Unlock()
	}
}

// grow brings the batch back to its configured size after a failure,
// doubling after every few batches stored.
func (w *worker) grow() {
	batch := w.batch()
	if batch >= w.r.Batch {
		return
	}
	w.sinceFailed++
	if w.sinceFailed >= 4 {
		w.setBatch(min(batch*2, w.r.Batch))
		w.sinceFailed = 0
	}
}

func (w *worker) countPending(ctx context.Context) {
	now := w.s.opts.Clock.Now()
	if now.Sub(w.pendingAt) < w.s.opts.PendingInterval {
		return
	}
	w.pendingAt = now
	n, err := w.src.Pending(ctx)
	if err != nil {
		n = -1
	}
	w.mu.Lock()
	w.status.Pending = n
	w.mu.Unlock()
}

// maxHeldBlobs is the most blobs one commit of a receive location takes in.
// A blob is held from when it is written until its message is stored (on
// PostgreSQL with a connection of the store's pool), so a batch of large
// items is stored one blob at a time: it never holds more than that, however
// large the batch, and large items never gather in memory.
const maxHeldBlobs = 1

// spoolBuffer is how much of an item read by Open is moved at a time.
const spoolBuffer = 256 << 10

// take stores a batch of items durably and then acknowledges them, in
// commits of at most maxHeldBlobs blobs each. With on_error: stop, the items
// from the first unusable one on go back to the source and the receiver
// stops. An error means nothing from the commit that failed on is
// acknowledged (what was stored is found again when the items come back).
func (w *worker) take(ctx context.Context, items []*courier.InboundItem) error {
	for len(items) > 0 {
		rest, err := w.takeSome(ctx, items)
		var changed changedItem
		if errors.As(err, &changed) {
			// Handed back alone, to be taken once it settles: the others
			// go on without it.
			w.logger.Info("an item changed while it was read; it is taken again once it settles", "item", describe(changed.it, w.r))
			items = slices.DeleteFunc(items, func(it *courier.InboundItem) bool { return it == changed.it })
			continue
		}
		if err != nil {
			return err
		}
		items = rest
	}
	return nil
}

// changedItem is takeSome's error for an item that changed while it was
// read (courier.ErrItemChanged): it was handed back to its source alone,
// and nothing of the commit was stored.
type changedItem struct{ it *courier.InboundItem }

func (c changedItem) Error() string { return "an item changed while it was read" }

// held is the spool of an item whose content went to a blob, with the
// item's first message, until the message is stored or not.
type held struct {
	sp *courier.Spool
	m  *courier.Message
}

// takeSome stores and acknowledges the items from the start of items up to
// the one that makes maxHeldBlobs blobs, and returns the items it left for
// the next commit. When the receiver stops at an item, or the commit fails,
// every item not acknowledged goes back to the source and none are left.
func (w *worker) takeSome(ctx context.Context, items []*courier.InboundItem) (rest []*courier.InboundItem, err error) {
	o := w.s.opts
	now := o.Clock.Now()
	t := o.TopologyFunc()
	msgs := make([]*courier.Message, 0, len(items))
	var spools []held
	defer func() {
		for _, h := range spools {
			if cerr := h.sp.Close(); cerr != nil {
				w.logger.Warn("could not let go of a received item's blob; the sweep removes it if no message refers to it", "err", cerr)
			}
		}
	}()
	// abortAll removes the blobs of items none of whose messages went to
	// the store.
	abortAll := func() {
		for _, h := range spools {
			w.abort(h.sp)
		}
	}
	// The batch's own context: a batch under way when the service stops is
	// stored, acknowledged and handed back rather than left half done.
	storeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	end, stopAt, stopErr, forced := len(items), -1, error(nil), false
	for i, it := range items {
		ms, sp, problem, err := w.admit(ctx, it, t, now)
		if err != nil && errors.Is(err, courier.ErrItemChanged) {
			abortAll()
			if rerr := w.src.Release(storeCtx, []*courier.InboundItem{it}); rerr != nil {
				w.closeSource()
				return nil, err
			}
			return nil, changedItem{it}
		}
		if err != nil {
			abortAll()
			if rerr := w.src.Release(storeCtx, items); rerr != nil {
				w.closeSource()
			}
			return nil, err
		}
		forced = errors.As(problem, new(cannotKeep))
		if problem != nil && (w.r.OnError == courier.OnErrorStop || forced) {
			if sp != nil {
				w.abort(sp)
				sp.Close()
			}
			stopAt, stopErr = i, problem
			break
		}
		msgs = append(msgs, ms...)
		if sp != nil {
			spools = append(spools, held{sp, ms[0]})
			if blobs := countBlobs(spools); blobs >= maxHeldBlobs && i+1 < len(items) {
				end = i + 1
				break
			}
		}
	}
	// take is what this commit stores; back is what goes back to the source
	// if it fails: the rest of the batch too, unless it went back already.
	take, back, released := items[:end], items, true
	if stopAt >= 0 {
		take, back = items[:stopAt], items[:stopAt]
		if err := w.src.Release(storeCtx, items[stopAt:]); err != nil {
			// Closing the source hands them back too, but only after what
			// is stored is acknowledged.
			w.logger.Warn("could not hand items back to the source; they return when it is closed", "err", err)
			released = false
		}
	}
	created, invalid, due, kept, err := w.store(storeCtx, msgs, now)
	if err != nil {
		// Not aborted, and held on: the store may still commit the
		// messages. A blob no message refers to is removed by the sweep.
		for _, h := range spools {
			h.sp.CloseLater()
		}
		spools = nil
		if rerr := w.src.Release(storeCtx, back); rerr != nil || !released {
			w.closeSource()
		}
		return nil, err
	}
	for _, h := range spools {
		if h.m.Blob != "" && !kept[h.m.Blob] {
			// Its message was stored before (a redelivery): the new copy
			// of its content goes.
			w.abort(h.sp)
		}
	}
	ackFailed := false
	if len(take) > 0 {
		if err := w.src.Ack(storeCtx, take); err != nil {
			// Stored: when they come back, their ids make the second
			// store a no-op. Closing the source hands back the rest of
			// the batch too.
			w.logger.Warn("could not acknowledge stored items; the source will hand them out again", "err", err)
			w.closeSource()
			ackFailed = true
		}
	}
	if len(due) > 0 {
		o.DueFunc(due)
	}
	w.mu.Lock()
	w.status.Received += int64(created)
	w.status.Invalid += int64(invalid)
	w.mu.Unlock()
	if stopAt >= 0 {
		it := items[stopAt]
		// In the words the API answers the same message with.
		problem := courier.ErrorMessage(stopErr)
		reason := fmt.Sprintf("on_error: stop: item %s cannot be taken: %s", describe(it, w.r), problem)
		if forced {
			reason = fmt.Sprintf("item %s cannot be kept, so it stays at the source: %s", describe(it, w.r), problem)
		}
		w.stop(reason, problem)
		w.closeSource()
		w.logger.Warn("receiver stopped at an item it cannot take; start it again once that is fixed", "item", describe(it, w.r), "err", stopErr)
		return nil, nil
	}
	if ackFailed {
		return nil, nil
	}
	return items[end:], nil
}

// countBlobs counts the spools that hold a blob.
func countBlobs(spools []held) int {
	n := 0
	for _, h := range spools {
		if h.m.Blob != "" {
			n++
		}
	}
	return n
}

func (w *worker) abort(sp *courier.Spool) {
	if err := sp.Abort(); err != nil {
		w.logger.Warn("could not remove the blob of a received item that was not stored; the sweep removes it", "err", err)
	}
}

// cannotKeep is the refusal of an item that no message can hold: larger
// than courier keeps at all (courier.MaxPayloadCeiling), or than a store
// without a blob area keeps. Whatever on_error says, the item stays at its
// source and the receiver stops: storing it as a suspended message would
// mean storing it without its content or cut short, losing it without a
// word, and leaving it at its source while going on would take it up again
// and again. Stopped, the receiver says which item and why, and an operator
// takes it away (a file into another folder) and starts the receiver.
type cannotKeep struct{ error }

func (c cannotKeep) Unwrap() error { return c.error }

// admit takes an item in and turns it into messages to store. An item read
// by Open, or whose body is over courier.InlineMax, is first taken into a
// Spool of the store's blob area, at most courier.MaxPayloadCeiling bytes,
// so that it is streamed rather than held: the returned spool holds its
// blob until the messages are stored. An item between max_payload and that
// ceiling is kept whole as a suspended message, as a smaller one over
// max_payload is; a larger one is refused as cannotKeep. err is a failure
// to read the item or to write its blob: nothing of it is stored.
func (w *worker) admit(ctx context.Context, it *courier.InboundItem, t *courier.Topology, now time.Time) (msgs []*courier.Message, sp *courier.Spool, problem, err error) {
	o := w.s.opts
	blobs := o.Store.Blobs()
	if it.Open == nil && (len(it.Body) <= courier.InlineMax || blobs == nil) {
		msgs, problem = w.r.Admit(it, t, o.MaxPayload, now)
		return msgs, nil, problem, nil
	}
	size := it.ContentSize()
	tooLarge := func() error {
		if blobs == nil {
			return cannotKeep{courier.Errorf(courier.CodePayloadTooLarge,
				"the item of %d bytes is over the %d bytes this store keeps of a payload", size, courier.InlineMax)}
		}
		return cannotKeep{courier.Errorf(courier.CodePayloadTooLarge,
			"the item of %d bytes is over the %d bytes courier keeps of a payload", size, int64(courier.MaxPayloadCeiling))}
	}
	if size > courier.MaxPayloadCeiling || (blobs == nil && size > courier.InlineMax) {
		return nil, nil, tooLarge(), nil
	}
	sp, err = w.spool(ctx, it, blobs)
	if errors.Is(err, courier.ErrPayloadTooLarge) {
		// It grew past the ceiling as it was read.
		return nil, nil, tooLarge(), nil
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("receiver %s: take in item %s: %w", w.r.Name, describe(it, w.r), err)
	}
	msgs, problem, err = w.r.AdmitSpooled(it, sp, t, o.MaxPayload, now)
	if err != nil {
		w.abort(sp)
		sp.Close()
		return nil, nil, nil, err
	}
	return msgs, sp, problem, nil
}

// spool writes an item's content into a new Spool of blobs.
func (w *worker) spool(ctx context.Context, it *courier.InboundItem, blobs courier.Blobs) (*courier.Spool, error) {
	sp := courier.NewItemSpool(ctx, blobs, courier.MaxPayloadCeiling, it)
	err := func() error {
		if it.Open == nil {
			_, err := sp.Write(it.Body)
			return err
		}
		r, err := it.Open()
		if err != nil {
			return err
		}
		defer r.Close()
		// Only the Spool's own limit stops the copy: a reader that gives
		// more than the item's Size fails by itself.
		_, err = io.CopyBuffer(sp, r, make([]byte, spoolBuffer))
		return err
	}()
	if err != nil {
		w.abort(sp)
		sp.Close()
		return nil, err
	}
	return sp, nil
}

// store ingests the messages in one durable commit, and keeps an item whose
// id is taken by other content as an invalid message of its own. created
// counts the messages stored now, invalid those of them suspended.
func (w *worker) store(ctx context.Context, msgs []*courier.Message, now time.Time) (created, invalid int, due []string, kept map[string]bool, err error) {
	if len(msgs) == 0 {
		return 0, 0, nil, nil, nil
	}
	results, err := w.s.opts.Store.Ingest(ctx, msgs)
	if err != nil {
		return 0, 0, nil, nil, fmt.Errorf("store %d items: %w", len(msgs), err)
	}
	kept = map[string]bool{}
	var again []*courier.Message
	count := func(m *courier.Message, first bool) {
		if m.Blob != "" {
			kept[m.Blob] = true
		}
		if first {
			created++
		}
		if m.State == courier.StateSuspended {
			invalid++
			w.logger.Info("received item stored as suspended", "id", m.ID, "reason", m.Reason, "err", m.LastError)
		} else if !m.NextAttemptAt.After(now) && !slices.Contains(due, m.Route) {
			due = append(due, m.Route)
		}
	}
	for i, res := range results {
		m := msgs[i]
		first := i == 0 || msgs[i-1].ID != m.ID
		switch {
		case res.Status == courier.IngestCreated:
			count(m, first)
		case !first:
			// Another delivery of a published message whose id is
			// taken: the first stands for them all.
		case res.Status == courier.IngestConflict:
			c := *m
			c.ID = courier.ConflictID(m.ID, m.Hash)
			courier.Unusable(&c, courier.ReasonInvalid,
				fmt.Sprintf("receiver %s: id %s is taken by a message of other content", w.r.Name, m.ID), now)
			again = append(again, &c)
		}
	}
	if len(again) == 0 {
		return created, invalid, due, kept, nil
	}
	results, err = w.s.opts.Store.Ingest(ctx, again)
	if err != nil {
		return 0, 0, nil, nil, fmt.Errorf("store %d items with taken ids: %w", len(again), err)
	}
	for i, res := range results {
		if res.Status == courier.IngestCreated {
			count(again[i], true)
		}
	}
	return created, invalid, due, kept, nil
}

// describe names an item for people: its id header or file name.
func describe(it *courier.InboundItem, r *courier.Receiver) string {
	if it.Name != "" {
		return it.Name
	}
	if r.IDHeader != "" {
		if v, ok, err := it.Header(r.IDHeader); ok && err == nil && v != "" {
			return v
		}
	}
	return fmt.Sprintf("of %d bytes", it.ContentSize())
}
