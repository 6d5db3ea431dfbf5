package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/courier-gw/courier/api"
)

// runBinary runs the courier binary with args, stdin and the environment
// variables env (NAME=VALUE) besides the test's own, and returns what it
// printed and its exit status.
func runBinary(t *testing.T, env []string, stdin string, args ...string) (stdout, stderr string, status int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, courierBin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		status = exit.ExitCode()
	default:
		t.Fatalf("courier %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), status
}

// binaryPrints runs the binary as runBinary does, and fails unless it
// succeeds and prints each of want on standard output; it returns what it
// printed.
func binaryPrints(t *testing.T, stdin string, args []string, want ...string) string {
	t.Helper()
	out, errOut, status := runBinary(t, nil, stdin, args...)
	if status != 0 {
		t.Fatalf("courier %s: exit status %d\n%s%s", strings.Join(args, " "), status, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Fatalf("courier %s does not print %q:\n%s", strings.Join(args, " "), w, out)
		}
	}
	return out
}

// binaryFails runs the binary as runBinary does, and fails unless it exits
// with status 1 and an error on standard error that says each of want
// (and no panic); it returns the error.
func binaryFails(t *testing.T, env []string, stdin string, args []string, want ...string) string {
	t.Helper()
	out, errOut, status := runBinary(t, env, stdin, args...)
	if status != 1 || strings.Contains(errOut, "panic") || strings.Contains(errOut, "goroutine ") {
		t.Fatalf("courier %s: exit status %d, want 1 with an error\n%s%s", strings.Join(args, " "), status, out, errOut)
	}
	for _, w := range want {
		if !strings.Contains(errOut, w) {
			t.Errorf("courier %s: the error does not say %q:\n%s", strings.Join(args, " "), w, errOut)
		}
	}
	return errOut
}

// A file over 1 MiB is streamed; whatever the server answers, the command
// says so and exits 1, without a panic.
func TestSendLargeFileErrors(t *testing.T) {
	skipIfShort(t)
	const secret = "courier_test_send_secret"
	dir := t.TempDir()
	p := startNode(t, dir, fmt.Sprintf(`max_payload: 2MiB
keys:
  erp: {role: sender, hash: %q}
endpoints:
  acme: {transport: file, dir: %s}
routes:
  acme: {endpoints: [acme]}
`, api.HashSecret(secret), filepath.Join(dir, "out")))
	large := filepath.Join(dir, "large.bin")
	writeFile(t, large, strings.Repeat("x", 3<<19)) // 1.5 MiB
	tooLarge := filepath.Join(dir, "too-large.bin")
	writeFile(t, tooLarge, strings.Repeat("x", 3<<20))
	key := []string{"COURIER_API_KEY=" + secret}

	send := func(file, route string) []string {
		return []string{"--server", p.url, "send", file, "--type", "invoice", "--route", route}
	}
	binaryFails(t, nil, "", send(large, "acme"), "COURIER_API_KEY", "unauthenticated")
	binaryFails(t, key, "", send(large, "nowhere"), `"nowhere"`, "invalid_argument")
	binaryFails(t, key, "", send(tooLarge, "acme"), "max_payload", "payload_too_large")
	out, errOut, status := runBinary(t, key, "", send(large, "acme")...)
	if status != 0 || !strings.Contains(out, "created ") || !strings.Contains(out, "route acme") {
		t.Fatalf("send a file of 1.5 MiB: exit status %d\n%s%s", status, out, errOut)
	}
}

// Without --route a message is published to the subscriptions of its type,
// and the command names them; a JSON payload from standard input arrives
// as its bytes, not encoded anew.
func TestSendPublishesAndKeepsTheBytes(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  erp: {transport: file, dir: %s}
  audit: {transport: file, dir: %s}
routes:
  erp: {endpoints: [erp]}
  audit: {endpoints: [audit]}
subscriptions:
  erp-orders: {types: [order.*], route: erp}
  audit: {types: [order.cancelled], route: audit}
`, filepath.Join(dir, "erp"), filepath.Join(dir, "audit")))

	payload := "{\n  \"note\": \"<b>cancelled</b> & refunded\",\n  \"total\": 1.50\n}\n"
	out := binaryPrints(t, payload, []string{"--server", p.url, "send", "--type", "order.cancelled", "--id", "o-1"},
		"created o-1 (type order.cancelled, published to 2 subscriptions: ")
	for _, sub := range []string{"erp-orders", "audit"} {
		if !strings.Contains(out, sub) {
			t.Errorf("send does not name the subscription %s: %s", sub, out)
		}
	}
	if strings.Contains(out, "route ,") || strings.Contains(out, "route )") {
		t.Errorf("send names an empty route: %s", out)
	}
	binaryPrints(t, payload, []string{"--server", p.url, "send", "--type", "order.cancelled", "--id", "o-1"}, "exists o-1")

	c := api.NewClient(p.url, "")
	body, _, err := c.Payload(context.Background(), "o-1")
	if err != nil {
		t.Fatal(err)
	}
	defer body.Close()
	var got bytes.Buffer
	if _, err := got.ReadFrom(body); err != nil {
		t.Fatal(err)
	}
	if got.String() != payload {
		t.Errorf("the stored payload is %q, want the bytes sent, %q", got.String(), payload)
	}
	m, err := c.Message(context.Background(), "o-1")
	if err != nil {
		t.Fatal(err)
	}
	if m.ContentType != "application/json" {
		t.Errorf("content type %q, want application/json", m.ContentType)
	}
	binaryPrints(t, "", []string{"--server", p.url, "messages", "show", "o-1", "-o", "json"}, `"<b>cancelled</b> & refunded"`)

	// To a route by name, as before.
	binaryPrints(t, `{"order": 42}`, []string{"--server", p.url, "send", "--type", "order.created", "--route", "erp"},
		"(type order.created, route erp, queued)")
}
