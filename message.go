package courier

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"sort"
	"strconv"
	"time"
)

// State is where a message stands in its life (DESIGN §2).
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
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
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
func (r Reason) Valid() bool {
	for _, v := range Reasons {
		if r == v {
			return true
		}
	}
	return false
}

// Message is one unit of work. The first group of fields is what the sender
// gave; the rest is kept by the store as the message moves through its states.
type Message struct {
	ID           string
	Type         string
	Route        string
	Payload      []byte // may be nil where a store lists messages without their payloads
	Size         int    // the payload's length
	ContentType  string
	Headers      map[string]string
	OrderingKey  string
	Priority     int
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
	TimerAt        time.Time // the next escalation, fallback or expiry; zero for none
	NextAttemptAt  time.Time // when a queued message is due
	LeaseUntil     time.Time // when an inflight lease lapses
	LeaseOwner     string    // who holds the lease
	Endpoint       string    // the endpoint of the latest attempt
	LastError      string
	LastClass      ErrorClass
	CreatedAt      time.Time
	UpdatedAt      time.Time
	FinishedAt     time.Time // when it became delivered, discarded or suspended
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
	field(m.Payload)
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
	return hex.EncodeToString(h.Sum(nil))
}

// Name limits of the API contract.
const (
	MaxTypeLen = 128
	MaxIDLen   = 256
	MaxNameLen = 128
)

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
