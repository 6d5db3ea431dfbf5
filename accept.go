package courier

import (
	"strings"
	"time"
)

// Validate checks what a sender gave against the contract and the topology:
// names, an existing route, a priority of 0 to 9, header names. It returns an
// *Error with CodeInvalidArgument that names the field.
func (t *Topology) Validate(m *Message) error {
	switch {
	case m.ID != "" && !ValidID(m.ID):
		return Errorf(CodeInvalidArgument, "id %q is not valid: use 1 to %d letters, digits, '.', '_', '-' or ':'", clip(m.ID), MaxIDLen)
	case m.Type == "":
		return Errorf(CodeInvalidArgument, "type is required")
	case !ValidType(m.Type):
		return Errorf(CodeInvalidArgument, "type %q is not valid: use 1 to %d letters, digits, '.', '_' or '-'", clip(m.Type), MaxTypeLen)
	case m.Route == "":
		return Errorf(CodeInvalidArgument, "route is required")
	case t.Routes[m.Route] == nil:
		return Errorf(CodeInvalidArgument, "route %q is not configured", clip(m.Route))
	case m.Recipient != "" && !ValidRecipient(m.Recipient):
		return Errorf(CodeInvalidArgument, "recipient %q is not valid: 1 to %d characters without spaces or control characters", clip(m.Recipient), MaxRecipientLen)
	case t.Routes[m.Route].Lookup != nil && m.Recipient == "":
		return Errorf(CodeInvalidArgument, "route %q looks up each message's endpoint by its recipient: recipient is required", m.Route)
	case m.Priority < 0 || m.Priority > MaxPriority:
		return Errorf(CodeInvalidArgument, "priority %d is out of range 0 to %d", m.Priority, MaxPriority)
	case len(m.OrderingKey) > MaxIDLen:
		return Errorf(CodeInvalidArgument, "ordering_key is longer than %d bytes", MaxIDLen)
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
	m.Size = len(m.Payload)
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
