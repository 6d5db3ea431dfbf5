package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/google/uuid"
)

// EndpointAuth is how an endpoint authenticates to its receiver, as this
// node knows it; never its secrets.
type EndpointAuth struct {
	Type string `json:"type"` // oauth2, basic or bearer
	// TokenExpiresAt is when the OAuth2 token this node holds expires.
	TokenExpiresAt *time.Time `json:"token_expires_at,omitempty"`
	// LastFailureAt and LastFailure are this node's last failure to
	// obtain a token (class auth).
	LastFailureAt *time.Time `json:"last_failure_at,omitempty"`
	LastFailure   string     `json:"last_failure,omitempty"`
}

// authView is e's auth as the API shows it; nil when it sends no
// credentials of its own.
func (s *Server) authView(e *courier.Endpoint) *EndpointAuth {
	st := s.opts.AuthFunc(e)
	if st.Kind == "" {
		if k, ok := e.Settings.(courier.AuthKind); ok {
			st.Kind = k.AuthKind()
		}
	}
	if st.Kind == "" {
		return nil
	}
	v := &EndpointAuth{Type: st.Kind, LastFailure: st.LastError}
	if !st.TokenExpiry.IsZero() {
		v.TokenExpiresAt = timePtr(st.TokenExpiry)
	}
	if !st.LastFailure.IsZero() {
		v.LastFailureAt = timePtr(st.LastFailure)
	}
	return v
}

// EndpointTestRequest is the message POST /v1/endpoints/{name}/test
// sends; every field is optional.
type EndpointTestRequest struct {
	Type    string          `json:"type,omitempty"`    // default courier.test
	Payload json.RawMessage `json:"payload,omitempty"` // JSON; default a small sample
}

// EndpointTestResult is what the receiver answered to a test message.
type EndpointTestResult struct {
	Endpoint   string             `json:"endpoint"`
	MessageID  string             `json:"message_id"` // the webhook-id the receiver got
	Delivered  bool               `json:"delivered"`
	Status     int                `json:"status,omitempty"`
	Class      courier.ErrorClass `json:"class,omitempty"`
	Error      string             `json:"error,omitempty"`
	Response   string             `json:"response,omitempty"` // the start of the receiver's answer
	DurationMS int64              `json:"duration_ms"`
}

// TestType is the type of a test message that names none.
const TestType = "courier.test"

// handleTestEndpoint sends one sample message to an endpoint, now, and
// answers what the receiver said. It is no delivery: nothing is stored,
// no policy retries it, and the endpoint's health and activity are left
// as they are, so that an endpoint switched off or suspended can be tried
// before it is switched on.
func (s *Server) handleTestEndpoint(w http.ResponseWriter, r *http.Request) {
	sc := scopeOf(r)
	e, name, _, err := s.endpointOf(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req EndpointTestRequest
	if err := s.decodeSmall(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.opts.TestSendFunc == nil {
		s.writeError(w, r, courier.Errorf(courier.CodeUnavailable, "this server cannot send test messages"))
		return
	}
	id, err := uuid.NewV7()
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	now := s.opts.Clock.Now()
	m := &courier.Message{ID: "test-" + id.String(), Type: TestType, ContentType: "application/json", CreatedAt: now,
		Headers: map[string]string{}}
	if req.Type != "" {
		m.Type = sc.name(req.Type)
		if !courier.ValidType(m.Type) {
			s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "type %q is not a valid type name", req.Type))
			return
		}
	}
	m.Payload = req.Payload
	if len(m.Payload) == 0 {
		m.Payload, _ = json.Marshal(map[string]any{"test": true, "endpoint": sc.showName(name), "sent_at": now.UTC(),
			"text": "a test message from courier; it is no delivery and may be ignored"})
	} else if !json.Valid(m.Payload) {
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "payload is not JSON"))
		return
	}
	res := s.opts.TestSendFunc(r.Context(), courier.Delivery{Message: m, Endpoint: e, Attempt: 1})
	took := s.opts.Clock.Now().Sub(now)
	s.opts.Logger.Info("endpoint tested", "endpoint", name, "by", actor(r), "delivered", res.Delivered(),
		"status", res.Status, "class", res.Class)
	writeJSON(w, http.StatusOK, EndpointTestResult{Endpoint: sc.showName(name), MessageID: m.ID, Delivered: res.Delivered(),
		Status: res.Status, Class: res.Class, Error: res.Error, Response: res.Response, DurationMS: took.Milliseconds()})
}

// String says what the receiver answered, for people.
func (r EndpointTestResult) String() string {
	if r.Delivered {
		return fmt.Sprintf("delivered: HTTP %d in %d ms", r.Status, r.DurationMS)
	}
	return fmt.Sprintf("failed (%s): %s in %d ms", r.Class, r.Error, r.DurationMS)
}
