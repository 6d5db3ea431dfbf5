package courier

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// What becomes of a message, in the order the engine meets an attempt's
// outcome: put off before it was made (PutBack), ended (AfterAttempt), lost
// with its worker (AfterAbandon), and, while it waits, its timers
// (OnTimer). The Topology methods decide a message of a workflow by the
// workflow's rules (workflow.go) and any other by its type's policy, then
// apply the key's order (settle). All are pure functions of the message,
// the outcome and now.

// An attempt put off: its endpoint could not take the message now.

// PutBack returns m, claimed, queued again until until without an attempt
// spent: its endpoint could not take it now (held, busy or paced), which is
// known only once a lookup route has resolved it.
func PutBack(m *Message, until, now time.Time) *Message {
	n := *m
	n.State = StateQueued
	n.LeaseUntil, n.LeaseOwner = time.Time{}, ""
	n.NextAttemptAt, n.UpdatedAt = until, now
	return &n
}

// An attempt that ended: delivered, or failed with a result.

// AfterAttempt decides what becomes of m after an attempt on e with result
// r: by AfterStep for a message of a workflow, else by AfterAttempt under
// its type's policy; then the route's ordered_on_failure applies (settle).
func (t *Topology) AfterAttempt(m *Message, e *Endpoint, r Result, now time.Time, rnd float64) (next *Message, notices []*Message) {
	if t.inWorkflow(m) {
		next, notices = AfterStep(m, t, e, r, now, rnd)
	} else {
		next, notices = AfterAttempt(m, t.Policy(m.Type), e, r, now, rnd)
	}
	return t.settle(m, next, notices, now)
}

// AfterAttempt decides what becomes of a message after an attempt on
// endpoint e with result r: delivered, retried (when), fallen back, or
// suspended or discarded (why), and which notices that sends. m is the
// message as claimed; the returned message is a new value. rnd in [0, 1)
// places the jitter.
func AfterAttempt(m *Message, p *Policy, e *Endpoint, r Result, now time.Time, rnd float64) (*Message, []*Message) {
	n := attemptEnded(m, e, now)
	if r.Delivered() {
		n.State, n.Reason = StateDelivered, ""
		n.NextAttemptAt, n.TimerAt, n.FinishedAt = time.Time{}, time.Time{}, now
		return &n, nil
	}
	n.LastError, n.LastClass = r.Error, r.Class
	var notices []*Message
	switch {
	case e.Permanent(r.Class):
		notices = suspend(&n, p, ReasonRejected, now)
	case n.Attempts >= p.AttemptLimit():
		notices = exhaust(&n, p, ReasonExhausted, now)
	default:
		n.State = StateQueued
		n.NextAttemptAt = now.Add(p.NextDelay(n.Attempts, rnd, r.RetryAfter))
	}
	if n.State == StateQueued {
		more, _ := timers(&n, p, now)
		notices = append(notices, more...)
	}
	return &n, notices
}

// attemptEnded is m after an attempt on e ended, whatever its outcome: the
// lease given up, the attempt counted.
func attemptEnded(m *Message, e *Endpoint, now time.Time) Message {
	n := *m
	n.LeaseUntil, n.LeaseOwner = time.Time{}, ""
	n.UpdatedAt = now
	n.Endpoint = e.Name
	n.Abandoned = 0
	n.Attempts++
	return n
}

// A worker lost: the lease lapsed with no outcome.

// AfterAbandon decides what becomes of m when its worker vanished: by
// AfterStepAbandoned for a message of a workflow, else by AfterAbandon under
// its type's policy; then the route's ordered_on_failure applies (settle).
func (t *Topology) AfterAbandon(m *Message, now time.Time) (next *Message, notices []*Message) {
	if t.inWorkflow(m) {
		next, notices = AfterStepAbandoned(m, t, now)
	} else {
		next, notices = AfterAbandon(m, t.Policy(m.Type), now)
	}
	return t.settle(m, next, notices, now)
}

// MaxAbandoned is how many attempts in a row may lose their worker before the
// message is suspended as poison: a message that crashes or hangs whatever
// delivers it must not take the service down again and again.
const MaxAbandoned = 3

// AfterAbandon decides what becomes of a message whose worker vanished
// (its lease lapsed): due again at once, without spending an attempt of its
// policy, until it has lost MaxAbandoned workers in a row; then it is
// suspended as poison.
func AfterAbandon(m *Message, p *Policy, now time.Time) (*Message, []*Message) {
	n, poison := abandoned(m, now)
	if poison {
		return &n, suspend(&n, p, ReasonPoison, now)
	}
	n.State = StateQueued
	n.NextAttemptAt = now
	return &n, nil
}

// abandoned is m after its lease lapsed with no outcome; poison reports
// that this has happened MaxAbandoned times in a row.
func abandoned(m *Message, now time.Time) (n Message, poison bool) {
	n = *m
	n.LeaseUntil, n.LeaseOwner = time.Time{}, ""
	n.UpdatedAt = now
	n.Abandoned++
	n.LastError, n.LastClass = "the attempt was abandoned: its worker stopped before it finished", ""
	if n.Abandoned >= MaxAbandoned {
		n.LastError = fmt.Sprintf("%d attempts in a row were abandoned: the message may crash or hang whatever delivers it", n.Abandoned)
		return n, true
	}
	return n, false
}

// A timer due: expiry, max_age, a fallback's time, escalations.

// OnTimer applies the time-driven events of m that are due at now: by
// OnStepTimer for a message of a workflow, else by OnTimer under its type's
// policy; then the route's ordered_on_failure applies (settle).
func (t *Topology) OnTimer(m *Message, now time.Time) (next *Message, notices []*Message, changed bool) {
	if t.inWorkflow(m) {
		next, notices, changed = OnStepTimer(m, t, now)
	} else {
		next, notices, changed = OnTimer(m, t.Policy(m.Type), now)
	}
	next, notices = t.settle(m, next, notices, now)
	return next, notices, changed
}

// OnTimer applies the time-driven events of a queued message that are due
// at now (expiry, max_age, a fallback's time, escalations) and sets the time
// of the next one. changed reports whether anything but TimerAt changed.
// A message waiting for its ordering key has not begun its round: only its
// expires_at and the escalations apply to it (see timers).
func OnTimer(m *Message, p *Policy, now time.Time) (next *Message, notices []*Message, changed bool) {
	return onTimer(m, now, func(n *Message) []*Message {
		notices, _ := timers(n, p, now)
		return notices
	})
}

// onTimer applies fire, the time-driven events of a message, to a copy of
// it and reports whether anything but TimerAt changed.
func onTimer(m *Message, now time.Time, fire func(*Message) []*Message) (next *Message, notices []*Message, changed bool) {
	n := *m
	before, escalated, route := n.State, n.Escalated, n.Route
	notices = fire(&n)
	changed = n.State != before || n.Escalated != escalated || n.Route != route
	if changed {
		n.UpdatedAt = now
	}
	return &n, notices, changed
}

// timers fires what is due of a queued message and sets its TimerAt to the
// next event. It reports whether the message left the queue.
//
// A message waiting for its ordering key has had no attempt in its round
// yet and its round's clock has not started: max_age and the fallback's
// time count from when it is promoted (the store starts its round then).
// The sender's expires_at still applies; a waiting message that expires
// leaves its key's order, so that it blocks none of the messages behind it.
func timers(n *Message, p *Policy, now time.Time) ([]*Message, bool) {
	var notices []*Message
	waiting := n.Waiting()
	if !n.ExpiresAt.IsZero() && !now.Before(n.ExpiresAt) {
		n.LastError = joinError(n.LastError, "expired: past its expires_at "+n.ExpiresAt.UTC().Format(time.RFC3339))
		notices = suspend(n, p, ReasonExpired, now)
		n.OrderSkipped = n.OrderSkipped || waiting
		return notices, true
	}
	if !waiting && p.MaxAge > 0 && !now.Before(n.RoundStartedAt.Add(p.MaxAge)) {
		n.LastError = joinError(n.LastError, "expired: not delivered within max_age "+p.MaxAge.String())
		notices = exhaust(n, p, ReasonExpired, now)
		if n.State != StateQueued {
			return notices, true
		}
	}
	if f := p.Fallback; !waiting && f != nil && f.After > 0 && n.FallbackFrom == "" && n.Type != NoticeType && !now.Before(n.RoundStartedAt.Add(f.After)) {
		notices = append(notices, fallBack(n, p, now)...)
	}
	if n.Type != NoticeType {
		notices = append(notices, escalate(n, p, now, func() string {
			return fmt.Sprintf("message %s (%s, route %s) is not delivered", n.ID, n.Type, n.Route)
		})...)
	}
	n.TimerAt = nextTimer(n, p)
	return notices, false
}

// nextTimer is the time of the next time-driven event of a queued message:
// for one waiting for its ordering key only its expiry and escalations.
func nextTimer(n *Message, p *Policy) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	waiting := n.Waiting()
	consider(n.ExpiresAt)
	if p.MaxAge > 0 && !waiting {
		consider(n.RoundStartedAt.Add(p.MaxAge))
	}
	if n.Type != NoticeType {
		if f := p.Fallback; f != nil && f.After > 0 && n.FallbackFrom == "" && !waiting {
			consider(n.RoundStartedAt.Add(f.After))
		}
		if n.Escalated < len(p.Escalate) {
			consider(n.CreatedAt.Add(p.Escalate[n.Escalated].After))
		}
	}
	return next
}

// How a round ends: a fallback, a discard, a suspension; and the
// escalations while it lasts.

// exhaust ends a round that ran out (attempts or max_age): the fallback
// route takes over once, else on_exhausted.
func exhaust(n *Message, p *Policy, reason Reason, now time.Time) []*Message {
	if p.Fallback != nil && n.FallbackFrom == "" && n.Type != NoticeType {
		return fallBack(n, p, now)
	}
	if p.OnExhausted == ExhaustedDiscard {
		n.State, n.Reason = StateDiscarded, ""
		n.NextAttemptAt, n.TimerAt, n.FinishedAt = time.Time{}, time.Time{}, now
		return nil
	}
	return suspend(n, p, reason, now)
}

// fallBack moves the message to the policy's fallback route for a new round.
func fallBack(n *Message, p *Policy, now time.Time) []*Message {
	n.FallbackFrom, n.Route = n.Route, p.Fallback.Route
	// Its key goes on without it on the first route; on the fallback route
	// it joins its key's order there (the store makes it wait behind an
	// older or active message of its key on that route).
	n.OrderSkipped = false
	n.State, n.Reason = StateQueued, ""
	n.Attempts = 0
	n.RoundStartedAt, n.NextAttemptAt = now, now
	n.TimerAt = nextTimer(n, p)
	return noticeAll(n, p, "fallback", now,
		fmt.Sprintf("message %s (%s) could not be delivered on route %s; it goes to the fallback route %s", n.ID, n.Type, n.FallbackFrom, n.Route))
}

// suspend parks the message for an operator.
func suspend(n *Message, p *Policy, reason Reason, now time.Time) []*Message {
	n.State, n.Reason = StateSuspended, reason
	n.NextAttemptAt, n.TimerAt, n.FinishedAt = time.Time{}, time.Time{}, now
	return noticeAll(n, p, "suspended", now,
		fmt.Sprintf("message %s (%s, route %s) is suspended (%s) after %d attempts: %s", n.ID, n.Type, n.Route, reason, n.Attempts, n.LastError))
}

// escalate sends the escalations of p whose time has come, each once;
// what says what is late about the message ("not delivered").
func escalate(n *Message, p *Policy, now time.Time, what func() string) []*Message {
	var notices []*Message
	for n.Escalated < len(p.Escalate) && !now.Before(n.CreatedAt.Add(p.Escalate[n.Escalated].After)) {
		esc := p.Escalate[n.Escalated]
		n.Escalated++
		notices = append(notices, notice(n, "escalation", esc.Notify, fmt.Sprintf("%d", n.Escalated), now,
			fmt.Sprintf("%s after %s", what(), roundAge(now.Sub(n.CreatedAt)))))
	}
	return notices
}

// After every decision: the key's order.

// settle finishes decision m → n, whatever made it: the route's
// ordered_on_failure (keepOrder), and the notice of a gap that n leaves in
// its key's order (gapNotices).
func (t *Topology) settle(m, n *Message, notices []*Message, now time.Time) (*Message, []*Message) {
	t.keepOrder(n)
	return n, append(notices, t.gapNotices(m, n, now)...)
}

// keepOrder is KeepOrder by the route a decided message is on, looked up
// only for a suspended message with a key (the only one it changes).
func (t *Topology) keepOrder(n *Message) {
	if n.State == StateSuspended && n.OrderingKey != "" {
		KeepOrder(n, t.Route(n.Route))
	}
}

// KeepOrder applies a route's ordered_on_failure to a message just decided:
// a suspended message with an ordering key on a route that skips leaves
// its key's order, so that the messages behind it go on. On a route that
// blocks (the default, also when the route is gone) it holds the key.
func KeepOrder(n *Message, r *Route) {
	if n.State == StateSuspended && n.OrderingKey != "" && r != nil && r.OrderedOnFailure == OrderedSkip {
		n.OrderSkipped = true
	}
}

// gapNotices tells of a numbered message that left its key's order in
// decision m → n (suspended on a route that skips, or expired while it
// waited): the messages numbered after it go on without it, so its
// receiver will get n+1 without n. The notice goes, like the policy's
// suspension notice, to every endpoint the policy escalates to; a policy
// without escalations sends none (the engine logs the gap).
func (t *Topology) gapNotices(m, n *Message, now time.Time) []*Message {
	if !LeftOrder(m, n) {
		return nil
	}
	return noticeAll(n, t.PolicyFor(n), NoticeSequenceGap, now,
		fmt.Sprintf("message %s (%s, sequence %d of ordering key %s on route %s) is %s and left its key's order: "+
			"the messages after it go on without it, so the receiver gets sequence %d without it",
			n.ID, n.Type, n.Sequence, n.OrderingKey, n.Route, n.State, n.Sequence))
}

// LeftOrder reports whether decision m → n takes a numbered message
// (Message.Sequence) out of its key's order for good, which leaves a gap
// in the sequence its receiver sees.
func LeftOrder(m, n *Message) bool {
	return n.Sequence != 0 && !m.OrderSkipped && n.OrderSkipped && n.State == StateSuspended
}

// Notices: the messages courier sends about the others.

// NoticeType is the type of the messages courier sends about other messages
// (escalations, fallbacks, suspensions). Notices are delivered like any other
// message but never cause notices themselves.
const NoticeType = "courier.notice"

// NoticeSequenceGap is the kind of notice (NoticeBody.Notice) that tells
// of a message that left its ordering key's order, leaving a gap in the
// key's Courier-Sequence.
const NoticeSequenceGap = "sequence_gap"

// noticeRoutePrefix starts the name of the route that carries notices to one
// endpoint; configured routes may not use it.
const noticeRoutePrefix = "courier.notice."

// NoticeRoute names the route that delivers notices to an endpoint: a
// route of the endpoint's tenant.
func NoticeRoute(endpoint string) string {
	tenant, name := SplitName(endpoint)
	return Qualify(tenant, noticeRoutePrefix+name)
}

// noticeEndpoint returns the endpoint of a notice route.
func noticeEndpoint(route string) (string, bool) {
	tenant, name := SplitName(route)
	ep, ok := strings.CutPrefix(name, noticeRoutePrefix)
	return Qualify(tenant, ep), ok
}

// noticeAll tells every endpoint that the policy escalates to.
func noticeAll(n *Message, p *Policy, kind string, now time.Time, text string) []*Message {
	if n.Type == NoticeType {
		return nil
	}
	var out []*Message
	seen := map[string]bool{}
	for _, e := range p.Escalate {
		if !seen[e.Notify] {
			seen[e.Notify] = true
			out = append(out, notice(n, kind, e.Notify, fmt.Sprintf("%d", n.TotalAttempts), now, text))
		}
	}
	return out
}

// NoticeBody is the payload of a notice.
type NoticeBody struct {
	Notice      string     `json:"notice"` // escalation, fallback, suspended or sequence_gap
	Text        string     `json:"text"`
	MessageID   string     `json:"message_id"`
	Type        string     `json:"type"`
	Route       string     `json:"route"`
	State       State      `json:"state"`
	Reason      Reason     `json:"reason,omitempty"`
	Attempts    int        `json:"attempts"`
	Endpoint    string     `json:"endpoint,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	LastClass   ErrorClass `json:"last_class,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	AgeSeconds  int64      `json:"age_seconds"`
	NoticeAt    time.Time  `json:"notice_at"`
	OriginRoute string     `json:"fallback_from,omitempty"`
	// Subscription is set for a delivery of a published message.
	Subscription string `json:"subscription,omitempty"`
	// OrderingKey is the message's ordering key, if any, and Sequence its
	// number among the key's messages on its route (Message.Sequence).
	OrderingKey string `json:"ordering_key,omitempty"`
	Sequence    int64  `json:"sequence,omitempty"`
}

// notice builds the message that tells endpoint about n. Its id is derived
// from n's, so that applying the same decision twice sends it once.
func notice(n *Message, kind, endpoint, seq string, now time.Time, text string) *Message {
	body, _ := json.Marshal(NoticeBody{
		Notice: kind, Text: text, MessageID: n.ID, Subscription: n.Subscription, Type: n.Type, Route: n.Route, State: n.State, Reason: n.Reason,
		Attempts: n.Attempts, Endpoint: n.Endpoint, LastError: n.LastError, LastClass: n.LastClass,
		CreatedAt: n.CreatedAt, AgeSeconds: int64(now.Sub(n.CreatedAt) / time.Second), NoticeAt: now, OriginRoute: n.FallbackFrom,
		OrderingKey: n.OrderingKey, Sequence: n.Sequence,
	})
	id := n.ID + "." + kind + "." + seq + "." + endpoint
	if n.Subscription != "" {
		id = n.ID + "." + n.Subscription + "." + kind + "." + seq + "." + endpoint
	}
	if len(id) > MaxIDLen {
		sum := sha256.Sum256([]byte(id))
		id = "notice." + hex.EncodeToString(sum[:])
	}
	m := &Message{ID: id, Type: NoticeType, Route: NoticeRoute(endpoint), Payload: body, ContentType: "application/json",
		Headers: map[string]string{"Courier-Notice": kind, "Courier-Message-Id": n.ID}}
	Accept(m, &Policy{Priority: 9}, false, now)
	return m
}

// The rules the decisions read: a policy's attempts and delays, an
// endpoint's permanent classes.

// AttemptLimit is how many attempts a round may have: a schedule's length
// plus one, else the policy's max_attempts.
func (p *Policy) AttemptLimit() int {
	if len(p.Schedule) > 0 {
		return len(p.Schedule) + 1
	}
	return max(p.MaxAttempts, 1)
}

// NextDelay is the wait before retry k (k = 1 for the first retry): the
// schedule's entry, or initial × factor^(k-1) capped at max, with the jitter
// fraction applied to that base (rnd in [0, 1) picks where in ± jitter), and
// raised to the receiver's Retry-After.
func (p *Policy) NextDelay(k int, rnd float64, retryAfter time.Duration) time.Duration {
	k = max(k, 1)
	var d time.Duration
	if len(p.Schedule) > 0 {
		d = p.Schedule[min(k-1, len(p.Schedule)-1)]
	} else {
		d = p.Backoff.Delay(k - 1)
		if j := p.Backoff.Jitter; j > 0 {
			d = time.Duration(float64(d) * (1 + j*(2*rnd-1)))
		}
	}
	return max(d, retryAfter, 0)
}

// Delay is the n-th value of the backoff (n = 0 for the first):
// min(initial × factor^n, max).
func (b Backoff) Delay(n int) time.Duration {
	f := float64(b.Initial) * math.Pow(max(b.Factor, 1), float64(max(n, 0)))
	if b.Max > 0 && (f > float64(b.Max) || math.IsInf(f, 0) || math.IsNaN(f)) {
		return b.Max
	}
	if f > float64(math.MaxInt64) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(f)
}

// Permanent reports whether a failure of class c means the endpoint will
// never take this message: the endpoint's permanent list, else the default.
func (e *Endpoint) Permanent(c ErrorClass) bool {
	if e.PermanentClasses == nil {
		return c.PermanentByDefault()
	}
	for _, p := range e.PermanentClasses {
		if p == c {
			return true
		}
	}
	return false
}

func joinError(a, b string) string {
	if a == "" {
		return b
	}
	return b + " (last error: " + a + ")"
}

// roundAge formats a duration for people: to the minute, or the second
// below a minute.
func roundAge(d time.Duration) string {
	if d >= time.Minute {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}
