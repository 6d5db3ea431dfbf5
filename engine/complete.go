package engine

import (
	"context"
	"log/slog"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/startstop"
)

// maxBatch bounds the changes written in one store call.
const maxBatch = 512

// complete writes the outcomes of attempts, many at a time, until the
// outcomes channel is closed and drained.
func (e *Engine) complete() {
	defer close(e.done)
	batch := make([]outcome, 0, maxBatch)
	for {
		o, ok := <-e.outcomes
		if !ok {
			return
		}
		batch = append(batch[:0], o)
	gather:
		for len(batch) < maxBatch {
			select {
			case o, ok := <-e.outcomes:
				if !ok {
					break gather
				}
				batch = append(batch, o)
			default:
				break gather
			}
		}
		e.applyOutcomes(batch)
	}
}

// applyOutcomes decides what each attempt means for its message and writes
// it all in one store call, retrying while the store is unavailable (the
// outcomes waiting meanwhile hold back new claims past a bound).
func (e *Engine) applyOutcomes(batch []outcome) {
	now := e.clock.Now()
	changes := make([]courier.Change, len(batch))
	for i, o := range batch {
		if !o.deferUntil.IsZero() {
			changes[i] = courier.Change{Message: courier.PutBack(o.msg, o.deferUntil, now), From: courier.StateInflight, Token: o.msg.TotalAttempts}
			continue
		}
		ep := o.endpoint
		if ep == nil {
			ep = &courier.Endpoint{}
		}
		// Decided under the topology the attempt was sent under: a reload
		// meanwhile does not decide it by rules it was not sent by.
		t := o.t
		if t == nil {
			t = e.topology.Load()
		}
		next, notices := t.AfterAttempt(o.msg, ep, o.result, now, e.opts.RandFunc())
		a := &courier.Attempt{MessageID: o.msg.ID, Subscription: o.msg.Subscription, N: o.msg.TotalAttempts, Endpoint: ep.Name, Route: o.msg.Route,
			StartedAt: o.started, Duration: o.duration, Outcome: courier.OutcomeDelivered, Status: o.result.Status,
			Response: o.result.Response}
		if !o.result.Delivered() {
			a.Outcome, a.Class, a.Error = courier.OutcomeFailed, o.result.Class, o.result.Error
		}
		changes[i] = courier.Change{Message: next, From: courier.StateInflight, Token: o.msg.TotalAttempts, Attempt: a, Notices: notices, Prior: o.msg}
	}
	// Health first: a message due again at once must not be claimed for an
	// endpoint whose suspension is not written yet.
	e.updateHealth(batch)
	span := startBatch(e.life, "commit outcomes")
	applied := e.applyRetrying(changes)
	endBatch(span, len(changes), nil)
	e.pending.Add(-int64(len(batch)))
	if applied != nil {
		written := e.clock.Now()
		for i, o := range batch {
			if applied[i] && o.deferUntil.IsZero() {
				e.opts.Observer.OutcomeWritten(written.Sub(o.started.Add(o.duration)))
			}
		}
	}
	for i, o := range batch {
		if applied != nil {
			ctx := o.ctx
			if ctx == nil {
				ctx = e.life
			}
			e.logChange(ctx, changes[i], applied[i])
		}
	}
	e.noteChanges(changes, applied)
}

// applyRetrying writes changes, trying again with a growing pause while the
// store is unavailable, for up to about ten minutes, or until a stop cuts it
// off; then the outcomes are given up and the leases will lapse (the
// messages are delivered again). Any other failure (an internal one, a
// change the store refuses) is given up at once: trying again would fail
// the same way, and hold back the outcomes behind it for ten minutes.
func (e *Engine) applyRetrying(changes []courier.Change) []bool {
	pause := 50 * time.Millisecond
	deadline := e.clock.Now().Add(10 * time.Minute)
	for {
		applied, err := e.store.Apply(e.life, changes)
		if err == nil {
			return applied
		}
		if e.life.Err() != nil {
			e.logger.Warn("outcomes not written at stop; their messages will be delivered again when the leases lapse",
				"count", len(changes), "err", err)
			return nil
		}
		if courier.ErrorCode(err) != courier.CodeUnavailable || e.clock.Now().After(deadline) {
			e.logger.Error("outcomes could not be written; their messages will be delivered again when the leases lapse",
				"count", len(changes), "err", err)
			return nil
		}
		e.logger.Warn("writing outcomes failed; will try again", "count", len(changes), "err", err, "in", pause)
		startstop.Sleep(e.life, pause)
		pause = min(pause*2, 5*time.Second)
	}
}

// logChange writes one line for the changes an operator wants to know of.
// ctx carries the attempt's span, when there is one, for the log's trace id.
func (e *Engine) logChange(ctx context.Context, c courier.Change, applied bool) {
	m := c.Message
	if !applied {
		e.logger.DebugContext(ctx, "outcome dropped: the lease was taken over meanwhile", "id", m.Key(), "route", m.Route)
		return
	}
	e.opts.Observer.Applied(c)
	switch {
	case m.State == courier.StateDelivered:
		// One line per delivery is for debugging only; the check spares the
		// delivery path building the line's arguments.
		if e.logger.Enabled(ctx, slog.LevelDebug) {
			e.logger.DebugContext(ctx, "message delivered", "id", m.Key(), "type", m.Type, "route", m.Route, "endpoint", m.Endpoint, "attempts", m.Attempts)
		}
	case m.State == courier.StateSuspended:
		e.logger.InfoContext(ctx, "message suspended", "id", m.Key(), "type", m.Type, "route", m.Route, "endpoint", m.Endpoint,
			"reason", m.Reason, "attempts", m.Attempts, "last_error", m.LastError)
		if m.OrderSkipped && m.Sequence != 0 {
			// Logged whether or not a policy's escalation sends the notice.
			e.logger.InfoContext(ctx, "ordering key goes on without the message: its receiver gets a gap in the sequence", "id", m.Key(),
				"route", m.Route, "ordering_key", m.OrderingKey, "sequence", m.Sequence)
		}
	case m.State == courier.StateDiscarded:
		e.logger.InfoContext(ctx, "message discarded by its policy", "id", m.Key(), "type", m.Type, "route", m.Route, "attempts", m.Attempts)
	case m.FallbackFrom != "" && m.Attempts == 0 && m.State == courier.StateQueued && c.From != courier.StateQueued || m.FallbackFrom != "" && m.Attempts == 0 && c.Attempt == nil:
		e.logger.InfoContext(ctx, "message falls back", "id", m.Key(), "type", m.Type, "from", m.FallbackFrom, "route", m.Route)
	case m.State == courier.StateQueued && c.Attempt != nil && c.Attempt.Outcome != courier.OutcomeDelivered:
		e.logger.DebugContext(ctx, "attempt failed; the message will be retried", "id", m.Key(), "type", m.Type, "route", m.Route,
			"endpoint", c.Attempt.Endpoint, "class", c.Attempt.Class, "attempts", m.Attempts, "next_attempt_at", m.NextAttemptAt)
	}
	for _, n := range c.Notices {
		e.logger.InfoContext(ctx, "notice sent", "id", n.ID, "about", m.ID, "route", n.Route)
	}
}

// rescue takes up the messages whose lease ended before the given time:
// their worker is gone, so the attempt is recorded as abandoned and the
// message is due again (or suspended as poison).
func (e *Engine) rescue(ctx context.Context, before time.Time) error {
	for {
		msgs, err := e.store.ExpiredLeases(ctx, before, maxBatch)
		if err != nil {
			return err
		}
		if err := e.rescueLeases(ctx, msgs, "lapsed before it reported an outcome"); err != nil {
			return err
		}
		if len(msgs) < maxBatch {
			return nil
		}
	}
}

// rescueLeases records an abandoned attempt of each leased message, whose
// worker is gone (why says how it is known), and makes it due again, or
// suspends it as poison.
func (e *Engine) rescueLeases(ctx context.Context, msgs []*courier.Message, why string) error {
	if len(msgs) == 0 {
		return nil
	}
	t := e.topology.Load()
	now := e.clock.Now()
	changes := make([]courier.Change, len(msgs))
	for i, m := range msgs {
		next, notices := t.AfterAbandon(m, now)
		changes[i] = courier.Change{Message: next, From: courier.StateInflight, Token: m.TotalAttempts, Notices: notices,
			Attempt: &courier.Attempt{MessageID: m.ID, Subscription: m.Subscription, N: m.TotalAttempts, Endpoint: m.Endpoint, Route: m.Route,
				StartedAt: m.UpdatedAt, Duration: now.Sub(m.UpdatedAt), Outcome: courier.OutcomeAbandoned,
				Error: "the lease of " + m.LeaseOwner + " " + why}}
	}
	applied, err := e.store.Apply(ctx, changes)
	if err != nil {
		return err
	}
	n := 0
	for i, ok := range applied {
		if ok {
			n++
			e.logChange(ctx, changes[i], true)
		}
	}
	e.logger.Warn("took up messages whose worker stopped", "count", n)
	e.noteChanges(changes, applied)
	return nil
}

// fireTimers applies the due time-driven events: escalations, fallbacks
// after their time, expiry.
func (e *Engine) fireTimers(ctx context.Context) error {
	now := e.clock.Now()
	for round := 0; round < 20; round++ {
		msgs, err := e.store.DueTimers(ctx, now, maxBatch)
		if err != nil || len(msgs) == 0 {
			return err
		}
		t := e.topology.Load()
		changes := make([]courier.Change, len(msgs))
		for i, m := range msgs {
			next, notices, _ := t.OnTimer(m, now)
			changes[i] = courier.Change{Message: next, From: courier.StateQueued, Token: m.TotalAttempts, Notices: notices}
		}
		applied, err := e.store.Apply(ctx, changes)
		if err != nil {
			return err
		}
		for i, ok := range applied {
			e.logChange(ctx, changes[i], ok)
		}
		e.noteChanges(changes, applied)
		if len(msgs) < maxBatch {
			return nil
		}
	}
	return nil
}
