package courier

import (
	"errors"
	"time"
)

// TopologyKind names a kind of object a topology is made of, as the store
// holds it (docs/design.md §15).
type TopologyKind string

// The kinds of topology objects.
const (
	KindEndpoint     TopologyKind = "endpoint"
	KindRoute        TopologyKind = "route"
	KindPolicy       TopologyKind = "policy"
	KindSubscription TopologyKind = "subscription"
	// KindKey is an API key kept in the store beside the topology, with
	// its versions and audit, though it is not part of the topology.
	KindKey TopologyKind = "key"
	// KindTenant is a tenant's settings (weight, quotas, retention, alert
	// targets) kept in the store beside the topology, under the tenant's
	// name: what a tenants: entry of the file holds (docs/design.md §20).
	// Like keys, tenants are not among TopologyKinds.
	KindTenant TopologyKind = "tenant"
	// KindSigningKey is one of courier's ed25519 keys that sign the v1a
	// requests of http endpoints, kept in the store beside the topology
	// under its key id, its private half sealed like every secret. Like
	// keys, signing keys are not among TopologyKinds.
	KindSigningKey TopologyKind = "signing_key"
)

// TopologyKinds lists the kinds a topology is made of, in the order it is
// built: what a kind refers to comes before it. Keys are not among them.
var TopologyKinds = []TopologyKind{KindEndpoint, KindRoute, KindPolicy, KindSubscription}

// Section is the configuration file's section that holds objects of kind k
// ("endpoints"), and the plural of the API's paths.
func (k TopologyKind) Section() string {
	switch k {
	case KindPolicy:
		return "policies"
	default:
		return string(k) + "s"
	}
}

// Valid reports whether k is one of the kinds.
func (k TopologyKind) Valid() bool {
	switch k {
	case KindEndpoint, KindRoute, KindPolicy, KindSubscription, KindKey, KindTenant, KindSigningKey:
		return true
	}
	return false
}

// TopologyObject is one endpoint, route, policy or subscription as the store
// holds it: its spec in the configuration file's form, as JSON, with its
// secrets encrypted. The store keeps a deleted object as a tombstone (a nil
// Spec), so that every node learns of the delete.
type TopologyObject struct {
	Kind TopologyKind
	Name string
	// Spec is the object's fields as in the file, as a JSON object; nil
	// when the object was deleted.
	Spec []byte
	// Version is the topology version that last wrote the object: the
	// object's version for a conditional change (If-Match).
	Version   int64
	UpdatedAt time.Time
	UpdatedBy string
}

// ErrTopologyMoved is what Store.WriteTopology returns when the stored
// topology is no longer at the version the change was decided on: read the
// changes since, decide again and write again.
var ErrTopologyMoved = errors.New("the topology changed meanwhile")

// AuditFilter selects entries of the audit log: operator actions and
// topology changes. Empty fields match all.
type AuditFilter struct {
	Who     string       // the key's name
	Kind    ActionKind   // what was done
	Object  TopologyKind // the kind of topology object changed
	Subject string       // the message key, endpoint, or object name
	Since   time.Time    // at or after
	Until   time.Time    // before
	Limit   int          // at most MaxListLimit; 0 means DefaultListLimit
	Cursor  string       // from the previous page's Next
}

// AuditPage is one page of the audit log, newest first. Next is the
// cursor of the following page, empty on the last.
type AuditPage struct {
	Actions []Action
	Next    string
}

// Applying says how a whole topology is applied: with Prune the objects it
// lacks are deleted, those of the tenant PruneTenant alone when one is
// named (a tenant's file applied leaves the others' objects be); with
// DryRun nothing is written, and the changes that would be made are told.
type Applying struct {
	Prune       bool
	PruneTenant string
	DryRun      bool
}
