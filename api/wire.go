package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	courier "github.com/courier-gw/courier"
)

// IngestRequest is the body of an ingest (docs/design.md §7). Exactly one of
// Payload and PayloadBase64 is set.
type IngestRequest struct {
	ID            string            `json:"id,omitempty"`
	Type          string            `json:"type"`
	Route         string            `json:"route"`
	Payload       json.RawMessage   `json:"payload,omitempty"`
	PayloadBase64 *string           `json:"payload_base64,omitempty"`
	ContentType   string            `json:"content_type,omitempty"`
	Headers       map[string]string `json:"headers,omitempty"`
	OrderingKey   string            `json:"ordering_key,omitempty"`
	Priority      *int              `json:"priority,omitempty"`
	DeliverAfter  *time.Time        `json:"deliver_after,omitempty"`
	ExpiresAt     *time.Time        `json:"expires_at,omitempty"`
	// Recipient is who the message is for; required on a route that looks
	// up its endpoint in a registry.
	Recipient string `json:"recipient,omitempty"`
}

// BatchRequest is the body of POST /v1/messages/batch.
type BatchRequest struct {
	Messages []json.RawMessage `json:"messages"`
}

// BatchResponse answers a batch: one result per item, in input order.
type BatchResponse struct {
	Results []BatchResult `json:"results"`
}

// BatchResult is the outcome of one batch item. Status is the HTTP status the
// item would have had on its own (201, 200, 409, 400, 413, 422).
type BatchResult struct {
	ID     string     `json:"id,omitempty"`
	Status int        `json:"status"`
	Error  *ErrorInfo `json:"error,omitempty"`
}

// ErrorBody is every error response: {"error": {"code", "message"}}.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo is the code and message of an error.
type ErrorInfo struct {
	Code    courier.Code `json:"code"`
	Message string       `json:"message"`
}

// Message is a message as the API shows it.
type Message struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Route string `json:"route,omitempty"` // empty for a published message: its deliveries have theirs
	// Subscription names the subscription of a delivery of a published
	// message, where one delivery is shown (a list, a delivery read).
	Subscription string `json:"subscription,omitempty"`
	Progress
	Priority    int    `json:"priority"`
	OrderingKey string `json:"ordering_key,omitempty"`
	// Sequence is the message's number among the messages of its ordering
	// key on the route it was ingested to, and PreviousID the id of the one
	// numbered before it: what the receiver gets as Courier-Sequence and
	// Courier-Previous-Id. Omitted for a message without a number.
	Sequence   int64  `json:"sequence,omitempty"`
	PreviousID string `json:"previous_id,omitempty"`
	Recipient  string `json:"recipient,omitempty"`
	// Ordering tells where a message with an ordering key stands in its
	// key's order: "waiting" behind an earlier message of the key (shown
	// whole as WaitingFor), "holds_key" (suspended: the key waits until it
	// is resubmitted or discarded), or "skipped" (it left the order and is
	// delivered on its own). Empty otherwise.
	Ordering     string            `json:"ordering,omitempty"`
	WaitingFor   *KeyHolder        `json:"waiting_for,omitempty"`
	ContentType  string            `json:"content_type"`
	Headers      map[string]string `json:"headers,omitempty"`
	Size         int               `json:"size"`
	DeliverAfter *time.Time        `json:"deliver_after,omitempty"`
	ExpiresAt    *time.Time        `json:"expires_at,omitempty"`
	CreatedAt    time.Time         `json:"created_at"`
	UpdatedAt    time.Time         `json:"updated_at"`
	FinishedAt   *time.Time        `json:"finished_at,omitempty"`
	// The payload, only where one message is shown in full: as JSON when it
	// is a JSON value, else base64.
	Payload       json.RawMessage `json:"payload,omitempty"`
	PayloadBase64 string          `json:"payload_base64,omitempty"`
	// PayloadURL is where a payload too large to show here (over 1 MiB,
	// kept as a blob) is read, streamed; PayloadSHA256 is its hex SHA-256.
	PayloadURL    string `json:"payload_url,omitempty"`
	PayloadSHA256 string `json:"payload_sha256,omitempty"`
	// Erased is the tombstone of a message whose payload was erased on
	// request (courier.Erasure): shown instead of the payload.
	Erased *Erased `json:"erased,omitempty"`
	// The operator actions on it, only where one message is shown in full.
	Actions []ActionView `json:"actions,omitempty"`
	// Workflow tells where a message of a workflow route stands; nil for
	// other messages.
	Workflow *WorkflowView `json:"workflow,omitempty"`
	// Deliveries are a published message's, by subscription (docs/design.md §14);
	// its State sums them up (courier.Summary).
	Deliveries []Delivery `json:"deliveries,omitempty"`
}

// Progress is where a message, or one delivery of a published message,
// stands on its way: its fields are those of the message or delivery
// that shows it.
type Progress struct {
	State  courier.State  `json:"state"`
	Reason courier.Reason `json:"reason,omitempty"`
	// Held says what keeps a queued message from going at NextAttemptAt:
	// the endpoints of its route are suspended or switched off
	// (courier.Held). Nil when nothing holds it.
	Held *Hold `json:"held,omitempty"`
	// Attempts counts the attempts of the current round: since ingest, or
	// since the latest resubmit or resend. AttemptsTotal counts every
	// attempt it had, across rounds (its history lists them all); it is
	// given only where one message is shown in full.
	Attempts      int        `json:"attempts"`
	AttemptsTotal *int       `json:"attempts_total,omitempty"`
	ResubmitCount int        `json:"resubmit_count"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	Endpoint      string     `json:"endpoint,omitempty"`
	// LastError and LastClass are those of the latest failed attempt;
	// omitted once the message is delivered (courier.ShownError).
	LastError string `json:"last_error,omitempty"`
	LastClass string `json:"last_class,omitempty"`
}

// progressOf shows where m, a message or a delivery, stands; Held and
// AttemptsTotal are left to those who show them.
func progressOf(m *courier.Message) Progress {
	lastError, lastClass := courier.ShownError(m)
	return Progress{State: m.State, Reason: m.Reason, Attempts: m.Attempts, ResubmitCount: m.ResubmitCount,
		NextAttemptAt: timePtr(m.NextAttemptAt), Endpoint: m.Endpoint, LastError: lastError, LastClass: string(lastClass)}
}

// Erased says when, by whom and why a message's payload was erased.
type Erased struct {
	At     time.Time `json:"at"`
	By     string    `json:"by"`
	Reason string    `json:"reason,omitempty"`
}

// EraseRequest is the optional body of an erasure: why it is made (a
// data-protection request's reference, say), kept with the tombstone and
// in the audit log.
type EraseRequest struct {
	Reason string `json:"reason,omitempty"`
}

// Key is the message's id, or for one delivery of a published message
// "id/subscription": what the client's calls take (courier.Message.Key).
func (m Message) Key() string { return courier.DeliveryKey(m.ID, m.Subscription) }

// Delivery is one subscription's delivery of a published message: each
// has the state, attempts and suspended entry a message sent to a route
// has, and is read, resubmitted and discarded on its own at
// /v1/messages/{id}/deliveries/{subscription}.
type Delivery struct {
	Subscription string `json:"subscription"`
	Route        string `json:"route"`
	Progress
	Ordering string `json:"ordering,omitempty"`
	// Sequence and PreviousID are the delivery's, numbered on its route
	// (Message.Sequence).
	Sequence   int64      `json:"sequence,omitempty"`
	PreviousID string     `json:"previous_id,omitempty"`
	UpdatedAt  time.Time  `json:"updated_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// WorkflowView is where a message stands in the workflow of its workflow
// route (docs/design.md §13).
type WorkflowView struct {
	Route string `json:"route"` // the workflow route; the message's Route is the implicit route of its step
	Step  int    `json:"step"`  // the step being delivered, or while compensating, undone
	// Steps counts the steps of the workflow; 0 when its route is no longer
	// configured as a workflow.
	Steps int `json:"steps,omitempty"`
	// Compensating: a step failed for good (FailedStep) and the steps
	// before it are being undone. It is false once that is over, as
	// compensated or compensation_failed.
	Compensating bool `json:"compensating"`
	FailedStep   int  `json:"failed_step,omitempty"`
	// StepsDetail is every step and where it stands, only where one message
	// is shown in full and its workflow route is configured.
	StepsDetail []StepView `json:"steps_detail,omitempty"`
}

// StepView is one step of a workflow message.
type StepView struct {
	N          int               `json:"n"`
	Endpoint   string            `json:"endpoint"`
	Compensate string            `json:"compensate,omitempty"` // the endpoint that undoes it; empty for none
	State      courier.StepState `json:"state"`
	// Response is what the step's endpoint answered when it was delivered,
	// as kept for the later steps: a JSON value when it is JSON, else a JSON
	// string. Empty for none.
	Response json.RawMessage `json:"response,omitempty"`
}

// ResponseText returns the step's response as text: a JSON string's
// content, or the JSON value itself.
func (s StepView) ResponseText() string {
	var text string
	if json.Unmarshal(s.Response, &text) == nil {
		return text
	}
	return string(s.Response)
}

// Hold is what holds a queued message (courier.Held): the endpoint of its
// route expected back first, and the others that hold it too.
type Hold struct {
	Endpoint string              `json:"endpoint"`
	State    courier.HealthState `json:"state"` // suspended or off
	// Until is when a suspended endpoint's probe may go; it may have
	// passed while the probe is under way.
	Until *time.Time `json:"until,omitempty"`
	// Since is when the endpoint's health last changed; By, for an
	// endpoint switched off, who switched it off, when it is known.
	Since *time.Time `json:"since,omitempty"`
	By    string     `json:"by,omitempty"`
	// Also are the other endpoints of its route that hold it (a failover
	// route's backups), suspended or off.
	Also []string `json:"also,omitempty"`
}

// KeyHolder is the message that a waiting message's key waits for.
type KeyHolder struct {
	ID        string         `json:"id"`
	State     courier.State  `json:"state"`
	Reason    courier.Reason `json:"reason,omitempty"`
	LastError string         `json:"last_error,omitempty"`
}

// The values of Message.Ordering.
const (
	OrderingWaiting  = "waiting"
	OrderingHoldsKey = "holds_key"
	OrderingSkipped  = "skipped"
)

// MessageList is a page of messages; NextCursor continues it.
type MessageList struct {
	Messages   []Message `json:"messages"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// Attempt is one delivery attempt as the API shows it.
type Attempt struct {
	// Subscription names the delivery of a published message the attempt
	// was made for.
	Subscription string             `json:"subscription,omitempty"`
	N            int                `json:"n"`
	Endpoint     string             `json:"endpoint"`
	Route        string             `json:"route"`
	StartedAt    time.Time          `json:"started_at"`
	DurationMS   float64            `json:"duration_ms"`
	Outcome      courier.Outcome    `json:"outcome"`
	Class        courier.ErrorClass `json:"class,omitempty"`
	Status       int                `json:"status,omitempty"`
	Error        string             `json:"error,omitempty"`
	Response     string             `json:"response,omitempty"`
}

// AttemptList is every attempt of a message, oldest first.
type AttemptList struct {
	Attempts []Attempt `json:"attempts"`
}

// ResubmitRequest is the optional body of a resubmit.
type ResubmitRequest struct {
	Route string `json:"route,omitempty"`
}

// toMessage shows a message; full shows it in full, with its payload and
// the steps of its workflow, as where it is shown on its own. t is the
// topology in force.
func toMessage(m *courier.Message, t *courier.Topology, full bool) Message {
	v := Message{
		ID: m.ID, Type: m.Type, Route: m.Route, Subscription: m.Subscription, Progress: progressOf(m),
		Priority: m.Priority, OrderingKey: m.OrderingKey, Sequence: m.Sequence, PreviousID: m.PreviousID,
		Recipient: m.Recipient, ContentType: m.ContentType,
		Headers: m.Headers, Size: m.Size, DeliverAfter: timePtr(m.DeliverAfter),
		ExpiresAt: timePtr(m.ExpiresAt), CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		FinishedAt: timePtr(m.FinishedAt),
	}
	v.Ordering = ordering(m)
	if m.Erased != nil {
		v.Erased = &Erased{At: m.Erased.At, By: m.Erased.By, Reason: m.Erased.Reason}
	}
	switch {
	case m.Erased != nil: // nothing left to show
	case full && m.Digest != "":
		v.PayloadURL, v.PayloadSHA256 = "/v1/messages/"+url.PathEscape(m.ID)+"/payload", m.Digest
	case full:
		if json.Valid(m.Payload) {
			v.Payload = json.RawMessage(m.Payload)
		} else {
			v.PayloadBase64 = base64.StdEncoding.EncodeToString(m.Payload)
		}
	}
	if m.Workflow != "" {
		v.Workflow = toWorkflow(m, t, full)
	}
	return v
}

// ordering is where a message with an ordering key stands in its key's
// order (Message.Ordering).
func ordering(m *courier.Message) string {
	switch {
	case m.Waiting():
		return OrderingWaiting
	case m.HoldsKey():
		return OrderingHoldsKey
	case m.OrderSkipped:
		return OrderingSkipped
	}
	return ""
}

// toPublished shows a published message: what it is, from its first
// delivery (they share it), with the summary state and every delivery.
// A message sent to a route by name is shown as itself.
func toPublished(ds []*courier.Message, t *courier.Topology, full bool) Message {
	if len(ds) == 1 && ds[0].Subscription == "" {
		return toMessage(ds[0], t, full)
	}
	v := toMessage(ds[0], t, full)
	v.Route, v.Subscription, v.Workflow = "", "", nil
	v.Sequence, v.PreviousID = 0, "" // each delivery's, on its route
	v.Reason, v.NextAttemptAt, v.Endpoint, v.LastError, v.LastClass, v.Ordering = "", nil, "", "", "", ""
	v.State, v.Attempts, v.ResubmitCount, v.FinishedAt = courier.Summary(ds), 0, 0, nil
	v.Deliveries = make([]Delivery, len(ds))
	for i, d := range ds {
		v.Attempts += d.Attempts
		v.ResubmitCount += d.ResubmitCount
		if d.UpdatedAt.After(v.UpdatedAt) {
			v.UpdatedAt = d.UpdatedAt
		}
		if v.State.Terminal() && (v.FinishedAt == nil || d.FinishedAt.After(*v.FinishedAt)) {
			v.FinishedAt = timePtr(d.FinishedAt)
		}
		v.Deliveries[i] = Delivery{Subscription: d.Subscription, Route: d.Route, Progress: progressOf(d), Ordering: ordering(d),
			Sequence: d.Sequence, PreviousID: d.PreviousID, UpdatedAt: d.UpdatedAt, FinishedAt: timePtr(d.FinishedAt)}
	}
	return v
}

// toWorkflow shows where a message stands in its workflow, with each step
// when detail is set. A workflow route that is gone (or no longer a
// workflow) leaves what the message itself holds.
func toWorkflow(m *courier.Message, t *courier.Topology, detail bool) *WorkflowView {
	v := &WorkflowView{Route: m.Workflow, Step: m.Step, FailedStep: m.FailedStep,
		Compensating: m.FailedStep > 0 && (m.State == courier.StateQueued || m.State == courier.StateInflight)}
	var w *courier.Workflow
	if r := t.Routes[m.Workflow]; r != nil {
		w = r.Workflow
	}
	if w == nil {
		return v
	}
	v.Steps = len(w.Steps)
	if !detail {
		return v
	}
	states := courier.StepStates(m, w)
	v.StepsDetail = make([]StepView, len(w.Steps))
	for i, s := range w.Steps {
		v.StepsDetail[i] = StepView{N: i + 1, Endpoint: s.Endpoint, Compensate: s.Compensate, State: states[i],
			Response: responseJSON(m.StepResponses[i+1])}
	}
	return v
}

// responseJSON is a step's response as JSON: itself, compacted, when it is
// a JSON value, else a JSON string; nil for none.
func responseJSON(resp string) json.RawMessage {
	if resp == "" {
		return nil
	}
	var b bytes.Buffer
	if json.Valid([]byte(resp)) && json.Compact(&b, []byte(resp)) == nil {
		return b.Bytes()
	}
	b.Reset()
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // as writeJSON writes the rest
	enc.Encode(resp)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

func toAttempt(a courier.Attempt) Attempt {
	return Attempt{
		Subscription: a.Subscription, N: a.N, Endpoint: a.Endpoint, Route: a.Route, StartedAt: a.StartedAt,
		DurationMS: float64(a.Duration.Microseconds()) / 1000, Outcome: a.Outcome, Class: a.Class,
		Status: a.Status, Error: a.Error, Response: a.Response,
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Filter selects messages for a bulk operation; empty fields match all.
type Filter struct {
	State         courier.State  `json:"state,omitempty"`
	Type          string         `json:"type,omitempty"`
	Route         string         `json:"route,omitempty"`
	Endpoint      string         `json:"endpoint,omitempty"`
	Subscription  string         `json:"subscription,omitempty"`
	Reason        courier.Reason `json:"reason,omitempty"`
	CreatedAfter  *time.Time     `json:"created_after,omitempty"`
	CreatedBefore *time.Time     `json:"created_before,omitempty"`
}

// BulkRequest is the body of POST /v1/messages/resubmit and /discard.
// OperationID, if given, makes the request repeatable and lets the caller
// watch its progress at /v1/operations/{id}.
type BulkRequest struct {
	Filter      Filter `json:"filter"`
	Route       string `json:"route,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
}

// Operation is a bulk operation and how far it got.
type Operation struct {
	ID    string             `json:"operation_id"`
	Kind  courier.ActionKind `json:"kind"`
	Count int                `json:"count"`
	Done  bool               `json:"done"`
	Who   string             `json:"who"`
	Route string             `json:"route,omitempty"`
	// Stopped says why the operation was ended before it was through (a
	// re-drive whose endpoint was suspended again).
	Stopped string `json:"stopped,omitempty"`
	// Tenant is the tenant an erasure (kind erase_tenant) erases.
	Tenant string `json:"tenant,omitempty"`
	// Progress is how far it got through the messages, from 0 to 1.
	Progress  float64     `json:"progress"`
	Replay    *ReplayView `json:"replay,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
}

// ReplayView is what a replay gives deliveries of, and to which
// subscription (Count counts the deliveries given).
type ReplayView struct {
	Subscription string    `json:"subscription"`
	Route        string    `json:"route"`
	Since        time.Time `json:"since"`
	Until        time.Time `json:"until"`
	Types        []string  `json:"types,omitempty"`
	Again        bool      `json:"again,omitempty"`
}

// ReplayRequest is the body of POST /v1/subscriptions/{name}/replay: the
// retained messages ingested from Since until Until (default now) that the
// subscription wants (of Types only, when given) get a delivery to it;
// with Again also those it had one of. OperationID makes the request
// repeatable.
type ReplayRequest struct {
	Since       *time.Time `json:"since"`
	Until       *time.Time `json:"until,omitempty"`
	Types       []string   `json:"types,omitempty"`
	Again       bool       `json:"again,omitempty"`
	OperationID string     `json:"operation_id,omitempty"`
}

func toOperation(op courier.BulkOp) Operation {
	v := Operation{ID: op.ID, Kind: op.Kind, Count: op.Count, Done: op.Done, Who: op.Who, Route: op.Route,
		Stopped: op.Stopped, CreatedAt: op.CreatedAt, UpdatedAt: op.UpdatedAt}
	switch {
	case op.Done:
		v.Progress = 1
	case op.End > 0:
		v.Progress = min(float64(op.Position)/float64(op.End), 1)
	}
	if op.Kind == courier.ActionEraseTenant {
		v.Tenant = op.Filter.Tenant
	}
	if r := op.Replay; r != nil {
		v.Replay = &ReplayView{Subscription: r.Subscription.Name, Route: r.Subscription.Route, Since: r.Since, Until: r.Until,
			Types: r.Types, Again: r.Again}
	}
	return v
}

// MessageFilter is the filter as the store takes it.
func (f Filter) MessageFilter() courier.MessageFilter {
	mf := courier.MessageFilter{State: f.State, Type: f.Type, Route: f.Route, Endpoint: f.Endpoint, Subscription: f.Subscription, Reason: f.Reason}
	if f.CreatedAfter != nil {
		mf.CreatedAfter = *f.CreatedAfter
	}
	if f.CreatedBefore != nil {
		mf.CreatedBefore = *f.CreatedBefore
	}
	return mf
}

// Endpoint is an endpoint's configuration essentials and its health.
type Endpoint struct {
	Name           string              `json:"name"`
	Transport      courier.Transport   `json:"transport"`
	Target         string              `json:"target,omitempty"` // where it delivers, without credentials
	State          courier.HealthState `json:"state"`
	SuspendedUntil *time.Time          `json:"suspended_until,omitempty"`
	Failures       int                 `json:"failures"`
	Suspensions    int                 `json:"suspensions"`
	HealthChanged  *time.Time          `json:"health_changed_at,omitempty"`
	InFlight       int                 `json:"in_flight"`          // on this node
	Queued         int                 `json:"queued"`             // on the routes that use it
	LastHour       map[string]int      `json:"last_hour_outcomes"` // on this node, by "delivered" or class
	Timeout        string              `json:"timeout"`
	MaxConcurrency int                 `json:"max_concurrency"` // with concurrency_auto, the ceiling
	// ConcurrencyAuto is max_concurrency: auto; ConcurrencyLimit is the
	// attempts this node lets be in flight now: max_concurrency, or with
	// auto the limit it has learnt from the endpoint's answers.
	ConcurrencyAuto  bool         `json:"concurrency_auto"`
	ConcurrencyLimit int          `json:"concurrency_limit"`
	MinInterval      string       `json:"min_interval,omitempty"`
	Rate             string       `json:"rate,omitempty"`
	Actions          []ActionView `json:"actions,omitempty"`
	// Auth is how it authenticates to its receiver; absent for none.
	Auth *EndpointAuth `json:"auth,omitempty"`
	// Spec is the endpoint's fields as in the configuration file (secrets
	// shown as "set"), and Version the topology version that last wrote
	// it (0 when the file holds the topology): its ETag for If-Match.
	Spec      json.RawMessage `json:"spec,omitempty"`
	Version   int64           `json:"version,omitempty"`
	UpdatedAt *time.Time      `json:"updated_at,omitempty"`
	UpdatedBy string          `json:"updated_by,omitempty"`
}

// EndpointList is every configured endpoint.
type EndpointList struct {
	Endpoints []Endpoint `json:"endpoints"`
}

// ActionView is an operator action as the API shows it.
type ActionView struct {
	At     time.Time          `json:"at"`
	Who    string             `json:"who"`
	Kind   courier.ActionKind `json:"kind"`
	Detail string             `json:"detail,omitempty"`
}

func toEndpoint(e *courier.Endpoint, h courier.EndpointHealth) Endpoint {
	v := Endpoint{Name: e.Name, Transport: e.Transport, Target: target(e), State: h.State, Failures: h.Failures,
		Suspensions: h.Suspensions, Timeout: e.Timeout.String(), MaxConcurrency: e.MaxConcurrency,
		ConcurrencyAuto: e.AutoConcurrency, ConcurrencyLimit: max(e.MaxConcurrency, 1)}
	if v.State == "" {
		v.State = courier.HealthActive
	}
	if h.State == courier.HealthSuspended {
		v.SuspendedUntil = timePtr(h.SuspendedUntil)
	}
	v.HealthChanged = timePtr(h.UpdatedAt)
	if e.MinInterval > 0 {
		v.MinInterval = e.MinInterval.String()
	}
	if !e.Rate.Unlimited() {
		v.Rate = e.Rate.String()
	}
	return v
}

// target names where an endpoint delivers, without the passwords and query
// values of URLs: the API never shows secrets.
func target(e *courier.Endpoint) string { return e.Redacted().Target() }

// WorkflowStands says in a few words where a message of a workflow stands.
func (m *Message) WorkflowStands() string {
	w := m.Workflow
	step := fmt.Sprintf("step %d", w.Step)
	if w.Steps > 0 {
		step += fmt.Sprintf(" of %d", w.Steps)
	}
	switch {
	case w.FailedStep == 0 && m.State == courier.StateDelivered:
		return "every step done"
	case w.FailedStep == 0 && (m.State == courier.StateQueued || m.State == courier.StateInflight):
		return step
	case w.FailedStep == 0:
		return fmt.Sprintf("stopped at %s (%s)", step, m.State)
	case m.Reason == courier.ReasonCompensated:
		return fmt.Sprintf("compensated after step %d failed", w.FailedStep)
	case m.Reason == courier.ReasonCompensationFailed:
		return fmt.Sprintf("compensation failed at step %d after step %d failed", w.Step, w.FailedStep)
	case w.Compensating:
		return fmt.Sprintf("compensating after step %d failed: undoing step %d", w.FailedStep, w.Step)
	default:
		return fmt.Sprintf("stopped undoing step %d after step %d failed (%s)", w.Step, w.FailedStep, m.State)
	}
}
