package courier

import "time"

// AuthState is what one node knows of how an endpoint authenticates to its
// receiver: the kind of credentials it sends, when the token it holds
// expires, and its last failure to obtain one. It holds no secret.
type AuthState struct {
	// Kind is "oauth2", "basic" or "bearer"; empty when the endpoint sends
	// no credentials of its own.
	Kind string
	// TokenExpiry is when the OAuth2 token this node holds expires; zero
	// when it holds none, or the token server gave no lifetime.
	TokenExpiry time.Time
	// LastFailure is when this node last failed to obtain a token (class
	// auth), and LastError what went wrong; zero and empty when it never
	// failed. They stay after a token is obtained again: TokenExpiry then
	// shows it works.
	LastFailure time.Time
	LastError   string
}

// AuthKind is implemented by the settings of a transport whose endpoints
// may send credentials of their own: it names the kind ("oauth2", "basic",
// "bearer"), or "" for none.
type AuthKind interface {
	AuthKind() string
}
