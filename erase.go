package courier

import (
	"fmt"
	"time"
)

// Erasure is the tombstone of a message whose payload was erased on
// request before retention took it (a data-protection request: an invoice
// that holds personal data), docs/design.md §2. The message keeps
// everything else: its id, type, route, states, attempts, size and history.
type Erasure struct {
	At     time.Time
	By     string // the Who of the erasing action
	Reason string
}

// ErasedDiscard is the Detail of the discard that an erasure makes of a
// delivery that was still live.
const ErasedDiscard = "payload erased"

// Erase returns m with its payload erased as e says: no payload, blob or
// digest left, nor the responses of its workflow's steps (what receivers
// made of the payload, kept only for the later steps, which it will not
// take), and e as its tombstone. A delivery still live (queued, in
// flight or suspended) cannot be delivered without its payload, so it is
// discarded with it (discarded reports so): a request to erase is a request
// to stop using the data, and an attempt under way then changes nothing
// when it ends, as its message is no longer in flight with its token
// (Apply's guard). A message erased already is returned as it is, so that
// erasing twice answers the same tombstone.
func Erase(m *Message, e Erasure) (n *Message, discarded bool) {
	c := *m
	if m.Erased != nil {
		return &c, false
	}
	if !m.State.Terminal() {
		c.State, c.NextAttemptAt, c.TimerAt = StateDiscarded, time.Time{}, time.Time{}
		c.LeaseUntil, c.LeaseOwner = time.Time{}, ""
		c.FinishedAt, discarded = e.At, true
	}
	c.Payload, c.Blob, c.Digest, c.StepResponses = nil, "", "", nil
	c.UpdatedAt = e.At
	c.Erased = &e
	return &c, discarded
}

// ErasedError is the CodeGone error of a use of m's payload after it was
// erased: it says when, by whom and why.
func ErasedError(m *Message) error {
	return Errorf(CodeGone, "the payload of message %q was erased at %s by %q%s", m.ID,
		m.Erased.At.UTC().Format(time.RFC3339), m.Erased.By, erasedBecause(m.Erased))
}

// erasedConflict is the CodeConflict error of an action that would deliver
// m again after its payload was erased.
func erasedConflict(m *Message, a ActionKind) error {
	return Errorf(CodeConflict, "message %q cannot be %s: its payload was erased at %s by %q%s; there is nothing to deliver",
		m.ID, map[ActionKind]string{ActionResend: "resent", ActionResubmit: "resubmitted"}[a],
		m.Erased.At.UTC().Format(time.RFC3339), m.Erased.By, erasedBecause(m.Erased))
}

func erasedBecause(e *Erasure) string {
	if e.Reason == "" {
		return ""
	}
	return fmt.Sprintf(" (%s)", e.Reason)
}
