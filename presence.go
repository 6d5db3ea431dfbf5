package courier

import "context"

// Presence tells which nodes of a store that several share are there, so
// that the others take over a node's work as soon as it is gone instead of
// when its leases and slot holds lapse (docs/design.md §11). A node is
// present from Join until its Attendance ends: it left, its process died,
// or the store lost sight of it. A store that only one process uses needs
// none: its leases at start are from a run that died.
type Presence interface {
	// Join makes owner present. From when the returned Attendance's Lost
	// closes, other nodes may take over owner's leases and slots: owner
	// must then stop starting attempts and cut short those under way
	// before the store could tell the others (the store makes sure it
	// knows first), and join again, under another name, to come back.
	Join(ctx context.Context, owner string) (Attendance, error)

	// Departed returns the owners that joined and are no longer present,
	// whose work the store still keeps: leases, slot holds.
	Departed(ctx context.Context) ([]string, error)

	// LeasesOf returns up to limit inflight messages leased by the owners.
	LeasesOf(ctx context.Context, owners []string, limit int) ([]*Message, error)

	// Forget drops what the store keeps of departed owners: their slot
	// holds, and their presence once no lease of theirs is left.
	Forget(ctx context.Context, owners []string) error
}

// Attendance is a node's presence, from its Join.
type Attendance interface {
	// Lost is closed when the presence ended without Leave.
	Lost() <-chan struct{}
	// Leave ends the presence. What the node still leases is then taken
	// over by the others, as after a crash.
	Leave()
}
