package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/storetest"
)

// workflowTopology has the workflow route "book": reserve (undone by
// release), charge (undone by refund), ship (nothing to undo).
func workflowTopology() *courier.Topology {
	t := testTopology()
	t.Routes["book"] = &courier.Route{Name: "book", Workflow: &courier.Workflow{Steps: []courier.WorkflowStep{
		{Endpoint: "reserve", Compensate: "release"},
		{Endpoint: "charge", Compensate: "refund"},
		{Endpoint: "ship"},
	}}}
	return t
}

func TestWorkflowShown(t *testing.T) {
	store := sqlitetest.Open(t)
	top := workflowTopology()
	srv := api.NewServer(api.Options{Store: store, Topology: top})
	ts := &testServer{Server: httptest.NewServer(validated(t, srv)), store: store}
	t.Cleanup(ts.Close)

	status, body, _ := ts.call(t, "PUT", "/v1/messages/w-1", `{"type":"booking","route":"book","payload":{"seat":"12A"}}`)
	if status != http.StatusCreated {
		t.Fatalf("ingest on a workflow route: %d %s", status, body)
	}
	if m := decode[api.Message](t, body); m.Route != "book:step-1" || m.Workflow == nil || m.Workflow.Route != "book" ||
		m.Workflow.Step != 1 || m.Workflow.Steps != 3 || m.Workflow.StepsDetail != nil {
		t.Fatalf("ingest answer: %s", body)
	}

	// shown returns the message's workflow and the states of its steps.
	shown := func(what string) (*api.WorkflowView, []courier.StepState) {
		t.Helper()
		status, body, _ := ts.call(t, "GET", "/v1/messages/w-1", "")
		m := decode[api.Message](t, body)
		if status != 200 || m.Workflow == nil || len(m.Workflow.StepsDetail) != 3 {
			t.Fatalf("%s: %d %s", what, status, body)
		}
		var states []courier.StepState
		for i, s := range m.Workflow.StepsDetail {
			if s.N != i+1 || s.Endpoint != top.Routes["book"].Workflow.Steps[i].Endpoint || s.Compensate != top.Routes["book"].Workflow.Steps[i].Compensate {
				t.Errorf("%s: step %d shown as %+v", what, i+1, s)
			}
			states = append(states, s.State)
		}
		return m.Workflow, states
	}
	wantStates := func(what string, got []courier.StepState, want ...courier.StepState) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: step states %v, want %v", what, got, want)
				return
			}
		}
	}

	w, states := shown("just ingested")
	if w.Step != 1 || w.Compensating || w.FailedStep != 0 || w.StepsDetail[0].Response != nil {
		t.Errorf("just ingested: %+v", w)
	}
	wantStates("just ingested", states, courier.StepRunning, courier.StepPending, courier.StepPending)

	// Step 1 answers JSON, step 2 text; step 3 is refused for good.
	storetest.AttemptStep(t, store, top, "book:step-1", courier.Result{Status: 200, Body: "{\n  \"reservation\": \"r-7\"\n}"})
	w, states = shown("after step 1")
	wantStates("after step 1", states, courier.StepDone, courier.StepRunning, courier.StepPending)
	if w.Step != 2 || string(w.StepsDetail[0].Response) != `{"reservation":"r-7"}` {
		t.Errorf("after step 1: step %d, response of step 1 %s", w.Step, w.StepsDetail[0].Response)
	}
	storetest.AttemptStep(t, store, top, "book:step-2", courier.Result{Status: 200, Body: "charged 42.00 EUR"})
	storetest.AttemptStep(t, store, top, "book:step-3", courier.Result{Class: courier.ClassHTTP4xx, Status: 400, Error: "HTTP 400: no such address"})
	w, states = shown("after step 3 failed")
	wantStates("after step 3 failed", states, courier.StepDone, courier.StepUndoing, courier.StepFailed)
	if !w.Compensating || w.FailedStep != 3 || w.Step != 2 {
		t.Errorf("after step 3 failed: %+v", w)
	}
	if got := w.StepsDetail[1]; string(got.Response) != `"charged 42.00 EUR"` || got.ResponseText() != "charged 42.00 EUR" {
		t.Errorf("a text response shown as %s (%q)", got.Response, got.ResponseText())
	}
	if got := w.StepsDetail[0].ResponseText(); got != `{"reservation":"r-7"}` {
		t.Errorf("a JSON response as text: %q", got)
	}

	storetest.AttemptStep(t, store, top, "book:undo-2", courier.Result{Status: 200})
	_, states = shown("after undoing step 2")
	wantStates("after undoing step 2", states, courier.StepUndoing, courier.StepUndone, courier.StepFailed)
	storetest.AttemptStep(t, store, top, "book:undo-1", courier.Result{Status: 200})
	w, states = shown("compensated")
	wantStates("compensated", states, courier.StepUndone, courier.StepUndone, courier.StepFailed)
	if w.Compensating || w.FailedStep != 3 {
		t.Errorf("compensated: %+v", w)
	}
	// Nothing is left to do: a resubmit is refused, saying why.
	status, body, _ = ts.call(t, "POST", "/v1/messages/w-1/resubmit", "")
	wantError(t, status, body, http.StatusConflict, courier.CodeConflict,
		"message w-1 is compensated: every step it did was undone; send it again as a new message to run the workflow anew")

	// Each attempt names the implicit route of its step.
	_, body, _ = ts.call(t, "GET", "/v1/messages/w-1/attempts", "")
	var routes []string
	for _, a := range decode[api.AttemptList](t, body).Attempts {
		routes = append(routes, a.Route)
	}
	if want := []string{"book:step-1", "book:step-2", "book:step-3", "book:undo-2", "book:undo-1"}; !slices.Equal(routes, want) {
		t.Errorf("routes of the attempts %v, want %v", routes, want)
	}

	// The list shows where it stands, without the steps.
	_, body, _ = ts.call(t, "GET", "/v1/messages?route=book:undo-1", "")
	if l := decode[api.MessageList](t, body); len(l.Messages) != 1 || l.Messages[0].Workflow == nil ||
		l.Messages[0].Workflow.Steps != 3 || l.Messages[0].Workflow.StepsDetail != nil {
		t.Errorf("listed: %s", body)
	}

	// With the workflow route gone, what the message holds is still shown.
	srv.SetTopology(testTopology())
	_, body, _ = ts.call(t, "GET", "/v1/messages/w-1", "")
	var raw struct {
		Workflow map[string]json.RawMessage `json:"workflow"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	if string(raw.Workflow["route"]) != `"book"` || string(raw.Workflow["step"]) != "1" || string(raw.Workflow["failed_step"]) != "3" ||
		raw.Workflow["steps_detail"] != nil || raw.Workflow["steps"] != nil {
		t.Errorf("with the workflow route gone: %s", body)
	}
}
