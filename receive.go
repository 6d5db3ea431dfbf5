package courier

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// ReceiverTransport says where a receive location reads from.
type ReceiverTransport string

// The receive locations' transports.
const (
	ReceiveAMQP ReceiverTransport = "amqp" // a RabbitMQ queue
	ReceiveNATS ReceiverTransport = "nats" // a JetStream stream through a durable consumer
	ReceiveDir  ReceiverTransport = "dir"  // a pick-up directory
)

// ReceiverTransports lists the receive locations' transports.
var ReceiverTransports = []ReceiverTransport{ReceiveAMQP, ReceiveNATS, ReceiveDir}

// OnError says what a receive location does with an item it cannot use.
type OnError string

// The choices of on_error.
const (
	// OnErrorSuspend stores the item as a suspended message (reason invalid
	// or no_route) and goes on: nothing is dropped, nothing loops.
	OnErrorSuspend OnError = "suspend"
	// OnErrorStop leaves the item at its source and stops the receiver
	// until an operator starts it again: for feeds whose order matters.
	OnErrorStop OnError = "stop"
)

// DefaultSettle is how long a picked-up file must stay unchanged (size and
// modification time) before it counts as complete, when its receive
// location says nothing: longer than the pauses of a writer still busy.
const DefaultSettle = time.Second

// DefaultReceiveBatch is how many items a receive location stores in one
// durable commit when its configuration says nothing.
const DefaultReceiveBatch = 100

// Receiver is a receive location (docs/design.md §13): where items come from and how
// each becomes a message.
type Receiver struct {
	Name      string
	Transport ReceiverTransport
	AMQP      AMQPSource
	NATS      NATSSource
	Dir       DirSource

	// Type and Route are fixed, or read from the headers TypeHeader and
	// RouteHeader of each item. Without either route the items are
	// published to the subscriptions that want their type.
	Type, TypeHeader   string
	Route, RouteHeader string
	// IDHeader names the header that carries the message id; without it (or
	// when an item lacks it) the id is derived from the item's content, so a
	// redelivered item is the same message.
	IDHeader string
	// OrderingKeyHeader names the header that carries the ordering key,
	// RecipientHeader the one that carries the recipient (for lookup
	// routes).
	OrderingKeyHeader string
	RecipientHeader   string
	// Batch is the most items stored in one durable commit.
	Batch   int
	OnError OnError
}

// AMQPSource is a RabbitMQ queue to consume.
type AMQPSource struct {
	URL   string
	Queue string
}

// NATSSource is a JetStream stream read through a durable pull consumer,
// created if it does not exist.
type NATSSource struct {
	URL      string
	Stream   string
	Consumer string
}

// DirSource is a pick-up directory: files matching Pattern are taken once
// they are complete, and moved to the folder processed/ under Path after
// they are stored.
type DirSource struct {
	Path    string
	Pattern string // a glob on the file name; default "*"
	// Settle is how long a file's size and modification time must stay the
	// same before it counts as complete (default 1s).
	Settle time.Duration
	// DoneMarker takes a file only once "<name>.done" exists beside it,
	// for writers that announce a complete file.
	DoneMarker bool
}

// InboundItem is one item read from a receive location.
type InboundItem struct {
	// Body is the item's content when its source holds it in memory (a
	// broker's message, a small file); nil when Open reads it instead.
	Body []byte
	// Open, when set, reads the item's content from its start, for content
	// too large to hold in memory (a large file): the receiver streams it
	// into the store's blob area. Size is then the content's length in
	// bytes, as the source saw it. A reader that finds the content is no
	// longer what was seen fails rather than hand out a changed item.
	Open func() (io.ReadCloser, error)
	Size int64
	// Headers are the item's headers as the source gives them; a value that
	// is not text is kept as Unreadable instead.
	Headers map[string]string
	// Unreadable names headers whose value could not be read as text.
	Unreadable []string
	// ContentType is the item's content type, if its source says.
	ContentType string
	// Name is what the source calls the item (a file name); it is part of a
	// derived id, so two files of one content are two messages. Brokers
	// leave it empty: a redelivery must get the same id.
	Name string
	// Redelivered is set when the source has handed out the item before.
	Redelivered bool
	// Handle is the source's own reference, for Ack and Release.
	Handle any

	// idSum is the hash of an id derived for an item whose content went
	// to a blob through NewItemSpool.
	idSum []byte
}

// ErrItemChanged is what a source's reader of an item (InboundItem.Open)
// fails with when the item changed while it was read, a file still being
// written: the item is handed back to be taken once it settles, and the
// others go on.
var ErrItemChanged = errors.New("changed while read")

// Source is a receive location's connection to where its items wait. A
// source is used by one goroutine at a time.
type Source interface {
	// Fetch returns up to max items. It waits a little (about a second)
	// for the first and returns none, without error, when none came.
	Fetch(ctx context.Context, max int) ([]*InboundItem, error)
	// Ack tells the source that the items are stored: it forgets them.
	Ack(ctx context.Context, items []*InboundItem) error
	// Release hands items back unacknowledged, to be fetched again.
	Release(ctx context.Context, items []*InboundItem) error
	// Pending counts the items waiting at the source (the receiver's lag),
	// or -1 when the source cannot tell.
	Pending(ctx context.Context) (int64, error)
	Close() error
}

// Header returns the value of an item's header, its name matched without
// regard to case; ok is false when the item has no such header, and err
// says why a header it has cannot be used.
func (it *InboundItem) Header(name string) (v string, ok bool, err error) {
	for _, u := range it.Unreadable {
		if strings.EqualFold(u, name) {
			return "", true, fmt.Errorf("header %s is not text", name)
		}
	}
	if v, ok := it.Headers[name]; ok {
		return v, true, nil
	}
	for k, v := range it.Headers {
		if strings.EqualFold(k, name) {
			return v, true, nil
		}
	}
	return "", false, nil
}

// Admit turns an inbound item into what Store.Ingest takes: a usable item
// becomes a queued message, or the deliveries of a published one (when
// the receiver gives it no route), taken in by Topology.Admit as a message
// sent through the API is. An item that cannot be delivered as it is
// becomes a suspended message with reason invalid (or no_route when it
// names a route that is not configured, or is published and no
// subscription wants it) and says why in LastError, with the
// message the API would answer; problem is then that refusal, so that a
// receiver with on_error: stop can refuse the item instead. Nothing about
// the item is dropped: its body is kept whole, also when it is over
// maxPayload. Admit takes the item's Body as the payload; an item read by
// Open, or one whose body is a blob's worth, goes through AdmitSpooled.
func (r *Receiver) Admit(it *InboundItem, t *Topology, maxPayload int64, now time.Time) (msgs []*Message, problem error) {
	m := &Message{Payload: it.Body, ContentType: it.ContentType, Type: r.Type, Route: r.Route}
	return r.admit(it, m, t, maxPayload, now)
}

// AdmitSpooled is Admit for an item whose whole content (its Body, or what
// Open read) was written into sp: sp.Finish puts it on the message, as a
// blob when it is over InlineMax, and an id derived for the item comes from
// the blob's digest, so that the content is never needed in memory. A blob
// over maxPayload is kept as a suspended message as a body in memory is.
// err is a failure to commit the blob; the caller then stores nothing of
// the item and aborts sp.
func (r *Receiver) AdmitSpooled(it *InboundItem, sp *Spool, t *Topology, maxPayload int64, now time.Time) (msgs []*Message, problem, err error) {
	m := &Message{ContentType: it.ContentType, Type: r.Type, Route: r.Route}
	if err := sp.Finish(m); err != nil {
		return nil, nil, fmt.Errorf("receiver %s: keep the content of an item of %d bytes: %w", r.Name, sp.Size(), err)
	}
	if sp.idHash != nil && m.Blob != "" {
		it.idSum = sp.idHash.Sum(nil)
	}
	msgs, problem = r.admit(it, m, t, maxPayload, now)
	return msgs, problem, nil
}

// NewItemSpool is NewSpool for the content of it: besides, it takes the
// hash an id derived for it is made of, as it streams, so that the id of
// a large item is the one it had when items were read whole.
func NewItemSpool(ctx context.Context, blobs Blobs, limit int64, it *InboundItem) *Spool {
	sp := NewSpool(ctx, blobs, limit)
	sp.idHash = sha256.New()
	sp.idHash.Write([]byte(it.Name))
	sp.idHash.Write([]byte{0})
	return sp
}

// admit is Admit of an item whose payload is on m already.
func (r *Receiver) admit(it *InboundItem, m *Message, t *Topology, maxPayload int64, now time.Time) (msgs []*Message, problem error) {
	fail := func(format string, args ...any) {
		if problem == nil {
			problem = Errorf(CodeInvalidArgument, format, args...)
		}
	}
	// read takes a field from a header; what names a field the message
	// needs, which the header must then give unless the receiver fixes it.
	read := func(header string, dst *string, what string) {
		if header == "" {
			return
		}
		v, ok, err := it.Header(header)
		switch {
		case err != nil:
			fail("%s", err)
		case !ok && *dst == "" && what != "":
			fail("no %s: the item has no header %s", what, header)
		case ok:
			*dst = v
		}
	}
	read(r.TypeHeader, &m.Type, "type")
	read(r.RouteHeader, &m.Route, "route")
	read(r.OrderingKeyHeader, &m.OrderingKey, "")
	read(r.RecipientHeader, &m.Recipient, "")
	read(r.IDHeader, &m.ID, "")
	if problem == nil {
		derived := func() (string, error) { return r.derivedID(it, m), nil }
		if msgs, problem = t.Admit(m, Intake{MaxPayload: maxPayload, NewIDFunc: derived}, now); problem == nil {
			return msgs, nil
		}
	}
	// Kept under an id and a content type that can be stored and sent; the
	// refusal names what came.
	if !ValidID(m.ID) {
		m.ID = r.derivedID(it, m)
	}
	if !validContentType(m.ContentType) {
		m.ContentType = "application/octet-stream"
	}
	Unusable(m, refusalReason(problem), fmt.Sprintf("receiver %s: %s", r.Name, ErrorMessage(problem)), now)
	return []*Message{m}, problem
}

// Unusable makes m a suspended message with the reason and error, for an
// item taken in that cannot be delivered as it is. It leaves its ordering
// key's order at once: it must not hold up the key's other messages.
func Unusable(m *Message, reason Reason, lastError string, now time.Time) {
	now = now.Truncate(time.Microsecond)
	m.Hash = ContentHash(m)
	if m.Digest == "" {
		m.Size = len(m.Payload)
	}
	m.State, m.Reason, m.LastError = StateSuspended, reason, lastError
	m.OrderSkipped = m.OrderingKey != ""
	m.NextAttemptAt, m.TimerAt = time.Time{}, time.Time{}
	m.CreatedAt, m.UpdatedAt, m.RoundStartedAt, m.FinishedAt = now, now, now, now
}

// derivedID is the id of an item without one of its own: the receiver's
// name and a digest of the item's name and payload, the same at every
// redelivery. A payload in m.Payload is hashed whole, as ever; a blob is
// hashed by its Digest (after a separator of its own, so that no payload in
// memory gives the same digest), so that its content is not read again. A
// payload is a blob exactly when it is over InlineMax, so an item gets the
// same id however its source handed it over.
func (r *Receiver) derivedID(it *InboundItem, m *Message) string {
	var sum []byte
	switch {
	case m.Blob == "":
		h := sha256.New()
		h.Write([]byte(it.Name))
		h.Write([]byte{0})
		h.Write(m.Payload)
		sum = h.Sum(nil)
	case it.idSum != nil:
		sum = it.idSum // the same, taken as the content streamed
	default:
		// A blob spooled without NewItemSpool: from its digest, after a
		// separator of its own, so that no payload in the row gives it.
		h := sha256.New()
		h.Write([]byte(it.Name))
		h.Write([]byte{1})
		h.Write([]byte(m.Digest))
		sum = h.Sum(nil)
	}
	id := r.Name + "-" + hex.EncodeToString(sum)[:32]
	if len(id) > MaxIDLen {
		id = id[len(id)-MaxIDLen:]
	}
	return id
}

// ContentSize is the length of the item's content: Size when Open reads
// it, else the length of Body.
func (it *InboundItem) ContentSize() int64 {
	if it.Open != nil {
		return it.Size
	}
	return int64(len(it.Body))
}

// ConflictID is the id under which an item is kept whose id was already
// taken by a message of other content: the id and the start of the item's
// ContentHash (hex), so that a redelivery finds it again.
func ConflictID(id, hash string) string {
	suffix := ".conflict-" + hash[:17]
	if len(id)+len(suffix) > MaxIDLen {
		id = id[:MaxIDLen-len(suffix)]
	}
	return id + suffix
}

// The states of a receive location.
const (
	ReceiverRunning    = "running"    // reading from its source
	ReceiverConnecting = "connecting" // (re)connecting to its source, or waiting to try again
	ReceiverStopped    = "stopped"    // stopped by an operator or by on_error: stop
)

// ReceiverStatus is what a receive location is doing, on this node.
type ReceiverStatus struct {
	Name      string            `json:"name"`
	Transport ReceiverTransport `json:"transport"`
	Source    string            `json:"source"` // the queue, stream or directory, credentials hidden
	State     string            `json:"state"`
	Since     time.Time         `json:"since"`
	// StopReason says why a stopped receiver stopped: who stopped it, or the
	// item it could not take.
	StopReason  string    `json:"stop_reason,omitempty"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	Received    int64     `json:"received"` // messages stored from it (repeats not counted)
	Invalid     int64     `json:"invalid"`  // of those, items stored as suspended (invalid, no_route)
	// Redelivered counts items the source handed out again (after a
	// release, a lost acknowledgement or a restart): it stays near zero
	// unless something keeps failing.
	Redelivered int64 `json:"redelivered"`
	// Pending is the items waiting at the source, as last counted; -1 when
	// the source cannot tell.
	Pending int64 `json:"pending"`
	Batch   int   `json:"batch"` // the batch size in use now
}

// Receivers is control of the receive locations running on this node.
type Receivers interface {
	// Statuses lists the receive locations, by name.
	Statuses() []ReceiverStatus
	// Status is what one receive location is doing. CodeNotFound for an
	// unknown name.
	Status(name string) (ReceiverStatus, error)
	// StopReceiver stops one until StartReceiver; items fetched and not yet
	// stored go back to their source. CodeNotFound for an unknown name.
	StopReceiver(name, who string) error
	// StartReceiver starts a stopped receiver again.
	StartReceiver(name, who string) error
}

// SourceName says where a receive location reads from, fit to show: the
// queue, stream or directory, with credentials left out of URLs.
func (r *Receiver) SourceName() string {
	switch r.Transport {
	case ReceiveAMQP:
		return "queue " + r.AMQP.Queue + " at " + RedactURL(r.AMQP.URL)
	case ReceiveNATS:
		return "stream " + r.NATS.Stream + " (consumer " + r.NATS.Consumer + ") at " + RedactURL(r.NATS.URL)
	case ReceiveDir:
		return "directory " + r.Dir.Path + " (" + r.Dir.Pattern + ")"
	}
	return ""
}
