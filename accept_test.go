package courier_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestTopologyAdmit(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	later := now.Add(time.Hour)
	invoice := courier.DefaultPolicy()
	invoice.Name, invoice.Priority = "invoice", 8
	top := &courier.Topology{
		Routes: map[string]*courier.Route{
			"acme": {Name: "acme", Endpoints: []string{"e"}},
			"flow": {Name: "flow", Workflow: &courier.Workflow{Steps: []courier.WorkflowStep{{Endpoint: "a"}, {Endpoint: "b"}}}},
		},
		Policies: map[string]*courier.Policy{courier.DefaultPolicyName: courier.DefaultPolicy(), "invoice": invoice},
	}
	given := func() *courier.Message {
		return &courier.Message{ID: "inv-1", Type: "invoice", Route: "acme", Payload: []byte("<invoice/>"), ContentType: "application/xml"}
	}
	tests := []struct {
		name          string
		change        func(m *courier.Message)
		priorityGiven bool
		code          courier.Code // "" when it is taken in
		in            string       // in the refusal's message
		check         func(t *testing.T, m *courier.Message)
	}{
		{name: "taken in with the policy's priority", change: func(m *courier.Message) { m.Priority = 3 }, check: func(t *testing.T, m *courier.Message) {
			if m.ID != "inv-1" || m.Priority != 8 || m.State != courier.StateQueued || !m.NextAttemptAt.Equal(now) || m.Hash == "" || m.Size != 10 {
				t.Errorf("got id %q priority %d state %s due %v hash %q size %d", m.ID, m.Priority, m.State, m.NextAttemptAt, m.Hash, m.Size)
			}
		}},
		{name: "the sender's priority", change: func(m *courier.Message) { m.Priority = 3 }, priorityGiven: true, check: func(t *testing.T, m *courier.Message) {
			if m.Priority != 3 {
				t.Errorf("priority %d, want the sender's 3", m.Priority)
			}
		}},
		{name: "named when it has no id", change: func(m *courier.Message) { m.ID = "" }, check: func(t *testing.T, m *courier.Message) {
			if m.ID != "new-1" {
				t.Errorf("id %q, want the one NewIDFunc gave", m.ID)
			}
		}},
		{name: "no content type", change: func(m *courier.Message) { m.ContentType = "" }, check: func(t *testing.T, m *courier.Message) {
			if m.ContentType != "application/octet-stream" {
				t.Errorf("content type %q", m.ContentType)
			}
		}},
		{name: "deliver_after", change: func(m *courier.Message) { m.DeliverAfter = later }, check: func(t *testing.T, m *courier.Message) {
			if !m.NextAttemptAt.Equal(later) {
				t.Errorf("due %v, want %v", m.NextAttemptAt, later)
			}
		}},
		{name: "a workflow starts at its first step", change: func(m *courier.Message) { m.Route = "flow" }, check: func(t *testing.T, m *courier.Message) {
			if m.Workflow != "flow" || m.Step != 1 || m.Route != courier.StepRoute("flow", 1) {
				t.Errorf("workflow %q step %d route %q", m.Workflow, m.Step, m.Route)
			}
		}},
		{name: "payload at the limit", change: func(m *courier.Message) { m.Payload = make([]byte, 16) }},
		{name: "payload over the limit", change: func(m *courier.Message) { m.Payload = make([]byte, 17) },
			code: courier.CodePayloadTooLarge, in: "the payload of 17 bytes is over max_payload: the limit is 16 bytes"},
		{name: "content type not a media type", change: func(m *courier.Message) { m.ContentType = "not a type" },
			code: courier.CodeInvalidArgument, in: `content_type "not a type"`},
		// Media types that mime.ParseMediaType takes, but no header can carry.
		{name: "content type with a control character", change: func(m *courier.Message) { m.ContentType = "text/plain; a=\"b\x01\"" },
			code: courier.CodeInvalidArgument, in: "content_type"},
		{name: "content type not UTF-8", change: func(m *courier.Message) { m.ContentType = "text/plain; a=\"\xff\"" },
			code: courier.CodeInvalidArgument, in: "content_type"},
		{name: "expired", change: func(m *courier.Message) { m.ExpiresAt = now },
			code: courier.CodeInvalidArgument, in: "expires_at 2026-11-23T10:00:00Z is in the past"},
		{name: "bad id", change: func(m *courier.Message) { m.ID = "a b" }, code: courier.CodeInvalidArgument, in: `id "a b" is not valid`},
		{name: "bad type", change: func(m *courier.Message) { m.Type = "in voice" }, code: courier.CodeInvalidArgument, in: `type "in voice" is not valid`},
		{name: "no route", change: func(m *courier.Message) { m.Route = "" }, code: courier.CodeInvalidArgument, in: "route is required"},
		{name: "unknown route", change: func(m *courier.Message) { m.Route = "globex" },
			code: courier.CodeInvalidArgument, in: `route "globex" is not configured`},
		{name: "bad priority", change: func(m *courier.Message) { m.Priority = 10 }, priorityGiven: true,
			code: courier.CodeInvalidArgument, in: "priority 10 is out of range"},
		{name: "long ordering key", change: func(m *courier.Message) { m.OrderingKey = strings.Repeat("k", courier.MaxIDLen+1) },
			code: courier.CodeInvalidArgument, in: "ordering_key"},
		{name: "bad header", change: func(m *courier.Message) { m.Headers = map[string]string{"Bad Name": "x"} },
			code: courier.CodeInvalidArgument, in: "header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := given()
			tt.change(m)
			before := *m
			in := courier.Intake{MaxPayload: 16, PriorityGiven: tt.priorityGiven, NewIDFunc: func() (string, error) { return "new-1", nil }}
			err := top.Admit(m, in, now)
			if got := courier.ErrorCode(err); got != tt.code {
				t.Fatalf("code %q, want %q (%v)", got, tt.code, err)
			}
			if err == nil {
				if tt.check != nil {
					tt.check(t, m)
				}
				return
			}
			if msg := courier.ErrorMessage(err); !strings.Contains(msg, tt.in) {
				t.Errorf("message %q, want one with %q", msg, tt.in)
			}
			if m.State != "" || m.ID != before.ID || m.Route != before.Route || m.Hash != "" {
				t.Errorf("a refused message was changed: %+v", m)
			}
		})
	}
}

// A name that cannot be made is the server's failure, not the sender's.
func TestTopologyAdmitNewIDFails(t *testing.T) {
	top := &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme"}}}
	m := &courier.Message{Type: "t", Route: "acme", Payload: []byte("x")}
	err := top.Admit(m, courier.Intake{NewIDFunc: func() (string, error) { return "", errors.New("no entropy") }}, time.Now())
	if courier.ErrorCode(err) != courier.CodeInternal || !strings.Contains(err.Error(), "no entropy") {
		t.Fatalf("got %v, want an internal error", err)
	}
}
