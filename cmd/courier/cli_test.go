package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	httptransport "github.com/courier-gw/courier/transport/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/engine"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
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

// cliPrints runs the command line as runCLI does, and fails unless it
// succeeds and prints each of want; it returns what it printed.
func cliPrints(t *testing.T, stdin string, args []string, want ...string) string {
	t.Helper()
	out, _, err := runCLI(t, stdin, args...)
	if err != nil {
		t.Fatalf("courier %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("courier %s does not print %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	return out
}

// apiServer serves the API with opts over HTTP until the test ends, and
// returns its URL.
func apiServer(t *testing.T, opts api.Options) string {
	t.Helper()
	ts := httptest.NewServer(api.NewServer(opts))
	t.Cleanup(ts.Close)
	return ts.URL
}

// cliServer serves the API on a fresh store with the route acme.
func cliServer(t *testing.T) (string, *sqlite.Store) {
	t.Helper()
	store := sqlitetest.Open(t)
	return apiServer(t, api.Options{Store: store, Topology: &courier.Topology{
		Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}}},
	}}), store
}

func TestSendAndRead(t *testing.T) {
	url, _ := cliServer(t)

	send := []string{"--server", url, "send", "--type", "invoice", "--route", "acme", "--id", "inv-1", "-H", "X-Tenant=acme"}
	cliPrints(t, `{"total": 42}`, send, "created inv-1")
	cliPrints(t, `{"total": 42}`, send, "exists inv-1")
	_, _, err := runCLI(t, `{"total": 43}`, "--server", url, "send", "--type", "invoice", "--route", "acme", "--id", "inv-1")
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
	out, _, err := runCLI(t, "", "--server", url, "-o", "json", "send", file, "--type", "order", "--route", "acme", "--priority", "9", "--deliver-after", "1h")
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

	if out := cliPrints(t, "", []string{"--server", url, "messages", "list"}, "inv-1", sent.ID); !strings.HasPrefix(out, "ID") {
		t.Fatalf("messages list without its header: %q", out)
	}
	out, _, err = runCLI(t, "", "--server", url, "-o", "json", "messages", "list", "--type", "order")
	var list api.MessageList
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || len(list.Messages) != 1 || list.Messages[0].ID != sent.ID {
		t.Fatalf("messages list --type order -o json: %q %v", out, err)
	}
	cliPrints(t, "", []string{"--server", url, "messages", "show", "inv-1"}, `"total": 42`, "X-Tenant: acme", "queued")
	cliPrints(t, "", []string{"--server", url, "messages", "show", sent.ID}, `<order id="7"/>`)
	_, _, err = runCLI(t, "", "--server", url, "messages", "show", "nope")
	if courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("show a missing message: %v", err)
	}
	cliPrints(t, "", []string{"--server", url, "messages", "discard", "inv-1"}, "discarded inv-1")
	if _, _, err := runCLI(t, "", "--server", url, "-o", "yaml", "messages", "list"); err == nil {
		t.Error("-o yaml was accepted")
	}
}

func TestConfigCheck(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte("endpoints:\n  a: {transport: http, url: \"http://127.0.0.1:9000/in\"}\nroutes:\n  a: {endpoints: [a]}\n"), 0o600)
	cliPrints(t, "", []string{"config", "check", good}, "is valid", "1 endpoint, 1 route, 0 policies")
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
	store := sqlitetest.Open(t)
	top := &courier.Topology{Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}}}}
	url := apiServer(t, api.Options{Store: store, Topology: top, Bulk: engine.NewBulk(store, nil, nil, nil, nil)})
	for i, typ := range []string{"invoice", "invoice", "order"} {
		m := &courier.Message{ID: fmt.Sprintf("s-%d", i), Type: typ, Route: "acme", Payload: []byte("x"), ContentType: "text/plain"}
		courier.Accept(m, courier.DefaultPolicy(), false, time.Now())
		m.State, m.Reason = courier.StateSuspended, courier.ReasonExhausted
		if _, err := store.Ingest(context.Background(), []*courier.Message{m}); err != nil {
			t.Fatal(err)
		}
	}
	if out := cliPrints(t, "", []string{"--server", url, "suspended", "list", "--type", "invoice"}, "s-0", "s-1"); strings.Contains(out, "s-2") {
		t.Fatalf("suspended list --type invoice lists an order: %q", out)
	}
	cliPrints(t, "", []string{"--server", url, "suspended", "resubmit", "--type", "invoice"}, "resubmitted 2 messages")
	cliPrints(t, "", []string{"--server", url, "suspended", "discard"}, "discarded 1 message (")
}

func TestEndpointsCommands(t *testing.T) {
	top := &courier.Topology{Endpoints: map[string]*courier.Endpoint{
		"acme": {Name: "acme", Transport: courier.TransportHTTP, MaxConcurrency: 4, Settings: &httptransport.Settings{URL: "http://127.0.0.1:9/in"}}}}
	url := apiServer(t, api.Options{Store: sqlitetest.Open(t), Topology: top})
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"endpoints", "off", "acme"}, []string{"endpoint acme is off"}},
		{[]string{"endpoints", "list"}, []string{"acme", "off"}},
		{[]string{"endpoints", "show", "acme"}, []string{"endpoint_off by local"}},
		{[]string{"endpoints", "on", "acme"}, []string{"endpoint acme is active"}},
	} {
		cliPrints(t, "", append([]string{"--server", url}, tc.args...), tc.want...)
	}
	if _, _, err := runCLI(t, "", "--server", url, "endpoints", "off", "nope"); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("switching an unknown endpoint: %v", err)
	}
}

// A file over 1 MiB is sent streamed, kept as a blob, and sending it again
// under its id is answered "exists".
func TestSendLargeFile(t *testing.T) {
	store := sqlitetest.Open(t)
	url := apiServer(t, api.Options{Store: store, MaxPayload: 8 << 20, Topology: &courier.Topology{
		Routes: map[string]*courier.Route{"acme": {Name: "acme", Endpoints: []string{"acme"}}},
	}})
	file := filepath.Join(t.TempDir(), "catalogue.xml")
	payload := []byte(strings.Repeat("<item/>", courier.InlineMax/7+1000))
	if err := os.WriteFile(file, payload, 0o600); err != nil {
		t.Fatal(err)
	}
	send := []string{"--server", url, "send", file, "--type", "catalogue", "--route", "acme", "--id", "cat-1", "-H", "X-Tenant=acme", "--priority", "2"}
	cliPrints(t, "", send, "created cat-1")
	cliPrints(t, "", send, "exists cat-1")
	m, err := store.Message(context.Background(), "cat-1")
	if err != nil || !m.HasBlob() || m.Digest != courier.PayloadDigest(payload) || m.Headers["X-Tenant"] != "acme" || m.Priority != 2 {
		t.Fatalf("stored %+v, %v; want a blob of the file with its header and priority", m, err)
	}
	if !strings.Contains(m.ContentType, "xml") {
		t.Errorf("content type %q, want the file's", m.ContentType)
	}
	cliPrints(t, "", []string{"--server", url, "messages", "show", "cat-1"}, "too large to show", courier.PayloadDigest(payload))
	out, _, err := runCLI(t, "", "--server", url, "messages", "payload", "cat-1")
	if err != nil || out != string(payload) {
		t.Fatalf("messages payload: %d bytes (equal %v), %v", len(out), out == string(payload), err)
	}
}
