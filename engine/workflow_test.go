package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/testkit/sink"
)

// droneWorkflow sets up the drone delivery workflow on the sink: check the
// account, create a package (undone by cancelling it), schedule a drone
// (undone likewise), create the delivery.
func droneWorkflow(h *harness, comp *courier.Policy) {
	for _, name := range []string{"accounts", "packages", "packages-cancel", "drones", "drones-cancel", "deliveries"} {
		h.top.Endpoints[name] = h.httpEndpoint(name, "/"+name)
	}
	w := &courier.Workflow{Steps: []courier.WorkflowStep{{Endpoint: "accounts"}, {Endpoint: "packages", Compensate: "packages-cancel"},
		{Endpoint: "drones", Compensate: "drones-cancel"}, {Endpoint: "deliveries"}}}
	if comp != nil {
		h.policy(comp)
		w.CompensationPolicy = comp.Name
	}
	h.top.Routes["schedule"] = &courier.Route{Name: "schedule", Workflow: w}
	p := steadyPolicy("delivery", 3, 20*time.Millisecond)
	p.Escalate = []courier.Escalation{{After: time.Hour, Notify: "ops"}}
	h.policy(p)
	h.top.Endpoints["ops"] = h.httpEndpoint("ops", "/ops")
}

// sendWorkflow ingests a message on a workflow route as the API does.
func (h *harness) sendWorkflow(id, route string) {
	h.t.Helper()
	m := &courier.Message{ID: id, Type: "delivery", Route: route, Payload: []byte(`{"order":"` + id + `"}`), ContentType: "application/json"}
	courier.Accept(m, h.top.Policy(m.Type), false, time.Now())
	h.top.StartWorkflow(m)
	if _, err := h.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		h.t.Fatal(err)
	}
	h.engine.Wake()
}

// TestWorkflowStepsInOrder: all four steps succeed: four requests, in
// order, one each, each with its step and the responses before it.
func TestWorkflowStepsInOrder(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		droneWorkflow(h, nil)
		h.sink.Script("/accounts", sink.Respond(200).WithBody(`{"account": "ok"}`).WithHeader("Content-Type", "application/json"))
		h.sink.Script("/packages", sink.Respond(201).WithBody(`{"package": 7}`).WithHeader("Content-Type", "application/json"))
	})
	h.sendWorkflow("d-1", "schedule")
	m := h.waitState("d-1", courier.StateDelivered)
	var all []string
	for _, a := range h.sink.All() {
		all = append(all, a.Path+" "+a.Header.Get("webhook-id")+" "+a.Header.Get("Courier-Step"))
	}
	want := []string{"/accounts d-1.1 1/4", "/packages d-1.2 2/4", "/drones d-1.3 3/4", "/deliveries d-1.4 4/4"}
	if strings.Join(all, ", ") != strings.Join(want, ", ") {
		t.Fatalf("requests %v, want %v", all, want)
	}
	drones := h.sink.Arrivals("/drones")[0]
	if got := drones.Header.Get("Courier-Step-2-Response"); got != `{"package":7}` {
		t.Fatalf("step 3 got step 2's response as %q", got)
	}
	if string(drones.Body) != `{"order":"d-1"}` {
		t.Fatalf("step 3 got %q, not the original payload", drones.Body)
	}
	if m.Step != 4 || m.StepResponses[1] != `{"account": "ok"}` || m.StepResponses[2] != `{"package": 7}` {
		t.Fatalf("stored: step %d, responses %v", m.Step, m.StepResponses)
	}
	attempts, err := h.store.Attempts(context.Background(), "d-1")
	if err != nil || len(attempts) != 4 || attempts[2].Route != courier.StepRoute("schedule", 3) {
		t.Fatalf("attempts %+v, %v", attempts, err)
	}
}

// TestWorkflowCompensates: step 3 rejects for good, so the compensations
// of steps 2 and 1 run, in that order, once each (step 1 has none here, so
// only packages-cancel), and the message is suspended as compensated; a
// compensation that fails for a while is retried until it succeeds.
func TestWorkflowCompensates(t *testing.T) {
	comp := steadyPolicy("undo", 10, 20*time.Millisecond)
	h := newHarness(t, func(h *harness) {
		droneWorkflow(h, comp)
		h.top.Routes["schedule"].Workflow.Steps[0].Compensate = "accounts" // release the account check
		h.sink.Script("/drones", sink.Respond(422).WithBody(`{"error":"no drone free"}`))
		h.sink.Script("/packages-cancel", sink.Respond(503), sink.Respond(503), sink.Respond(204))
	})
	h.sendWorkflow("d-2", "schedule")
	m := h.waitState("d-2", courier.StateSuspended)
	if m.Reason != courier.ReasonCompensated || m.FailedStep != 3 || !strings.Contains(m.LastError, "step 3 of 4 failed") {
		t.Fatalf("ended %s %s failed step %d: %q", m.State, m.Reason, m.FailedStep, m.LastError)
	}
	var order []string
	for _, a := range h.sink.All() {
		order = append(order, fmt.Sprintf("%s %s %d", a.Path, a.Header.Get("webhook-id"), a.Status))
	}
	want := []string{"/accounts d-2.1 204", "/packages d-2.2 204", "/drones d-2.3 422",
		"/packages-cancel d-2.2.compensate 503", "/packages-cancel d-2.2.compensate 503", "/packages-cancel d-2.2.compensate 204",
		"/accounts d-2.1.compensate 204"}
	if strings.Join(order, ", ") != strings.Join(want, ", ") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(order, "\n"), strings.Join(want, "\n"))
	}
	if got := h.sink.Count("/deliveries"); got != 0 {
		t.Fatalf("step 4 ran %d times after step 3 failed", got)
	}
	got := courier.StepStates(m, h.top.Routes["schedule"].Workflow)
	if fmt.Sprint(got) != "[undone undone failed pending]" {
		t.Fatalf("step states %v", got)
	}
}

// TestWorkflowCompensationFails: an undo that never succeeds ends as
// compensation_failed, and the operator gets a notice.
func TestWorkflowCompensationFails(t *testing.T) {
	comp := steadyPolicy("undo", 2, 20*time.Millisecond)
	h := newHarness(t, func(h *harness) {
		droneWorkflow(h, comp)
		h.sink.Script("/deliveries", sink.Respond(400))
		h.sink.Script("/drones-cancel", sink.Respond(500), sink.Repeat)
	})
	h.sendWorkflow("d-3", "schedule")
	m := h.waitState("d-3", courier.StateSuspended)
	if m.Reason != courier.ReasonCompensationFailed || m.Step != 3 || m.FailedStep != 4 {
		t.Fatalf("ended %s step %d failed %d: %q", m.Reason, m.Step, m.FailedStep, m.LastError)
	}
	if got := fmt.Sprint(courier.StepStates(m, h.top.Routes["schedule"].Workflow)); got != "[not_undoable done undo_failed failed]" {
		t.Fatalf("step states %s", got)
	}
	if n := h.sink.Count("/drones-cancel"); n != 2 || h.sink.Count("/packages-cancel") != 0 {
		t.Fatalf("drones-cancel %d times, packages-cancel %d", n, h.sink.Count("/packages-cancel"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.sink.Wait(ctx, "/ops", 1); err != nil {
		t.Fatalf("no notice reached ops: %v", err)
	}
	if body := string(h.sink.Arrivals("/ops")[0].Body); !strings.Contains(body, "compensation_failed") {
		t.Fatalf("notice %s", body)
	}
}

// TestWorkflowsOfOneKeyCompensateEach: two workflows of one ordering key
// both fail at step 3; each is undone, the second not held up by the
// first's end.
func TestWorkflowsOfOneKeyCompensateEach(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		droneWorkflow(h, nil)
		h.top.Routes["schedule"].Workflow.Steps[0].Compensate = "accounts"
		h.sink.Script("/drones", sink.Respond(422), sink.Repeat)
	})
	for _, id := range []string{"k-1", "k-2"} {
		m := &courier.Message{ID: id, Type: "delivery", Route: "schedule", Payload: []byte(`{}`), ContentType: "application/json", OrderingKey: "cust-7"}
		courier.Accept(m, h.top.Policy(m.Type), false, time.Now())
		h.top.StartWorkflow(m)
		if _, err := h.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	h.engine.Wake()
	for _, id := range []string{"k-1", "k-2"} {
		if m := h.waitState(id, courier.StateSuspended); m.Reason != courier.ReasonCompensated {
			t.Fatalf("%s: %s %q", id, m.Reason, m.LastError)
		}
	}
	if n := h.sink.Count("/accounts"); n != 4 { // two steps 1 and two undos of them
		t.Fatalf("%d requests to accounts; want 4", n)
	}
}

// TestMessageOnAWorkflowRouteItself: a message that reaches a workflow
// route otherwise than by being sent (here: stored there directly, as a
// resubmit or a reload can leave it) is suspended as no_route by the
// sweep, with what to do, instead of waiting forever.
func TestMessageOnAWorkflowRouteItself(t *testing.T) {
	h := newHarness(t, func(h *harness) { droneWorkflow(h, nil) })
	h.send("stray", "delivery", "schedule") // no StartWorkflow: as if resubmitted there
	h.engine.SetTopology(h.top)             // a reload runs the sweep
	m := h.waitState("stray", courier.StateSuspended)
	if m.Reason != courier.ReasonNoRoute || !strings.Contains(m.LastError, "workflow route") {
		t.Fatalf("stray: %s %q", m.Reason, m.LastError)
	}
}
