package courier

import (
	"errors"
	"fmt"
	"mime"
	"strings"
	"time"
	"unicode/utf8"
)

// The ingest limits when the configuration sets none (max_payload and
// max_batch_bytes): the configuration's defaults and the API's.
const (
	DefaultMaxPayload    = 1 << 20
	DefaultMaxBatchBytes = 32 << 20
)

// Intake is what Admit needs to know of the door a message comes in by.
type Intake struct {
	// MaxPayload is the largest payload taken in, in bytes (max_payload);
	// 0 takes any.
	MaxPayload int64
	// PriorityGiven is set when the sender chose the priority; otherwise
	// the policy of the message's type gives it.
	PriorityGiven bool
	// NewIDFunc names a message that comes without an id: the API gives
	// it a fresh one, a receive location one derived from the item, so
	// that a redelivered item is the same message.
	NewIDFunc func() (string, error)
	// Tenant is the tenant the message is handed in for (empty: the
	// default tenant): the message names the tenant's route and type and
	// has an id of its own, and Admit qualifies them (docs/design.md §20).
	Tenant string
}

// Admit is the one way in for a message handed over by a sender, through
// the API or a receive location, so that the same message gets the same
// verdict at either door. It checks the payload's size, the content type
// (an empty one becomes application/octet-stream), the expiry and what the
// topology requires (names, an existing route, a priority of 0 to 9, header
// names); names a message that has no id; and makes it ready for
// Store.Ingest: Accept with its type's policy, and on the first step of a
// workflow route. It returns what to ingest: the message itself, or, for a
// message without a route, its deliveries (Publish). A refusal is an
// *Error that names the field, with CodePayloadTooLarge for a payload over
// the limit and CodeInvalidArgument for anything else; the message is then
// left as it was given, but for an empty content type.
func (t *Topology) Admit(m *Message, in Intake, now time.Time) ([]*Message, error) {
	if m.ContentType == "" {
		m.ContentType = "application/octet-stream"
	}
	switch {
	case in.MaxPayload > 0 && int64(m.PayloadSize()) > in.MaxPayload:
		return nil, Errorf(CodePayloadTooLarge, "the payload of %d bytes is over max_payload: the limit is %d bytes", m.PayloadSize(), in.MaxPayload)
	case !validContentType(m.ContentType):
		return nil, Errorf(CodeInvalidArgument, "content_type %q is not a valid media type", clip(m.ContentType))
	case !m.ExpiresAt.IsZero() && !m.ExpiresAt.After(now):
		return nil, Errorf(CodeInvalidArgument, "expires_at %s is in the past", m.ExpiresAt.Format(time.RFC3339))
	}
	if err := t.Validate(m, in.Tenant); err != nil {
		return nil, err
	}
	m.Type, m.Route = Qualify(in.Tenant, m.Type), qualifyRoute(in.Tenant, m.Route)
	var subs []*Subscription
	if m.Route == "" {
		var err error
		if subs, err = t.subscribers(m); err != nil {
			return nil, err
		}
	}
	if m.ID == "" {
		id, err := in.NewIDFunc()
		if err != nil {
			return nil, fmt.Errorf("new message id: %w", err)
		}
		m.ID = id
	}
	m.ID = QualifyID(in.Tenant, m.ID)
	Accept(m, t.Policy(m.Type), in.PriorityGiven, now)
	if subs == nil {
		t.StartWorkflow(m)
		return []*Message{m}, nil
	}
	return t.deliveries(m, subs), nil
}

// subscribers returns the subscriptions that want a published message, or
// the refusal of one that none wants (kept by a receive location with
// reason no_route, as a message to a route that does not exist is: it can
// be delivered once a subscription wants it).
func (t *Topology) subscribers(m *Message) ([]*Subscription, error) {
	subs := t.Subscribers(m.Type, m.Headers)
	if len(subs) == 0 {
		return nil, unknownRouteError{Errorf(CodeInvalidArgument,
			"no subscription wants messages of type %q: name a route, or subscribe to the type", m.Type)}
	}
	for _, s := range subs {
		if r := t.Routes[s.Route]; r == nil {
			return nil, unknownRouteError{Errorf(CodeInvalidArgument, "subscription %q delivers to route %q, which is not configured", s.Name, s.Route)}
		} else if r.Lookup != nil && m.Recipient == "" {
			return nil, Errorf(CodeInvalidArgument, "subscription %q delivers to route %q, which looks up each message's endpoint by its recipient: recipient is required", s.Name, s.Route)
		}
	}
	return subs, nil
}

// deliveries makes an accepted published message into one delivery for
// each subscription, in the order given: copies that share its payload
// and headers, each on the subscription's route (on the first step of a
// workflow route).
func (t *Topology) deliveries(m *Message, subs []*Subscription) []*Message {
	out := make([]*Message, len(subs))
	for i, s := range subs {
		d := *m
		d.Route, d.Subscription = s.Route, s.Name
		t.StartWorkflow(&d)
		out[i] = &d
	}
	return out
}

// unknownRouteError is the refusal of a message whose route is not
// configured. A receive location keeps such an item with reason no_route
// rather than invalid: it can be delivered as it is once the route exists.
type unknownRouteError struct{ err *Error }

func (e unknownRouteError) Error() string { return e.err.Error() }
func (e unknownRouteError) Unwrap() error { return e.err }

// refusalReason is the reason a message refused by Admit is kept with when
// it came from a receive location.
func refusalReason(err error) Reason {
	if errors.As(err, new(unknownRouteError)) {
		return ReasonNoRoute
	}
	return ReasonInvalid
}

// validContentType reports whether s is a media type that can be sent as a
// header value.
func validContentType(s string) bool {
	if !utf8.ValidString(s) || !ValidHeaderValue(s) {
		return false
	}
	_, _, err := mime.ParseMediaType(s)
	return err == nil
}

// Validate checks what a sender of the tenant gave against the contract and
// the topology: the tenant's own names (never another tenant's qualified
// one), an existing route of the tenant (none for a message to publish), a
// priority of 0 to 9, header names. It returns an *Error with
// CodeInvalidArgument that names the field. Admit checks every message
// taken in with it.
func (t *Topology) Validate(m *Message, tenant string) error {
	route := qualifyRoute(tenant, m.Route)
	switch {
	case m.ID != "" && !ValidID(m.ID):
		return Errorf(CodeInvalidArgument, "id %q is not valid: use 1 to %d letters, digits, '.', '_', '-' or ':'", clip(m.ID), MaxIDLen)
	case m.Type == "":
		return Errorf(CodeInvalidArgument, "type is required")
	case !ValidType(m.Type):
		return Errorf(CodeInvalidArgument, "type %q is not valid: use 1 to %d letters, digits, '.', '_' or '-'", clip(m.Type), MaxTypeLen)
	case m.Route != "" && (!ValidName(m.Route) || t.Routes[route] == nil):
		return unknownRouteError{Errorf(CodeInvalidArgument, "route %q is not configured", clip(m.Route))}
	case m.Recipient != "" && !ValidRecipient(m.Recipient):
		return Errorf(CodeInvalidArgument, "recipient %q is not valid: 1 to %d characters without spaces or control characters", clip(m.Recipient), MaxRecipientLen)
	case m.Route != "" && t.Routes[route].Lookup != nil && m.Recipient == "":
		return Errorf(CodeInvalidArgument, "route %q looks up each message's endpoint by its recipient: recipient is required", m.Route)
	case m.Priority < 0 || m.Priority > MaxPriority:
		return Errorf(CodeInvalidArgument, "priority %d is out of range 0 to %d", m.Priority, MaxPriority)
	case len(m.OrderingKey) > MaxIDLen:
		return Errorf(CodeInvalidArgument, "ordering_key is longer than %d bytes", MaxIDLen)
	case !utf8.ValidString(m.OrderingKey) || !ValidHeaderValue(m.OrderingKey):
		// It is stored as text, and shown in lists and the dashboard.
		return Errorf(CodeInvalidArgument, "ordering_key has a control character or is not UTF-8")
	case !m.ExpiresAt.IsZero() && !m.DeliverAfter.IsZero() && !m.ExpiresAt.After(m.DeliverAfter):
		return Errorf(CodeInvalidArgument, "expires_at must be after deliver_after")
	}
	for k, v := range m.Headers {
		if !ValidHeaderName(k) {
			return Errorf(CodeInvalidArgument, "header name %q is not a valid HTTP header name", clip(k))
		}
		if !ValidHeaderValue(v) {
			return Errorf(CodeInvalidArgument, "header %q has a control character in its value", clip(k))
		}
	}
	return nil
}

// Accept makes a validated message ready for Store.Ingest: it computes the
// content hash from what the sender gave, applies the policy's priority when
// the sender chose none, and sets the state and times.
func Accept(m *Message, p *Policy, priorityGiven bool, now time.Time) {
	m.Hash = ContentHash(m)
	if m.Digest == "" {
		m.Size = len(m.Payload)
	}
	// Stores keep microseconds; the answer to the sender shows what is kept.
	now = now.Truncate(time.Microsecond)
	m.DeliverAfter = m.DeliverAfter.Truncate(time.Microsecond)
	m.ExpiresAt = m.ExpiresAt.Truncate(time.Microsecond)
	if !priorityGiven {
		m.Priority = p.Priority
	}
	m.State = StateQueued
	m.Reason = ""
	m.Attempts = 0
	m.NextAttemptAt = now
	if m.DeliverAfter.After(now) {
		m.NextAttemptAt = m.DeliverAfter
	}
	m.CreatedAt = now
	m.UpdatedAt = now
	m.RoundStartedAt = now
	m.TimerAt = nextTimer(m, p)
}

// clip shortens a value quoted back in an error message.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// ValidHeaderName reports whether s is an HTTP header name (an RFC 9110
// token): the names a message's own headers may have.
func ValidHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// ValidHeaderValue reports whether s can be sent as a header value: no
// control characters other than tab.
func ValidHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// qualifyRoute qualifies the route a message names, if any.
func qualifyRoute(tenant, route string) string {
	if route == "" {
		return ""
	}
	return Qualify(tenant, route)
}
