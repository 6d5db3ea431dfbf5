package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// courier messages erase erases a message's payload only with --yes: a
// message still retrying (its receiver's directory is missing) is
// discarded with it, and messages show then prints the tombstone instead
// of the payload; the payload command says it is gone, when and by whom.
func TestMessagesErase(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	p := startNode(t, dir, fmt.Sprintf(`endpoints:
  erp: {transport: file, dir: %s}
routes:
  erp: {endpoints: [erp]}
`, filepath.Join(dir, "erp")))
	binaryPrints(t, `{"name": "Jane Doe"}`, []string{"--server", p.url, "send", "--type", "invoice", "--route", "erp", "--id", "inv-1"}, "created inv-1")
	c := api.NewClient(p.url, "")
	waitUntil(t, p, time.Minute, "inv-1 failed once", func() bool {
		m, err := c.Message(context.Background(), "inv-1")
		return err == nil && m.Attempts > 0 && m.State == courier.StateQueued
	})

	erase := []string{"--server", p.url, "messages", "erase", "inv-1", "--reason", "GDPR request 118"}
	binaryFails(t, nil, "", erase, "cannot be undone", "--yes")
	binaryPrints(t, "", []string{"--server", p.url, "messages", "show", "inv-1"}, "Jane Doe")

	binaryPrints(t, "", append(erase, "--yes"), "erased the payload of inv-1 (discarded)", "by local: GDPR request 118")
	out := binaryPrints(t, "", []string{"--server", p.url, "messages", "show", "inv-1"},
		"Erased:", "by local: GDPR request 118", "(payload erased ", "discard by local payload erased", "erase by local GDPR request 118", "State:           discarded")
	if strings.Contains(out, "Jane") {
		t.Errorf("messages show prints the erased payload:\n%s", out)
	}
	binaryPrints(t, "", []string{"--server", p.url, "messages", "show", "inv-1", "-o", "json"}, `"erased": {`, `"reason": "GDPR request 118"`)
	binaryFails(t, nil, "", []string{"--server", p.url, "messages", "payload", "inv-1"}, "gone", `erased at `, `by "local" (GDPR request 118)`)
	binaryFails(t, nil, "", []string{"--server", p.url, "messages", "resend", "inv-1"}, "its payload was erased")
	// Again: the same tombstone.
	binaryPrints(t, "", append(erase, "--yes"), "by local: GDPR request 118")
}
