package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/storetest"
)

func TestMessagesShowWorkflow(t *testing.T) {
	store := sqlitetest.Open(t)
	top := &courier.Topology{Routes: map[string]*courier.Route{
		"book": {Name: "book", Workflow: &courier.Workflow{Steps: []courier.WorkflowStep{
			{Endpoint: "reserve", Compensate: "release"},
			{Endpoint: "charge", Compensate: "refund"},
			{Endpoint: "ship"},
		}}},
	}}
	url := apiServer(t, api.Options{Store: store, Topology: top})

	if out, _, err := runCLI(t, `{"seat":"12A"}`, "--server", url, "send", "--type", "booking", "--route", "book", "--id", "w-1"); err != nil {
		t.Fatalf("send: %q %v", out, err)
	}
	out, _, err := runCLI(t, "", "--server", url, "messages", "show", "w-1")
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "show a new workflow message", out, `Workflow: book, step 1 of 3`,
		`1 +reserve +release +running +-`, `2 +charge +refund +pending`, `3 +ship +- +pending`)

	long := `{"reservation":"r-7","seats":["12A"],"note":"` + strings.Repeat("x", 100) + `"}`
	storetest.AttemptStep(t, store, top, "book:step-1", courier.Result{Status: 200, Body: long})
	storetest.AttemptStep(t, store, top, "book:step-2", courier.Result{Status: 200, Body: "charged 42.00 EUR"})
	storetest.AttemptStep(t, store, top, "book:step-3", courier.Result{Class: courier.ClassHTTP4xx, Status: 400, Error: "HTTP 400: no such address"})
	out, _, err = runCLI(t, "", "--server", url, "messages", "show", "w-1")
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "show while compensating", out, `Workflow: book, compensating after step 3 failed: undoing step 2`,
		`1 +reserve +release +done +\{"reservation":"r-7","seats":\["12A"\],"note":"x+…$`,
		`2 +charge +refund +undoing +charged 42\.00 EUR$`, `3 +ship +- +failed +-$`,
		// Each attempt says which step it belonged to.
		`book:step-1 +reserve +delivered`, `book:step-3 +ship +failed +http_4xx`)
	if strings.Contains(out, long) {
		t.Error("a long response is shown whole")
	}

	storetest.AttemptStep(t, store, top, "book:undo-2", courier.Result{Status: 200})
	storetest.AttemptStep(t, store, top, "book:undo-1", courier.Result{Status: 200})
	out, _, err = runCLI(t, "", "--server", url, "messages", "show", "w-1")
	if err != nil {
		t.Fatal(err)
	}
	wantLines(t, "show when compensated", out, `Workflow: book, compensated after step 3 failed`,
		`1 +reserve +release +undone`, `2 +charge +refund +undone`, `3 +ship +- +failed`, `book:undo-1 +release +delivered`)

	// -o json prints the API's view.
	out, _, err = runCLI(t, "", "--server", url, "-o", "json", "messages", "show", "w-1")
	var shown api.Message
	if err != nil || json.Unmarshal([]byte(out), &shown) != nil {
		t.Fatalf("show -o json: %q %v", out, err)
	}
	if w := shown.Workflow; w == nil || w.Route != "book" || w.FailedStep != 3 || len(w.StepsDetail) != 3 ||
		w.StepsDetail[1].ResponseText() != "charged 42.00 EUR" || w.StepsDetail[0].State != courier.StepUndone {
		t.Errorf("show -o json: %s", out)
	}
}

// wantLines fails unless each pattern matches a line of out.
func wantLines(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)` + p).MatchString(out) {
			t.Errorf("%s: no line matches %q in\n%s", what, p, out)
		}
	}
}
