package courier

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// Redrive is a route's redrive setting: when one of its endpoints recovers
// (suspended or off, then active again), the route's messages suspended for
// Reasons and created within MaxAge are resubmitted in the background,
// oldest first, paced by the endpoint (RedrivePace).
type Redrive struct {
	OnRecovery bool
	Reasons    []Reason // never rejected or invalid (Redrivable)
	MaxAge     time.Duration
}

// Defaults of a route's redrive setting.
const DefaultRedriveMaxAge = 72 * time.Hour

// DefaultRedriveReasons are the reasons re-driven when a route names none.
var DefaultRedriveReasons = []Reason{ReasonExhausted, ReasonExpired}

// SystemWho is who the operator actions courier takes by itself are
// recorded as.
const SystemWho = "courier"

// DefaultRedriveBatch is the batch of a re-drive to an endpoint without a
// concurrency limit.
const DefaultRedriveBatch = 50

// Redrivable reports whether messages suspended for r may be re-driven:
// a message the receiver refused for good (rejected) or that could not be
// used (invalid) would only fail again.
func (r Reason) Redrivable() bool {
	return r.Valid() && r != ReasonRejected && r != ReasonInvalid
}

// RedriveOf is the recovery a re-drive follows.
type RedriveOf struct {
	Endpoint  string
	Recovered time.Time // when the endpoint became active again
}

// RedriveID is the id of the re-drive of route after endpoint's recovery
// at the time: the same on every node that sees that recovery, so that it
// starts one operation.
func RedriveID(route, endpoint string, recovered time.Time) string {
	id := "redrive." + route + "." + endpoint + "." + recovered.UTC().Format("20060102T150405.000000Z")
	if len(id) > MaxIDLen {
		sum := sha256.Sum256([]byte(route + "\x00" + endpoint + "\x00" + recovered.UTC().Format(time.RFC3339Nano)))
		id = "redrive." + hex.EncodeToString(sum[:16])
	}
	return id
}

// RedriveOp is the re-drive of the route after endpoint's recovery at
// the time, if the route re-drives on the recovery of that endpoint.
func (r *Route) RedriveOp(endpoint string, recovered time.Time) (BulkOp, bool) {
	if r == nil || r.Redrive == nil || !r.Redrive.OnRecovery || !slices.Contains(r.Endpoints, endpoint) {
		return BulkOp{}, false
	}
	recovered = recovered.UTC().Truncate(time.Microsecond)
	reasons := r.Redrive.Reasons
	if len(reasons) == 0 {
		reasons = DefaultRedriveReasons
	}
	maxAge := r.Redrive.MaxAge
	if maxAge <= 0 {
		maxAge = DefaultRedriveMaxAge
	}
	return BulkOp{
		ID:   RedriveID(r.Name, endpoint, recovered),
		Kind: ActionResubmit,
		Filter: MessageFilter{State: StateSuspended, Route: r.Name,
			Reasons: slices.DeleteFunc(slices.Clone(reasons), func(x Reason) bool { return !x.Redrivable() }), CreatedAfter: recovered.Add(-maxAge)},
		Redrive:   &RedriveOf{Endpoint: endpoint, Recovered: recovered},
		Who:       SystemWho,
		CreatedAt: recovered,
	}, true
}

// ActionDetail is the detail of the action the operation records on each
// message it acts on (before what the action adds of its own).
func (op BulkOp) ActionDetail() string {
	if op.Redrive != nil {
		return fmt.Sprintf("re-drive after the recovery of endpoint %s, bulk operation %s", op.Redrive.Endpoint, op.ID)
	}
	return "bulk operation " + op.ID
}

// RedrivePace decides the next batch of a re-drive of route after the
// recovery of its endpoint ep, whose health is h, with queued messages of
// the route queued: how many messages it may resubmit now (0: wait and ask
// again), or why it stops.
//
// The rule: a batch is as large as the endpoint takes at once (its
// max_concurrency, the ceiling of an adaptive one; DefaultRedriveBatch
// without a limit), and the next one goes only when the route has at most
// half a batch queued, so that the re-drive never puts more than about a
// batch and a half in front of the endpoint. It waits while the endpoint
// fails (timeout state) and stops at once when the endpoint is suspended
// or switched off again, or when the route no longer re-drives to it.
func RedrivePace(route *Route, ep *Endpoint, h EndpointHealth, queued int) (limit int, stop string) {
	name := h.Endpoint
	if ep != nil {
		name = ep.Name
	}
	switch {
	case route == nil:
		return 0, "the route was removed"
	case route.Redrive == nil || !route.Redrive.OnRecovery:
		return 0, "the route no longer re-drives on recovery"
	case ep == nil || !slices.Contains(route.Endpoints, ep.Name):
		return 0, fmt.Sprintf("endpoint %s is no longer one of the route's", name)
	case h.State == HealthSuspended:
		return 0, fmt.Sprintf("endpoint %s is suspended again", name)
	case h.State == HealthOff:
		return 0, fmt.Sprintf("endpoint %s was switched off", name)
	case h.State == HealthTimeout:
		return 0, ""
	}
	batch := ep.MaxConcurrency
	if batch <= 0 {
		batch = DefaultRedriveBatch
	}
	if queued*2 > batch {
		return 0, ""
	}
	return batch, ""
}
