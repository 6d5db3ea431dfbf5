package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/sqlite"
)

// runCLI runs the command line in this process with args and stdin, and
// returns what it printed and its error.
func runCLI(t *testing.T, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCmd(&out, &errOut)
	cmd.SetArgs(args)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetContext(context.Background())
	err = cmd.Execute()
	return out.String(), errOut.String(), err
}

func cliServer(t *testing.T) (string, *sqlite.Store) {
	t.Helper()
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "courier.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(api.NewServer(api.Options{Store: store, Topology: &courier.Topology{
		Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}}},
	}}))
	t.Cleanup(func() { ts.Close(); store.Close() })
	return ts.URL, store
}

func TestSendAndRead(t *testing.T) {
	url, _ := cliServer(t)

	out, _, err := runCLI(t, `{"total": 42}`, "--server", url, "send", "--type", "invoice", "--route", "acme", "--id", "inv-1", "-H", "X-Tenant=acme")
	if err != nil || !strings.Contains(out, "created inv-1") {
		t.Fatalf("send from stdin: %q %v", out, err)
	}
	out, _, err = runCLI(t, `{"total": 42}`, "--server", url, "send", "--type", "invoice", "--route", "acme", "--id", "inv-1", "-H", "X-Tenant=acme")
	if err != nil || !strings.Contains(out, "exists inv-1") {
		t.Fatalf("send again: %q %v", out, err)
	}
	_, _, err = runCLI(t, `{"total": 43}`, "--server", url, "send", "--type", "invoice", "--route", "acme", "--id", "inv-1")
	if courier.ErrorCode(err) != courier.CodeConflict {
		t.Fatalf("send other content with the same id: %v", err)
	}
	_, _, err = runCLI(t, `x`, "--server", url, "send", "--type", "invoice", "--route", "nowhere")
	if courier.ErrorCode(err) != courier.CodeInvalidArgument || !strings.Contains(describe(err), "nowhere") {
		t.Fatalf("unknown route: %v", err)
	}

	// A file: its extension gives the content type; XML goes as bytes.
	file := filepath.Join(t.TempDir(), "order.xml")
	os.WriteFile(file, []byte("<order id=\"7\"/>"), 0o600)
	out, _, err = runCLI(t, "", "--server", url, "-o", "json", "send", file, "--type", "order", "--route", "acme", "--priority", "9", "--deliver-after", "1h")
	if err != nil {
		t.Fatal(err)
	}
	var sent api.Message
	if err := json.Unmarshal([]byte(out), &sent); err != nil {
		t.Fatalf("send -o json printed %q: %v", out, err)
	}
	if sent.ContentType != "text/xml; charset=utf-8" && sent.ContentType != "application/xml" {
		t.Errorf("content type from .xml: %q", sent.ContentType)
	}
	if sent.Priority != 9 || sent.NextAttemptAt == nil || time.Until(*sent.NextAttemptAt) < 50*time.Minute {
		t.Errorf("priority %d, due %v; want 9 and about an hour from now", sent.Priority, sent.NextAttemptAt)
	}

	out, _, err = runCLI(t, "", "--server", url, "messages", "list")
	if err != nil || !strings.Contains(out, "inv-1") || !strings.Contains(out, sent.ID) || !strings.HasPrefix(out, "ID") {
		t.Fatalf("messages list: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", url, "-o", "json", "messages", "list", "--type", "order")
	var list api.MessageList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Messages) != 1 || list.Messages[0].ID != sent.ID {
		t.Fatalf("messages list --type order -o json: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", url, "messages", "show", "inv-1")
	if err != nil || !strings.Contains(out, `"total": 42`) || !strings.Contains(out, "X-Tenant: acme") || !strings.Contains(out, "queued") {
		t.Fatalf("messages show: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", url, "messages", "show", sent.ID)
	if err != nil || !strings.Contains(out, `<order id="7"/>`) {
		t.Fatalf("messages show of an XML message: %q %v", out, err)
	}
	_, _, err = runCLI(t, "", "--server", url, "messages", "show", "nope")
	if courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("show a missing message: %v", err)
	}
	out, _, err = runCLI(t, "", "--server", url, "messages", "discard", "inv-1")
	if err != nil || !strings.Contains(out, "discarded inv-1") {
		t.Fatalf("discard: %q %v", out, err)
	}
	if _, _, err := runCLI(t, "", "--server", url, "-o", "yaml", "messages", "list"); err == nil {
		t.Error("-o yaml was accepted")
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("endpoints:\n  a: {transport: http, url: \"http://127.0.0.1:9000/in\"}\nroutes:\n  a: {endpoints: [a]}\n"), 0o600)
	out, _, err := runCLI(t, "", "config", "check", good)
	if err != nil || !strings.Contains(out, "is valid") || !strings.Contains(out, "1 routes") {
		t.Fatalf("check a good file: %q %v", out, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("listen: 127.0.0.1:8425\nroutes:\n  a: {endpoints: [missing]}\n"), 0o600)
	_, errOut, err := runCLI(t, "", "config", "check", bad)
	if err == nil {
		t.Fatal("a bad file passed the check")
	}
	if !strings.Contains(errOut, "bad.yaml:3") || !strings.Contains(errOut, "missing") {
		t.Fatalf("the error does not name file, line and the missing endpoint: %q", errOut)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	t.Setenv("COURIER_LISTEN", "0.0.0.0:0")
	t.Setenv("COURIER_STORE_PATH", filepath.Join(t.TempDir(), "db"))
	_, _, err := runCLI(t, "", "serve")
	if err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Fatalf("serve on 0.0.0.0: %v", err)
	}
}

func TestSuspendedBulk(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "courier.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	top := &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}}}}
	ts := httptest.NewServer(api.NewServer(api.Options{Store: store, Topology: top, Bulk: engine.NewBulk(store, nil, nil, nil, nil)}))
	t.Cleanup(func() { ts.Close(); store.Close() })
	for i, typ := range []string{"invoice", "invoice", "order"} {
		m := &courier.Message{ID: fmt.Sprintf("s-%d", i), Type: typ, Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		m.State, m.Reason = courier.StateSuspended, courier.ReasonExhausted
		if _, err := store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	out, _, err := runCLI(t, "", "--server", ts.URL, "suspended", "list", "--type", "invoice")
	if err != nil || !strings.Contains(out, "s-0") || !strings.Contains(out, "s-1") || strings.Contains(out, "s-2") {
		t.Fatalf("suspended list --type invoice: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", ts.URL, "suspended", "resubmit", "--type", "invoice")
	if err != nil || !strings.Contains(out, "resubmitted 2 messages") {
		t.Fatalf("suspended resubmit: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", ts.URL, "suspended", "discard")
	if err != nil || !strings.Contains(out, "discarded 1 messages") {
		t.Fatalf("suspended discard: %q %v", out, err)
	}
}

func TestEndpointsCommands(t *testing.T) {
	store, err := sqlite.Open(filepath.Join(t.TempDir(), "courier.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	top := &courier.Topology{Endpoints: map[string]*courier.Endpoint{
		"acme": {Name: "acme", Transport: courier.TransportHTTP, MaxConcurrency: 4, HTTP: courier.HTTPTarget{URL: "http://127.0.0.1:9/in"}}}}
	ts := httptest.NewServer(api.NewServer(api.Options{Store: store, Topology: top}))
	t.Cleanup(func() { ts.Close(); store.Close() })
	out, _, err := runCLI(t, "", "--server", ts.URL, "endpoints", "off", "acme")
	if err != nil || !strings.Contains(out, "endpoint acme is off") {
		t.Fatalf("endpoints off: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", ts.URL, "endpoints", "list")
	if err != nil || !strings.Contains(out, "acme") || !strings.Contains(out, "off") {
		t.Fatalf("endpoints list: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", ts.URL, "endpoints", "show", "acme")
	if err != nil || !strings.Contains(out, "endpoint_off by local") {
		t.Fatalf("endpoints show: %q %v", out, err)
	}
	out, _, err = runCLI(t, "", "--server", ts.URL, "endpoints", "on", "acme")
	if err != nil || !strings.Contains(out, "endpoint acme is active") {
		t.Fatalf("endpoints on: %q %v", out, err)
	}
	if _, _, err := runCLI(t, "", "--server", ts.URL, "endpoints", "off", "nope"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("switching an unknown endpoint: %v", err)
	}
}
