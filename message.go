package courier

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// State is where a message stands in its life (docs/design.md §2).
type State string

// The message states.
const (
	StateQueued    State = "queued"    // waiting until NextAttemptAt
	StateInflight  State = "inflight"  // leased by a worker until LeaseUntil
	StateDelivered State = "delivered" // terminal
	StateSuspended State = "suspended" // waits for an operator
	StateDiscarded State = "discarded" // terminal
)

// States lists every state, in the order of a message's life.
var States = []State{StateQueued, StateInflight, StateDelivered, StateSuspended, StateDiscarded}

// Valid reports whether s is one of the defined states.
func (s State) Valid() bool { return slices.Contains(States, s) }

// OneOf names words for a message that offers them, "a, b or c": with
// States or Reasons, every place that lists them lists the same.
func OneOf[T ~string](words []T) string {
	s := make([]string, len(words))
	for i, w := range words {
		s[i] = string(w)
	}
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// Terminal reports whether a message in state s is finished for good and
// may be purged after the retention period.
func (s State) Terminal() bool { return s == StateDelivered || s == StateDiscarded }

// Reason says why a message is suspended.
type Reason string

// The suspension reasons.
const (
	ReasonExhausted          Reason = "exhausted"           // the policy ran out
	ReasonRejected           Reason = "rejected"            // the receiver refused it for good
	ReasonExpired            Reason = "expired"             // past expires_at or the policy's max_age
	ReasonNoRoute            Reason = "no_route"            // its route was removed
	ReasonPoison             Reason = "poison"              // it crashes or hangs the worker repeatedly
	ReasonInvalid            Reason = "invalid"             // taken in by a receive location but unusable
	ReasonCompensated        Reason = "compensated"         // a workflow step failed; earlier steps undone
	ReasonCompensationFailed Reason = "compensation_failed" // a workflow step failed; an undo ran out
)

// Reasons lists every suspension reason.
var Reasons = []Reason{ReasonExhausted, ReasonRejected, ReasonExpired, ReasonNoRoute,
	ReasonPoison, ReasonInvalid, ReasonCompensated, ReasonCompensationFailed}

// Valid reports whether r is one of the defined reasons.
func (r Reason) Valid() bool { return slices.Contains(Reasons, r) }

// Message is one unit of work. The first group of fields is what the sender
// gave; the rest is kept by the store as the message moves through its states.
type Message struct {
	ID    string
	Type  string
	Route string
	// Subscription names the subscription whose delivery of a published
	// message this is (docs/design.md §14): a published message is stored as one
	// delivery per subscription that wants it, each with its own state,
	// attempts and ordering, and its payload kept once. Empty for a
	// message sent to a route by name.
	Subscription string
	Payload      []byte // may be nil where a store lists messages without their payloads, and for a Blob
	Size         int    // the payload's length
	// Blob is where a payload larger than InlineMax is kept in the store's
	// Blobs, Payload being nil; empty for a payload kept inline.
	Blob string
	// Digest is the hex SHA-256 of a Blob's payload, taken as it streamed
	// in; empty for a payload kept inline.
	Digest       string
	ContentType  string
	Headers      map[string]string
	OrderingKey  string
	Priority     int       // 0 to MaxPriority; higher is claimed first
	DeliverAfter time.Time // zero: at once
	ExpiresAt    time.Time // zero: never (the policy's max_age still applies)
	// Sender names the API key that ingested the message; empty when the
	// API runs without keys or the message came in another way. It is not
	// part of the content (Hash): it decides who may read the message and
	// whose suspended-message cap it counts against.
	Sender string

	// Hash identifies the sender's content for idempotent ingest; see ContentHash.
	Hash string

	State          State
	Reason         Reason
	Attempts       int // attempts in the current round (reset by resubmit and fallback)
	TotalAttempts  int // every attempt the message ever had; numbers them and tokens leases
	Abandoned      int // attempts in a row whose worker vanished (lease lapsed)
	ResubmitCount  int
	RoundStartedAt time.Time // when the current round began: ingest, resubmit or fallback
	Escalated      int       // escalations of the policy already sent in this round
	FallbackFrom   string    // the route the message fell back from; empty while on its first
	// Recipient is who the message is for, on a route that looks up the
	// recipient's endpoint in a registry (e.g. "0088:5798000000001").
	Recipient string
	// Workflow is the workflow route of a message that goes through the
	// steps of one (its Route is then the implicit route of the current
	// step or compensation); empty for other messages.
	Workflow string
	// Step is the workflow step being delivered, or, while FailedStep is
	// set, being undone.
	Step int
	// FailedStep is the step that failed for good; 0 while none has.
	FailedStep int
	// StepResponses are the responses of the steps done, by step.
	StepResponses map[int]string
	// OrderSkipped marks a message with an OrderingKey that left its key's
	// order on its route: it was suspended on a route whose
	// ordered_on_failure is skip (the messages behind it went on), or it
	// expired while it waited for its key. It neither waits for nor blocks
	// its key any more, so a resubmit to the same route delivers it on its
	// own, out of order, and says so. A message that moves to another route
	// (resubmitted there, or fallen back) joins its key's order on that
	// route and is not marked.
	OrderSkipped bool
	// Sequence numbers the messages of one ordering key on one route, 1, 2,
	// 3 … in ingest order, so that a receiver can check their order itself
	// (Courier-Sequence). The store gives it at ingest to a message that
	// joins its key's order then (JoinsKey); 0 for any other. A message
	// keeps it for life: resubmitted to another route, fallen back or sent
	// again, it still carries its place on the route it was ingested to.
	Sequence int64
	// PreviousID is the id of the message numbered Sequence-1 on that route
	// and key, whether or not it was delivered (Courier-Previous-Id); empty
	// for the first.
	PreviousID string
	// TraceParent is the W3C trace context (traceparent) of the ingest
	// that stored the message, so that its attempts continue the sender's
	// trace; empty when tracing was off. A published message's deliveries
	// share it.
	TraceParent string
	TimerAt     time.Time // the next escalation, fallback or expiry; zero for none
	// NextAttemptAt is when a queued message is due. It is zero while the
	// message waits for an earlier message of its ordering key (Waiting).
	NextAttemptAt time.Time
	LeaseUntil    time.Time // when an inflight lease lapses
	LeaseOwner    string    // who holds the lease
	Endpoint      string    // the endpoint of the latest attempt
	LastError     string
	LastClass     ErrorClass
	CreatedAt     time.Time
	UpdatedAt     time.Time
	FinishedAt    time.Time // when it became delivered, discarded or suspended
	// Erased is the tombstone of a message whose payload was erased on
	// request (Erase): nil for every other.
	Erased *Erasure
}

// Key addresses one delivery in a store: the message's id for a message
// sent to a route by name, and the id, "/" and the subscription for a
// delivery of a published message ('/' is in neither an id nor a name).
// Attempts and operator actions are kept under it.
func (m *Message) Key() string { return DeliveryKey(m.ID, m.Subscription) }

// DeliveryKey is the Key of the delivery of message id to subscription
// (empty: the message sent to a route by name).
func DeliveryKey(id, subscription string) string {
	if subscription == "" {
		return id
	}
	return id + "/" + subscription
}

// ParseKey splits a Key into the message's id and the subscription.
func ParseKey(key string) (id, subscription string) {
	id, subscription, _ = strings.Cut(key, "/")
	return id, subscription
}

// Summary is the state of a published message as a whole, from the states
// of its deliveries: suspended when one is suspended, whatever the others
// do, as that delivery waits for an operator and a summary must not hide
// it behind the others' progress; else queued while one is queued or in
// flight; else delivered (every delivery delivered or discarded).
func Summary(deliveries []*Message) State {
	queued := false
	for _, d := range deliveries {
		switch d.State {
		case StateSuspended:
			return StateSuspended
		case StateQueued, StateInflight:
			queued = true
		}
	}
	if queued {
		return StateQueued
	}
	return StateDelivered
}

// Waiting reports whether m is queued behind another message of its
// ordering key on its route (the one claimable or in flight, or an older
// suspended one): it becomes due, and its round begins, when no message of
// its key is claimable or in flight and none older than it is suspended.
func (m *Message) Waiting() bool {
	return m.State == StateQueued && m.OrderingKey != "" && !m.OrderSkipped && m.NextAttemptAt.IsZero()
}

// HoldsKey reports whether m is a suspended message that the younger
// messages of its ordering key on its route wait for (ordered_on_failure:
// block) until an operator resubmits or discards it. Older ones do not
// wait for it.
func (m *Message) HoldsKey() bool {
	return m.State == StateSuspended && m.OrderingKey != "" && !m.OrderSkipped
}

// ContentHash returns a digest of everything the sender chose about m: two
// ingests with the same id are the same message exactly when their hashes are
// equal. Priority is the one the sender asked for, so callers compute the hash
// before a policy default is applied.
func ContentHash(m *Message) string {
	h := sha256.New()
	field := func(b []byte) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	str := func(s string) { field([]byte(s)) }
	tm := func(t time.Time) {
		if t.IsZero() {
			str("")
			return
		}
		str(t.UTC().Format(time.RFC3339Nano))
	}
	str("courier.v1")
	str(m.Type)
	str(m.Route)
	if m.Digest != "" {
		// A blob is hashed by its digest, taken as it streamed in. Only
		// payloads over InlineMax are blobs, so the same payload is
		// always hashed the same way.
		str("sha256")
		str(m.Digest)
	} else {
		field(m.Payload)
	}
	str(m.ContentType)
	keys := make([]string, 0, len(m.Headers))
	for k := range m.Headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	str(strconv.Itoa(len(keys)))
	for _, k := range keys {
		str(k)
		str(m.Headers[k])
	}
	str(m.OrderingKey)
	str(strconv.Itoa(m.Priority))
	tm(m.DeliverAfter)
	tm(m.ExpiresAt)
	if m.Recipient != "" {
		// Only when set, so that the hashes of messages stored before
		// recipients existed stay what they were.
		str("recipient")
		str(m.Recipient)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Name limits of the API contract.
const (
	MaxTypeLen = 128
	MaxIDLen   = 256
	MaxNameLen = 128
)

// MaxPriority is the highest priority a message may have (the lowest is 0).
const MaxPriority = 9

// ValidType reports whether s may be a message type: letters, digits,
// '.', '_' and '-', 1 to 128 characters.
func ValidType(s string) bool { return validName(s, MaxTypeLen, false) }

// ValidID reports whether s may be a message id: as a type, with ':' allowed
// too, 1 to 256 characters.
func ValidID(s string) bool { return validName(s, MaxIDLen, true) }

// ValidName reports whether s may name a route, endpoint, policy or key: the
// same alphabet as a type.
func ValidName(s string) bool { return validName(s, MaxNameLen, false) }

func validName(s string, max int, colon bool) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '-':
		case c == ':' && colon:
		default:
			return false
		}
	}
	return true
}
