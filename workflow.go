package courier

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// WorkflowStep is one step of a workflow route (docs/design.md §13): a delivery to
// Endpoint, undone by a delivery to Compensate (empty: nothing to undo)
// when a later step fails for good.
type WorkflowStep struct {
	Endpoint   string
	Compensate string
}

// Workflow is the workflow of a route: its steps in order, whether each
// step gets the original payload and the earlier responses in a JSON
// envelope, and the policy of its compensations.
type Workflow struct {
	Steps    []WorkflowStep
	Envelope bool
	// CompensationPolicy names the policy of the compensating deliveries;
	// empty: CompensationPolicy().
	CompensationPolicy string
}

// MaxStepResponse bounds the response of a step that is kept for the later
// steps.
const MaxStepResponse = 64 << 10

// CompensationPolicyName names the built-in policy of compensations.
const CompensationPolicyName = "courier.compensation"

// DefaultCompensationPolicy retries a compensation for seven days: an undo
// must not give up while its receiver is merely away.
func DefaultCompensationPolicy() *Policy {
	return &Policy{
		Name:        CompensationPolicyName,
		Backoff:     Backoff{Initial: 30 * time.Second, Factor: 2, Max: time.Hour, Jitter: 0.2},
		MaxAttempts: 1 << 20,
		MaxAge:      7 * 24 * time.Hour,
		OnExhausted: ExhaustedSuspend,
	}
}

// The implicit routes of a workflow route W carry its steps: "W:step-K"
// delivers step K to its endpoint, "W:undo-K" its compensation. A colon is
// not allowed in configured names, so these never collide with them.
const (
	stepMark = ":step-"
	undoMark = ":undo-"
)

// StepRoute names the implicit route of step k of workflow route w.
func StepRoute(w string, k int) string { return w + stepMark + strconv.Itoa(k) }

// UndoRoute names the implicit route of the compensation of step k.
func UndoRoute(w string, k int) string { return w + undoMark + strconv.Itoa(k) }

// Route returns the route of that name: a configured one, or an implicit
// one (notices to an endpoint, a workflow's step). Nil if there is none.
func (t *Topology) Route(name string) *Route {
	if r := t.Routes[name]; r != nil {
		return r
	}
	if t.implicit == nil || IsNoticeRoute(name) {
		return t.makeImplicit(name)
	}
	return t.implicit[name]
}

// makeImplicit makes the implicit route of that name, or nil.
func (t *Topology) makeImplicit(name string) *Route {
	if ep, ok := noticeEndpoint(name); ok && t.Endpoints[ep] != nil {
		return &Route{Name: name, Endpoints: []string{ep}, Strategy: StrategySingle, OrderedOnFailure: OrderedBlock}
	}
	return t.workflowRoute(name)
}

// workflowRoute resolves the name of a workflow's implicit route, or nil.
func (t *Topology) workflowRoute(name string) *Route {
	i := strings.LastIndexByte(name, ':')
	if i < 0 {
		return nil
	}
	undo := strings.HasPrefix(name[i:], undoMark)
	if !undo && !strings.HasPrefix(name[i:], stepMark) {
		return nil
	}
	w := t.Routes[name[:i]]
	if w == nil || w.Workflow == nil {
		return nil
	}
	k, err := strconv.Atoi(name[i+len(stepMark):])
	if err != nil || k < 1 || k > len(w.Workflow.Steps) {
		return nil
	}
	ep := w.Workflow.Steps[k-1].Endpoint
	if undo {
		ep = w.Workflow.Steps[k-1].Compensate
		if ep == "" {
			return nil
		}
	}
	return &Route{Name: name, Endpoints: []string{ep}, Strategy: StrategySingle, OrderedOnFailure: w.OrderedOnFailure}
}

// ImplicitRoutes lists the routes that are not configured but carry
// messages: the notices to each endpoint that policies escalate to, and the
// steps and compensations of the workflow routes.
func (t *Topology) ImplicitRoutes() []*Route {
	var out []*Route
	seen := map[string]bool{}
	for _, p := range t.Policies {
		for _, esc := range p.Escalate {
			if name := NoticeRoute(esc.Notify); !seen[name] {
				seen[name] = true
				if r := t.Route(name); r != nil {
					out = append(out, r)
				}
			}
		}
	}
	for _, w := range t.Routes {
		if w.Workflow == nil {
			continue
		}
		for k, s := range w.Workflow.Steps {
			out = append(out, t.workflowRoute(StepRoute(w.Name, k+1)))
			if s.Compensate != "" {
				out = append(out, t.workflowRoute(UndoRoute(w.Name, k+1)))
			}
		}
	}
	return out
}

// PolicyFor returns the policy that governs m's current round: its type's,
// or while it undoes the steps of a failed workflow, the compensation
// policy of the workflow.
func (t *Topology) PolicyFor(m *Message) *Policy {
	if m.FailedStep > 0 {
		if w := t.Routes[m.Workflow]; w != nil && w.Workflow != nil && w.Workflow.CompensationPolicy != "" {
			if p := t.Policies[w.Workflow.CompensationPolicy]; p != nil {
				return p
			}
		}
		return DefaultCompensationPolicy()
	}
	return t.Policy(m.Type)
}

// StartWorkflow puts a message accepted for a workflow route on the route
// of its first step. Other messages are left as they are.
func (t *Topology) StartWorkflow(m *Message) {
	w := t.Routes[m.Route]
	if w == nil || w.Workflow == nil || len(w.Workflow.Steps) == 0 {
		return
	}
	m.Workflow, m.Step, m.FailedStep = w.Name, 1, 0
	m.Route = StepRoute(w.Name, 1)
}

// inWorkflow reports whether m goes through the steps of a workflow route
// that is still configured.
func (t *Topology) inWorkflow(m *Message) bool {
	if m.Workflow == "" {
		return false
	}
	w := t.Routes[m.Workflow]
	return w != nil && w.Workflow != nil && m.Step >= 1 && m.Step <= len(w.Workflow.Steps)
}

// AfterStep decides what becomes of a message of a workflow after an
// attempt of its current step or compensation. Its round goes by
// Topology.PolicyFor; its type's policy escalates (and hears of a
// compensation that failed). The workflow route must exist.
//
// A step delivered moves the message to the next step, or delivers it after
// the last. A step that fails for good (a permanent class, its policy
// exhausted) starts the compensation of the steps done before it, in
// reverse order, each retried per the compensation policy; when none is
// left the message is suspended as compensated, and when one runs out as
// compensation_failed.
func AfterStep(m *Message, t *Topology, e *Endpoint, r Result, now time.Time, rnd float64) (*Message, []*Message) {
	w, p := t.Routes[m.Workflow], t.PolicyFor(m)
	n := attemptEnded(m, e, now)
	if r.Delivered() {
		return stepDelivered(&n, w, r, now), nil
	}
	n.LastError, n.LastClass = r.Error, r.Class
	undoing := n.FailedStep > 0
	switch {
	case !undoing && e.Permanent(r.Class):
		return stepFailed(&n, w, ReasonRejected, now)
	case n.Attempts >= p.AttemptLimit():
		if undoing {
			return compensationFailed(&n, w, t, now)
		}
		return stepFailed(&n, w, ReasonExhausted, now)
	}
	n.State = StateQueued
	n.NextAttemptAt = now.Add(p.NextDelay(n.Attempts, rnd, r.RetryAfter))
	notices := stepTimers(&n, w, t, now)
	return &n, notices
}

// stepDelivered moves a message on after its current delivery succeeded.
func stepDelivered(n *Message, w *Route, r Result, now time.Time) *Message {
	steps := w.Workflow.Steps
	if n.FailedStep == 0 {
		resp := r.Body
		if resp == "" {
			resp = r.Response
		}
		n.StepResponses = cloneResponses(n.StepResponses)
		n.StepResponses[n.Step] = clipResponse(resp)
		if n.Step >= len(steps) {
			n.State, n.Reason = StateDelivered, ""
			n.NextAttemptAt, n.TimerAt, n.FinishedAt = time.Time{}, time.Time{}, now
			return n
		}
		nextRound(n, StepRoute(w.Name, n.Step+1), n.Step+1, now)
		return n
	}
	// The compensation of n.Step is done: the next one down, if any.
	if j := undoable(steps, n.Step-1); j > 0 {
		nextRound(n, UndoRoute(w.Name, j), j, now)
		return n
	}
	n.State, n.Reason = StateSuspended, ReasonCompensated
	// The step's own failure is in its attempts: LastError was since
	// overwritten by the compensations' tries.
	n.LastError = fmt.Sprintf("step %d of %d failed for good and the steps before it were undone (its attempts say why)",
		n.FailedStep, len(steps))
	n.NextAttemptAt, n.TimerAt, n.FinishedAt = time.Time{}, time.Time{}, now
	leaveOrder(n)
	return n
}

// leaveOrder takes a workflow message that has ended for good out of its
// ordering key's order: it holds up nothing behind it (on its last step's
// route the key's next workflow has its own steps to undo).
func leaveOrder(n *Message) {
	n.OrderSkipped = n.OrderingKey != ""
}

// stepFailed starts the compensation of the steps done before the failed
// one, or, when none of them can be undone, suspends the message as
// compensated (nothing is left done).
func stepFailed(n *Message, w *Route, reason Reason, now time.Time) (*Message, []*Message) {
	steps := w.Workflow.Steps
	n.FailedStep = n.Step
	n.LastError = fmt.Sprintf("%s: %s", reason, n.LastError)
	if j := undoable(steps, n.Step-1); j > 0 {
		nextRound(n, UndoRoute(w.Name, j), j, now)
		return n, nil
	}
	n.State, n.Reason = StateSuspended, ReasonCompensated
	n.LastError = fmt.Sprintf("step %d of %d failed for good (%s); no step before it had anything to undo",
		n.FailedStep, len(steps), n.LastError)
	n.NextAttemptAt, n.TimerAt, n.FinishedAt = time.Time{}, time.Time{}, now
	leaveOrder(n)
	return n, nil
}

// compensationFailed suspends a message whose compensation ran out, and
// tells the endpoints its type's policy escalates to.
func compensationFailed(n *Message, w *Route, t *Topology, now time.Time) (*Message, []*Message) {
	n.LastError = fmt.Sprintf("the compensation of step %d of %d ran out after %d attempts: %s (step %d had failed for good)",
		n.Step, len(w.Workflow.Steps), n.Attempts, n.LastError, n.FailedStep)
	notices := suspend(n, t.Policy(n.Type), ReasonCompensationFailed, now)
	leaveOrder(n)
	return n, notices
}

// AfterStepAbandoned is AfterAbandon for a message of a workflow: a step
// that keeps losing its worker fails for good (its steps done are undone);
// a compensation that does ends as compensation_failed.
func AfterStepAbandoned(m *Message, t *Topology, now time.Time) (*Message, []*Message) {
	w := t.Routes[m.Workflow]
	n, poison := abandoned(m, now)
	if !poison {
		n.State, n.NextAttemptAt = StateQueued, now
		return &n, nil
	}
	if n.FailedStep > 0 {
		return compensationFailed(&n, w, t, now)
	}
	return stepFailed(&n, w, ReasonPoison, now)
}

// OnStepTimer is OnTimer for a message of a workflow.
func OnStepTimer(m *Message, t *Topology, now time.Time) (next *Message, notices []*Message, changed bool) {
	return onTimer(m, now, func(n *Message) []*Message { return stepTimers(n, t.Routes[m.Workflow], t, now) })
}

// stepTimers fires what is due of a retrying step: its max_age ends the
// step (a forward step fails for good, a compensation ran out), the
// sender's expires_at only a forward step; escalations as for any message.
func stepTimers(n *Message, w *Route, t *Topology, now time.Time) []*Message {
	p, typePolicy := t.PolicyFor(n), t.Policy(n.Type)
	undoing := n.FailedStep > 0
	if !undoing && !n.ExpiresAt.IsZero() && !now.Before(n.ExpiresAt) {
		n.LastError = joinError(n.LastError, "expired: past its expires_at "+n.ExpiresAt.UTC().Format(time.RFC3339))
		_, notices := stepFailed(n, w, ReasonExpired, now)
		return notices
	}
	// A step waiting for its ordering key has not started its round: as
	// for any message (timers), max_age counts from its promotion.
	if p.MaxAge > 0 && !n.Waiting() && !now.Before(n.RoundStartedAt.Add(p.MaxAge)) {
		n.LastError = joinError(n.LastError, "not done within max_age "+p.MaxAge.String())
		if undoing {
			_, notices := compensationFailed(n, w, t, now)
			return notices
		}
		_, notices := stepFailed(n, w, ReasonExpired, now)
		return notices
	}
	notices := escalate(n, typePolicy, now, func() string {
		return fmt.Sprintf("message %s (%s, workflow %s, step %d) is not done", n.ID, n.Type, n.Workflow, n.Step)
	})
	n.TimerAt = stepTimer(n, p, typePolicy)
	return notices
}

// stepTimer is the next time-driven event of a workflow message.
func stepTimer(n *Message, p, typePolicy *Policy) time.Time {
	var next time.Time
	consider := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if n.FailedStep == 0 {
		consider(n.ExpiresAt)
	}
	if p.MaxAge > 0 && !n.Waiting() {
		consider(n.RoundStartedAt.Add(p.MaxAge))
	}
	if n.Escalated < len(typePolicy.Escalate) {
		consider(n.CreatedAt.Add(typePolicy.Escalate[n.Escalated].After))
	}
	return next
}

// nextRound puts n on route for step k, due now, with a fresh round. Its
// timer is due at once, so that the timers of the new round (by its
// policy) are worked out.
func nextRound(n *Message, route string, k int, now time.Time) {
	n.Route, n.Step = route, k
	n.State, n.Reason = StateQueued, ""
	n.Attempts, n.Abandoned = 0, 0
	n.RoundStartedAt, n.NextAttemptAt, n.TimerAt = now, now, now
}

// undoable returns the highest step from k down that has a compensation,
// or 0.
func undoable(steps []WorkflowStep, k int) int {
	for ; k >= 1; k-- {
		if steps[k-1].Compensate != "" {
			return k
		}
	}
	return 0
}

func cloneResponses(m map[int]string) map[int]string {
	out := make(map[int]string, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// clipResponse bounds a kept response, at a character's start so that a
// cut response stays valid text.
func clipResponse(s string) string {
	if len(s) <= MaxStepResponse {
		return s
	}
	cut := MaxStepResponse
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// StepState says where one step of a workflow message stands.
type StepState string

// The states of a workflow's steps.
const (
	StepPending     StepState = "pending"      // not reached
	StepRunning     StepState = "running"      // being delivered, or retrying
	StepDone        StepState = "done"         // delivered
	StepFailed      StepState = "failed"       // failed for good: the steps before it are undone
	StepUndoing     StepState = "undoing"      // its compensation is being delivered, or retrying
	StepUndone      StepState = "undone"       // its compensation was delivered
	StepUndoFailed  StepState = "undo_failed"  // its compensation ran out
	StepNotUndoable StepState = "not_undoable" // done, and has no compensation
)

// StepStates tells, for each step of w, where m stands: what an operator
// looks at to see which step is left in which state.
func StepStates(m *Message, w *Workflow) []StepState {
	out := make([]StepState, len(w.Steps))
	for i := range out {
		k := i + 1
		switch {
		case m.FailedStep == 0 && m.State == StateDelivered:
			out[i] = StepDone
		case m.FailedStep == 0 && k < m.Step:
			out[i] = StepDone
		case m.FailedStep == 0 && k == m.Step:
			out[i] = StepRunning
			if m.State == StateSuspended || m.State == StateDiscarded {
				out[i] = StepFailed
			}
		case m.FailedStep == 0:
			out[i] = StepPending
		case k == m.FailedStep:
			out[i] = StepFailed
		case k > m.FailedStep:
			out[i] = StepPending
		case w.Steps[i].Compensate == "":
			out[i] = StepNotUndoable
		case k > m.Step || k == m.Step && m.Reason == ReasonCompensated:
			out[i] = StepUndone
		case k == m.Step && m.Reason == ReasonCompensationFailed:
			out[i] = StepUndoFailed
		case k == m.Step:
			out[i] = StepUndoing
		default:
			out[i] = StepDone
		}
	}
	return out
}

// StepContext returns what the delivery of m's current step carries, or nil
// for a message that is not in a workflow.
func (t *Topology) StepContext(m *Message) *StepContext {
	if !t.inWorkflow(m) {
		return nil
	}
	w := t.Routes[m.Workflow].Workflow
	return &StepContext{Step: m.Step, Steps: len(w.Steps), Compensate: m.FailedStep > 0, Responses: m.StepResponses, Envelope: w.Envelope}
}

// CompensatedConflict is the error of a resubmit of a compensated message,
// which stores refuse: every step it did was undone, and doing it again is
// a new transaction.
func CompensatedConflict(id string) error {
	return Errorf(CodeConflict, "message %s is compensated: every step it did was undone; send it again as a new message to run the workflow anew", id)
}
