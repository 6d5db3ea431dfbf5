package courier

import "time"

// HealthState is the delivery health of an endpoint, shared by every node
// that uses the same store (DESIGN §4).
type HealthState string

// The endpoint health states.
const (
	HealthActive    HealthState = "active"
	HealthTimeout   HealthState = "timeout"
	HealthSuspended HealthState = "suspended"
	HealthOff       HealthState = "off"
)

// EndpointHealth is the persisted health of one endpoint.
type EndpointHealth struct {
	Endpoint       string
	State          HealthState
	Failures       int // consecutive failures counted towards suspension
	Suspensions    int // suspensions in a row, for the growing duration
	SuspendedUntil time.Time
	UpdatedAt      time.Time
}
