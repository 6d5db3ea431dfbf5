package courier

import "slices"

// ErrorClass names the kind of failure of one attempt (docs/design.md §3). Transports
// map their errors onto these; endpoint rules and policies refer to them.
type ErrorClass string

// The error classes.
const (
	ClassDNS              ErrorClass = "dns"
	ClassConnectRefused   ErrorClass = "connect_refused"
	ClassConnectTimeout   ErrorClass = "connect_timeout"
	ClassTLS              ErrorClass = "tls"
	ClassTimeout          ErrorClass = "timeout"
	ClassConnectionClosed ErrorClass = "connection_closed"
	ClassProtocol         ErrorClass = "protocol"
	ClassHTTP429          ErrorClass = "http_429"
	ClassHTTP5xx          ErrorClass = "http_5xx"
	ClassHTTP4xx          ErrorClass = "http_4xx"
	ClassTransport        ErrorClass = "transport"
	ClassRejected         ErrorClass = "rejected"
	ClassLookup           ErrorClass = "lookup"
	ClassAuth             ErrorClass = "auth"
)

// ErrorClasses lists every class.
var ErrorClasses = []ErrorClass{ClassDNS, ClassConnectRefused, ClassConnectTimeout, ClassTLS,
	ClassTimeout, ClassConnectionClosed, ClassProtocol, ClassHTTP429, ClassHTTP5xx, ClassHTTP4xx,
	ClassTransport, ClassRejected, ClassLookup, ClassAuth}

// Valid reports whether c is one of the defined classes.
func (c ErrorClass) Valid() bool { return slices.Contains(ErrorClasses, c) }

// PermanentByDefault reports whether a failure of class c means the receiver
// will never take this message, when the endpoint's rules do not say
// otherwise: http_4xx and rejected.
func (c ErrorClass) PermanentByDefault() bool { return c == ClassHTTP4xx || c == ClassRejected }

// Blameless reports whether a failure of class c happened before anything
// reached the receiver, for a reason that is not the receiver's: a
// recipient that could not be looked up, credentials that could not be
// obtained from a token endpoint. Such a failure touches no endpoint's
// health, and is refused in timeout_on and suspend_on.
func (c ErrorClass) Blameless() bool { return c == ClassLookup || c == ClassAuth }
