package courier

import (
	"context"
	"maps"
	"time"
)

// Store keeps messages, their attempts and operator actions on stable
// storage. It persists and queries; the decisions are the root package's.
// Every implementation passes storetest.Run.
type Store interface {
	// Ingest stores new messages, each prepared by Accept (or, for an item a
	// receive location cannot use, already suspended with its reason and
	// error). When Ingest returns
	// without error, every message reported IngestCreated is on stable
	// storage. Results are in input order. A message whose id exists already
	// is reported IngestExists (same Hash) or IngestConflict (other content),
	// with the stored message, and changes nothing. A created message that
	// waits for an earlier message of its ordering key has its NextAttemptAt
	// set to zero, as stored, so that its sender is told what a read says.
	//
	// A published message comes as its deliveries (Topology.Publish), one
	// after another: the same id, each with its Subscription. The store
	// keeps its payload once and creates every delivery or, when a message
	// with the id exists already (published or not), none: then each of
	// them is reported as the first stored delivery compares.
	//
	// A tenant with caps (SetTenantQuotas) is checked in the same
	// transaction, under a lock of the tenant that every node's ingest for
	// it takes: when the messages the call creates take the tenant past a
	// cap, nothing of the call is stored and the error is CheckQuotas'. A
	// call that creates nothing (a repeat) is never refused.
	Ingest(ctx context.Context, msgs []*Message) ([]IngestResult, error)

	// SetTenantQuotas gives the store the tenants' quotas, by tenant: the
	// server calls it with the topology's at start and at every change of
	// the topology. Ingest checks the caps of the tenants given
	// (Quotas.Capped); a tenant not given, or without caps, is not checked
	// and costs its ingests nothing. The use is counted for every tenant
	// whatever the quotas, by the store's every write (docs/design.md §20).
	SetTenantQuotas(quotas map[string]Quotas)

	// TenantUsage returns the use of every tenant that has messages not yet
	// finished, by tenant name. Its cost grows with the number of tenants,
	// not of messages.
	TenantUsage(ctx context.Context) ([]TenantUsage, error)

	// Blobs is where the store keeps payloads larger than InlineMax; nil
	// when it keeps none.
	Blobs() Blobs

	// ReferencedBlobs reports which of refs a stored message refers to
	// (Blobs.Sweep asks it).
	ReferencedBlobs(ctx context.Context, refs []string) (map[string]bool, error)

	// Secret returns the named secret of the store's own, 32 random bytes
	// made at the first call and the same for every node ever after (the
	// key that signs claim-check URLs is one).
	Secret(ctx context.Context, name string) ([]byte, error)

	// Message returns one message, or one delivery of a published message,
	// by its Key, or an error with CodeNotFound.
	Message(ctx context.Context, key string) (*Message, error)

	// Deliveries returns every delivery of a message by subscription name:
	// the message itself when it was sent to a route by name. CodeNotFound
	// when there is none.
	Deliveries(ctx context.Context, id string) ([]*Message, error)

	// Messages lists messages matching the filter, newest first.
	Messages(ctx context.Context, f MessageFilter) (MessagePage, error)

	// Attempts returns every attempt of a message or delivery (by Key),
	// oldest first, or an error with CodeNotFound when it does not exist.
	Attempts(ctx context.Context, key string) ([]Attempt, error)

	// Discard changes a message or delivery (by Key) as the root's Discard
	// decides, reading it and writing the change in one transaction, and
	// records the action.
	Discard(ctx context.Context, key string, a Action) (*Message, error)

	// Resend changes a message or delivery (by Key) as the root's Resend
	// decides (delivered again, in a new round at a.At), reading it and
	// writing the change in one transaction, and records the action.
	Resend(ctx context.Context, key string, a Action) (*Message, error)

	// Resubmit changes a message or delivery (by Key) as the root's
	// Resubmit decides (a new round at a.At, optionally on another route),
	// reading it and writing the change in one transaction, and records
	// the action.
	Resubmit(ctx context.Context, key, route string, a Action) (*Message, error)

	// KeyHolder returns the message of an ordering key on a route that the
	// key's waiting messages wait for: the active one (due, in flight or
	// retrying), else the oldest suspended one that holds the key (see
	// Message.HoldsKey). CodeNotFound when none does.
	KeyHolder(ctx context.Context, route, key string) (*Message, error)

	// Actions returns the actions recorded on one subject, oldest first:
	// operator actions, and changes of topology objects of that name.
	Actions(ctx context.Context, subject string) ([]Action, error)

	// RecordAction records an action that changes nothing else, such as a
	// receiver's fetch of a claimed payload (ActionClaimFetched), so that
	// it shows with the subject's other actions and in the audit log.
	RecordAction(ctx context.Context, a Action) error

	// Purge deletes up to limit terminal messages or deliveries (with
	// their attempts and actions) that finished before p.Before, of the
	// tenants p names, and reports how many it deleted. A published
	// message's payload goes with the last of its deliveries. A purge of
	// every tenant (p.Tenant empty) takes up to limit operational events
	// recorded before p.Before too.
	Purge(ctx context.Context, p Purge, limit int) (int, error)

	// ClaimDue leases due queued messages for delivery: for each route quota,
	// up to Limit messages of that route whose NextAttemptAt has come, highest
	// priority first and, within a priority, the longest due first.
	//
	// Messages of one route with one OrderingKey are claimable one at a
	// time, in ingest order (see KeyGroup). Every write of a store keeps
	// their order as the root package decides it, under the lock of the
	// key: a message that comes into its key's group (ingest, resubmit, a
	// move from another route) waits unless the group Admits it, and after
	// any change of a member (whichever way it is made) the group's Next
	// waiting message, if any, is Promoted. Claimed messages become
	// inflight until LeaseUntil and their TotalAttempts grows by one: that
	// number is the lease's token for Apply.
	ClaimDue(ctx context.Context, c Claim) ([]*Message, error)

	// Apply writes decided changes in one transaction. A change applies only
	// if its message is still in state From with TotalAttempts == Token, so
	// an outcome whose lease was rescued meanwhile (or a timer racing a
	// claim) changes nothing; applied[i] reports which did. A change to
	// queued with a zero NextAttemptAt leaves the stored one as it is: a
	// message waiting for its key stays waiting, or stays due if it was
	// promoted meanwhile.
	Apply(ctx context.Context, changes []Change) (applied []bool, err error)

	// ExpiredLeases returns up to limit inflight messages whose lease ended
	// before the given time.
	ExpiredLeases(ctx context.Context, before time.Time, limit int) ([]*Message, error)

	// DueTimers returns up to limit queued messages whose TimerAt has come.
	DueTimers(ctx context.Context, now time.Time, limit int) ([]*Message, error)

	// StartBulk records a bulk operation, or returns the one with its id if
	// it exists already (so that a client may repeat the request).
	StartBulk(ctx context.Context, op BulkOp) (BulkOp, error)

	// RunBulk does the next batch of up to limit messages of an operation:
	// each is resubmitted or discarded (at now) with its action recorded, in
	// one transaction with the operation's progress. A replay looks at up
	// to limit published messages (the first delivery of each, in ingest
	// order) and gives its subscription a delivery of each it Wants that
	// has none for it (Replayed, keeping the order of its key), or with
	// Again, Resends the one it has; Count counts those. It returns the operation
	// as it stands after the batch; Done when nothing is left.
	RunBulk(ctx context.Context, id string, limit int, now time.Time) (BulkOp, error)

	// Bulk returns one operation, or CodeNotFound.
	Bulk(ctx context.Context, id string) (BulkOp, error)

	// StopBulk ends an operation not yet done, for the reason given, at
	// now: it takes no batch more. It returns the operation as it stands
	// (as it was, when it was done already), or CodeNotFound.
	StopBulk(ctx context.Context, id, reason string, now time.Time) (BulkOp, error)

	// PendingBulks returns the operations not yet done, to resume them.
	PendingBulks(ctx context.Context) ([]BulkOp, error)

	// Health returns the stored health of every endpoint that has one;
	// endpoints without a row are active.
	Health(ctx context.Context) ([]EndpointHealth, error)

	// HealthChanges returns the health of the endpoints written after
	// cursor since (0: of every endpoint with a row), a forgotten one as
	// the active health it was forgotten for (Forgettable), so that a
	// reader drops it, and the cursor of the answer. Every write committed
	// before the read is in the answer or in earlier ones; a row may come
	// again in a later answer. Its cost grows with the rows written since,
	// not with the endpoints.
	HealthChanges(ctx context.Context, since int64) ([]EndpointHealth, int64, error)

	// UpdateHealth reads an endpoint's health, applies next to it and stores
	// the result, in one transaction (so that nodes sharing the store see
	// each other's changes in order). A non-nil action is recorded with it.
	UpdateHealth(ctx context.Context, endpoint string, next func(EndpointHealth) EndpointHealth, a *Action) (EndpointHealth, error)

	// SwitchHealth makes operators' switches of endpoints, each with its
	// action, in one transaction: a switch is one small write, and many
	// (ten thousand endpoints by a filter, or many operators at once) are
	// one transaction, not one each. The switches are made in order (an
	// endpoint named twice sees the first change at the second), each
	// under the same guarantee as UpdateHealth's, and what each did is
	// returned in their order.
	SwitchHealth(ctx context.Context, switches []HealthSwitch) ([]HealthChange, error)

	// DueRoutes lists every route that has a claimable queued message (one
	// not waiting for its ordering key), with the earliest NextAttemptAt
	// among them. Its cost grows with the number of such routes, not with
	// their messages; the engine asks now and then, to find work that no
	// notice named, never per claim.
	DueRoutes(ctx context.Context) ([]RouteDue, error)

	// QueuedRoutes lists the routes that have queued messages.
	QueuedRoutes(ctx context.Context) ([]string, error)

	// SuspendRoute suspends every queued message of a route with the reason
	// and error given, at now, and reports how many.
	SuspendRoute(ctx context.Context, route string, reason Reason, lastError string, now time.Time) (int, error)

	// CountSuspended counts the suspended messages whose Sender is sender,
	// stopping at limit (so that the cost of a check against a cap is
	// bounded by the cap).
	CountSuspended(ctx context.Context, sender string, limit int) (int, error)

	// CountQueued counts the queued messages of the given routes (an index
	// range each: for operators' views, not for every request).
	CountQueued(ctx context.Context, routes []string) (int, error)

	// CountLive counts the messages in each live state (queued, inflight,
	// suspended) through the partial index of that state. The cost grows
	// with those states' sizes, not with the terminal messages kept for
	// retention; callers count now and then and keep the result, never on
	// every request.
	CountLive(ctx context.Context) (LiveCounts, error)

	// Types lists the message types taken in (by Ingest), by name, each
	// with how many messages of it came and when the first and the last
	// did. Its cost grows with the number of types, not of messages.
	Types(ctx context.Context) ([]TypeSeen, error)

	// TopologyVersion returns the version of the topology held in the
	// store: 0 before its first change.
	TopologyVersion(ctx context.Context) (int64, error)

	// TopologyChanges returns the objects written after version since
	// (deleted ones as tombstones, with a nil Spec), in no particular
	// order, and the version they bring a reader to. Every change up to
	// that version is in the answer or earlier ones: a writer's objects
	// become visible together with its version.
	TopologyChanges(ctx context.Context, since int64) ([]TopologyObject, int64, error)

	// WriteTopology writes objects (a nil Spec deletes: it leaves a
	// tombstone) and records the actions, in one transaction, as version
	// base+1, which it returns; each object and action gets that Version.
	// When the stored version is no longer base it writes nothing and
	// returns ErrTopologyMoved. Writers of every node are serialized, so
	// versions become visible in order.
	WriteTopology(ctx context.Context, base int64, objects []TopologyObject, actions []Action) (int64, error)

	// Audit lists the recorded actions, operator actions and topology
	// changes alike, newest first.
	Audit(ctx context.Context, f AuditFilter) (AuditPage, error)

	// RecordEvents records operational events in one transaction, in the
	// order given, each unless one with its ID is recorded already (another
	// node, an earlier try, or an event before it in evs recorded the same
	// transition). For each event it records, decide is given the event and
	// its subject's events recorded at or after the event's At minus
	// window, newest first, those before it in evs included: each decides
	// as if recorded by a transaction of its own, taken in turns with the
	// other writers of its subject. decide returns the event as it is to be
	// recorded (its Notified decided) with the notices it sends, which are
	// ingested as Apply ingests a change's notices. It returns the events
	// it recorded, as recorded (with their Seq), in the order given; those
	// recorded before are left out.
	RecordEvents(ctx context.Context, evs []Event, window time.Duration, decide func(ev Event, recent []Event) (Event, []*Message)) ([]Event, error)

	// Events lists the recorded operational events that the filter
	// selects, newest first.
	Events(ctx context.Context, f EventFilter) (EventPage, error)

	// Ping reports whether the store can be read and written.
	Ping(ctx context.Context) error

	// Close releases the store; pending writes finish first.
	Close() error
}

// TypeSeen is a message type the store has taken in.
type TypeSeen struct {
	Type      string
	Count     int64 // messages of the type ingested (a published one counts once)
	FirstSeen time.Time
	LastSeen  time.Time
}

// Claim asks for due messages, route by route in the order given, each up
// to its quota and all together up to Max (0: no total limit), so that
// routes with nothing due leave the capacity to the others.
type Claim struct {
	Now        time.Time
	LeaseUntil time.Time
	Owner      string // who holds the lease, for operators
	Routes     []RouteQuota
	Max        int
}

// RouteDue is a route with claimable messages, and when the first of them
// is due.
type RouteDue struct {
	Route string
	At    time.Time
}

// RouteQuota is how many messages of one route a claim may take.
type RouteQuota struct {
	Route string
	Limit int
}

// Change is one decided change of a message: its new fields (the mutable
// ones of Message), guarded by the state and token it must still have, with
// the attempt that led to it and the notices it sends, if any.
type Change struct {
	Message *Message // the message with its new state, times, counters and errors
	From    State    // the state it must still be in
	Token   int      // the TotalAttempts it must still have
	Attempt *Attempt // recorded with the change; nil for none
	Notices []*Message
	// Prior is the message as the decision read it (for an outcome, as it
	// was leased), or nil. With it a store can tell a Delivery, which it
	// may write with fewer columns.
	Prior *Message
}

// Delivery reports whether c records a delivery and nothing else: the
// message, leased for the attempt c is guarded by, goes from inflight to
// delivered, and of the fields a change writes only those differ from
// Prior that every delivery sets. Those are the state, the attempts of the
// round, the endpoint, UpdatedAt and FinishedAt (one time); the reason,
// the abandoned count, the due time, the timer and the lease are cleared.
// A message with an ordering key is never one: its delivery lets the next
// of its key go, which a store does beside the change. So a store may
// write a Delivery by setting those fields alone: the others are as the
// lease left them (TestDeliveryWritesWhatTheChangeDoes in the store
// conformance suite checks that both ways write the same row).
func (c Change) Delivery() bool {
	p, m := c.Prior, c.Message
	if p == nil || m == nil || c.From != StateInflight || p.State != StateInflight || c.Token != p.TotalAttempts {
		return false
	}
	// What every delivery sets, as a delivery sets it.
	if m.State != StateDelivered || m.Reason != "" || m.Abandoned != 0 || !m.NextAttemptAt.IsZero() ||
		!m.TimerAt.IsZero() || !m.LeaseUntil.IsZero() || m.LeaseOwner != "" || m.FinishedAt.IsZero() ||
		!m.FinishedAt.Equal(m.UpdatedAt) || m.OrderingKey != "" {
		return false
	}
	// The rest of what a change writes, as leased.
	return m.ID == p.ID && m.Subscription == p.Subscription && m.TotalAttempts == p.TotalAttempts &&
		m.Route == p.Route && m.Escalated == p.Escalated && m.FallbackFrom == p.FallbackFrom &&
		m.RoundStartedAt.Equal(p.RoundStartedAt) && m.LastError == p.LastError && m.LastClass == p.LastClass &&
		m.OrderSkipped == p.OrderSkipped && m.Step == p.Step && m.FailedStep == p.FailedStep &&
		maps.Equal(m.StepResponses, p.StepResponses) && m.ResubmitCount == p.ResubmitCount && m.Workflow == p.Workflow
}

// IngestStatus is the outcome of ingesting one message.
type IngestStatus int

// The ingest outcomes.
const (
	IngestCreated  IngestStatus = iota + 1 // stored now
	IngestExists                           // the same id with the same content was stored before
	IngestConflict                         // the id is taken by other content
)

// IngestResult is the outcome of ingesting one message. Message is the
// stored message for IngestExists and IngestConflict.
type IngestResult struct {
	Status  IngestStatus
	Message *Message
}

// Purge is what Store.Purge takes: the messages finished before Before,
// of the tenant Tenant alone, or (empty) of every tenant but those in
// Except, which keep theirs for a retention of their own.
type Purge struct {
	Before time.Time
	Tenant string
	Except []string
}

// MessageFilter selects messages for a listing. Empty fields match all.
type MessageFilter struct {
	// Tenant, when given, matches only that tenant's messages (their ids
	// are its: courier.TenantOfID).
	Tenant string `json:",omitempty"`
	State  State
	Type   string
	Route  string
	// Routes, when given, matches messages on any of these routes (an
	// endpoint's queue: the routes that use it).
	Routes       []string `json:",omitempty"`
	IDPrefix     string   `json:",omitempty"` // ids that begin with it
	Endpoint     string
	Subscription string // the deliveries of published messages to this subscription
	Reason       Reason
	// Reasons, when given, matches messages suspended for any of them.
	Reasons       []Reason `json:",omitempty"`
	Sender        string   // the API key that ingested the messages
	CreatedAfter  time.Time
	CreatedBefore time.Time
	Limit         int    // at most MaxListLimit; 0 means DefaultListLimit
	Cursor        string // from the previous page's Next
}

// Listing limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// MessagePage is one page of a listing. Next is the cursor of the following
// page, empty on the last.
type MessagePage struct {
	Messages []*Message
	Next     string
}

// Outcome is how an attempt ended.
type Outcome string

// The attempt outcomes.
const (
	OutcomeDelivered Outcome = "delivered" // the receiver took it
	OutcomeFailed    Outcome = "failed"    // an error of some class
	OutcomeAbandoned Outcome = "abandoned" // the worker's lease lapsed before it reported
)

// Attempt is one try to deliver one message to one endpoint.
type Attempt struct {
	MessageID    string
	Subscription string // of a delivery of a published message; empty for a message sent to a route
	N            int    // 1 for the first attempt of the message, counting across resubmits
	Endpoint     string
	Route        string
	StartedAt    time.Time
	Duration     time.Duration
	Outcome      Outcome
	Class        ErrorClass
	Status       int    // transport status (HTTP status, SMTP reply code), 0 if none
	Error        string // what went wrong, for people
	Response     string // the start of the receiver's answer, at most MaxResponseExcerpt bytes
}

// MaxResponseExcerpt bounds the response kept with an attempt.
const MaxResponseExcerpt = 1024

// Action is an operator action: who did what to which message or endpoint,
// and when.
type Action struct {
	At      time.Time
	Who     string // the API key's name
	Kind    ActionKind
	Subject string // a message's Key, an endpoint name, or a topology object's name
	Detail  string // e.g. the new route of a resubmit
	// Object is the kind of topology object a topology change (create,
	// replace, delete) changed; empty for other actions.
	Object TopologyKind
	// Before and After are a changed topology object's spec (JSON, its
	// secrets shown as "set") before and after the change; empty when it did
	// not exist.
	Before, After string
	// Version is the topology version a topology change made; 0 for other
	// actions.
	Version int64
	// Seq orders the log: set by the store.
	Seq int64
}

// ActionKind names an operator action.
type ActionKind string

// The operator actions.
const (
	ActionResubmit    ActionKind = "resubmit"
	ActionDiscard     ActionKind = "discard"
	ActionResend      ActionKind = "resend" // a finished message delivered again
	ActionReplay      ActionKind = "replay" // a subscription given deliveries of earlier messages
	ActionEndpointOff ActionKind = "endpoint_off"
	ActionEndpointOn  ActionKind = "endpoint_on"
	// ActionClaimFetched is a receiver's fetch of a payload through the
	// URL of a claim-check notice: its Who is "endpoint:<name>".
	ActionClaimFetched ActionKind = "claim_fetched"

	// Changes of the topology held in the store (docs/design.md §15).
	ActionCreate        ActionKind = "create"         // an object that did not exist
	ActionReplace       ActionKind = "replace"        // an object written anew
	ActionDelete        ActionKind = "delete"         // an object removed
	ActionRotateSecrets ActionKind = "rotate_secrets" // an object's secrets encrypted under a new key

	// ActionEraseTenant is the bulk operation that erases the messages of
	// a deleted tenant (Filter.Tenant), with their attempts and payloads.
	ActionEraseTenant ActionKind = "erase_tenant"
)

// BulkOp is a resubmit or discard of every message that matches a filter,
// done in batches that survive a restart.
type BulkOp struct {
	ID     string
	Kind   ActionKind // ActionResubmit or ActionDiscard
	Filter MessageFilter
	Route  string // for a resubmit: the route to resubmit to; empty keeps each message's
	// Replay is what a replay (Kind ActionReplay) gives deliveries of, and
	// to which subscription; nil for other operations. Filter is not used.
	Replay *Replay
	// Redrive says which recovery of an endpoint a re-drive (a resubmit by
	// courier itself) follows; nil for an operator's operation.
	Redrive *RedriveOf
	Who     string
	Count   int // messages done so far
	Done    bool
	// Stopped says why an operation was ended before it was through
	// (StopBulk); empty for one that was not.
	Stopped string
	// Position and End say how far it got: the ingest sequence number of
	// the last message looked at, and of the last it will look at (the
	// newest when it began). Position/End is its progress.
	Position, End int64
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Replay gives a subscription a delivery of every retained published
// message it wants that came in a span of time (docs/design.md §14), in batches
// that survive a restart.
type Replay struct {
	// Subscription is the subscription as it was when the replay began:
	// what it wants and its route.
	Subscription Subscription
	Since        time.Time // messages ingested at or after this
	Until        time.Time // and before this
	// Types, when given, narrows the replay to these types (exact, or
	// prefixes ending in ".*") of those the subscription wants.
	Types []string
	// Again also delivers again the messages the subscription has a
	// delivery of, delivered or not (Resend); without it they are left.
	Again bool
}

// Wants reports whether the replay gives subscription a delivery of m.
func (r *Replay) Wants(m *Message) bool {
	if !r.Subscription.Matches(m.Type, m.Headers) || m.CreatedAt.Before(r.Since) || !m.CreatedAt.Before(r.Until) {
		return false
	}
	if len(r.Types) == 0 {
		return true
	}
	narrow := Subscription{Types: r.Types}
	return narrow.WantsType(m.Type)
}

// BulkStates are the states a bulk operation takes messages from: the
// filter's state if it names one the action applies to, else suspended.
func (op BulkOp) BulkStates() []State {
	switch {
	case op.Kind == ActionDiscard && op.Filter.State == StateQueued:
		return []State{StateQueued}
	default:
		return []State{StateSuspended}
	}
}
