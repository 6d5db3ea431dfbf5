package courier_test

import (
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

// Erase empties the payload, keeps the rest, and discards a message that
// is still live; a message erased already comes back as it was.
func TestErase(t *testing.T) {
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	e := courier.Erasure{At: now, By: "dpo", Reason: "request 7"}
	for _, tt := range []struct {
		state     courier.State
		want      courier.State
		discarded bool
	}{
		{courier.StateQueued, courier.StateDiscarded, true},
		{courier.StateInflight, courier.StateDiscarded, true},
		{courier.StateSuspended, courier.StateDiscarded, true},
		{courier.StateDelivered, courier.StateDelivered, false},
		{courier.StateDiscarded, courier.StateDiscarded, false},
	} {
		m := &courier.Message{ID: "m", Type: "invoice", Route: "erp", Payload: []byte("Jane"), Size: 4, Blob: "b", Digest: "d",
			State: tt.state, TotalAttempts: 3, LeaseOwner: "node", LeaseUntil: now, NextAttemptAt: now}
		m.StepResponses = map[int]string{1: "Jane's account"}
		got, discarded := courier.Erase(m, e)
		if got.State != tt.want || discarded != tt.discarded || got.Erased == nil || *got.Erased != e {
			t.Errorf("%s: %s, discarded %v, erased %v; want %s, %v, %v", tt.state, got.State, discarded, got.Erased, tt.want, tt.discarded, e)
		}
		if got.Payload != nil || got.Blob != "" || got.Digest != "" || got.StepResponses != nil || got.Size != 4 || got.TotalAttempts != 3 {
			t.Errorf("%s: payload %q blob %q digest %q size %d attempts %d; want the payload gone, the rest kept",
				tt.state, got.Payload, got.Blob, got.Digest, got.Size, got.TotalAttempts)
		}
		if tt.discarded && (got.LeaseOwner != "" || !got.NextAttemptAt.IsZero() || got.FinishedAt != now) {
			t.Errorf("%s: discarded with lease %q, next attempt %v, finished %v", tt.state, got.LeaseOwner, got.NextAttemptAt, got.FinishedAt)
		}
		again, discarded := courier.Erase(got, courier.Erasure{At: now.Add(time.Hour), By: "other"})
		if discarded || *again.Erased != e {
			t.Errorf("%s erased again: %v, discarded %v; want the first tombstone", tt.state, again.Erased, discarded)
		}
		if _, err := courier.Resend(got, now); courier.ErrorCode(err) != courier.CodeConflict {
			t.Errorf("%s: resend of an erased message: %v, want a conflict", tt.state, err)
		}
	}
	m := &courier.Message{ID: "m", State: courier.StateSuspended, Erased: &e}
	if _, err := courier.Resubmit(m, "", now); courier.ErrorCode(err) != courier.CodeConflict {
		t.Errorf("resubmit of an erased message: %v, want a conflict", err)
	}
	if _, err := m.OpenPayload(t.Context(), nil); courier.ErrorCode(err) != courier.CodeGone {
		t.Errorf("OpenPayload of an erased message: %v, want gone", err)
	}
}
