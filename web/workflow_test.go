package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/storetest"
)

func TestWorkflowPage(t *testing.T) {
	top := testTopology()
	top.Routes["book"] = &courier.Route{Name: "book", Workflow: &courier.Workflow{Steps: []courier.WorkflowStep{
		{Endpoint: "reserve", Compensate: "release"},
		{Endpoint: "charge", Compensate: "refund"},
		{Endpoint: "ship"},
	}}}
	d := newDashboard(t, true, func(o *api.Options) { o.Topology = top })
	b := d.browser(t)
	b.login("ops")

	// Taken in on the workflow route, as the API takes it in.
	m := &courier.Message{ID: "w-1", Type: "booking", Route: "book", Payload: []byte(`{"seat":"12A"}`), ContentType: "application/json"}
	courier.Accept(m, courier.DefaultPolicy(), false, time.Now().Add(-time.Minute))
	top.StartWorkflow(m)
	if _, err := d.store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
		t.Fatal(err)
	}
	want(t, "a new workflow message", b.get("/ui/messages/w-1"), 200,
		"<h2>Workflow</h2>", "Route <b>book</b>: step 1 of 3",
		`<td>reserve</td><td>release</td><td><span class="step running">running</span>`,
		`<td>charge</td><td>refund</td><td><span class="step pending">pending</span>`,
		`<td>ship</td><td>-</td><td><span class="step pending">pending</span>`)

	storetest.AttemptStep(t, d.store, top, "book:step-1", courier.Result{Status: 200, Body: `{"reservation": "r-7"}`})
	storetest.AttemptStep(t, d.store, top, "book:step-2", courier.Result{Status: 200, Body: "charged 42.00 EUR"})
	storetest.AttemptStep(t, d.store, top, "book:step-3", courier.Result{Class: courier.ClassHTTP4xx, Status: 400, Error: "HTTP 400: no such address"})
	want(t, "a workflow message undoing its steps", b.get("/ui/messages/w-1"), 200,
		"compensating after step 3 failed: undoing step 2",
		`<span class="step done">done</span>`, `<span class="step undoing">undoing</span>`, `<span class="step failed">failed</span>`,
		"<summary>{&#34;reservation&#34;:&#34;r-7&#34;}</summary>", "<summary>charged 42.00 EUR</summary>",
		// Each attempt says which step it belonged to.
		"route book:step-1", "route book:step-3")

	storetest.AttemptStep(t, d.store, top, "book:undo-2", courier.Result{Status: 200})
	storetest.AttemptStep(t, d.store, top, "book:undo-1", courier.Result{Status: 200})
	want(t, "a compensated workflow message", b.get("/ui/messages/w-1"), 200,
		"compensated after step 3 failed",
		`<td>reserve</td><td>release</td><td><span class="step undone">undone</span>`, "route book:undo-1")

	// A message of no workflow has no such section.
	d.suspendedWithHistory(t, "inv-1", []byte(`{}`), "application/json", nil, "HTTP 400", "")
	if a := b.get("/ui/messages/inv-1"); a.status != 200 || strings.Contains(a.body, "<h2>Workflow</h2>") {
		t.Errorf("the page of a message of no workflow: %d, shows a workflow: %v", a.status, strings.Contains(a.body, "<h2>Workflow</h2>"))
	}
}
