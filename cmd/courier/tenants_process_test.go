package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Tenants through the command line, on a server whose tenants and
// topology live in the store: created and changed with their flags, each
// tenant's topology applied from a file of plain names (with --prune
// touching its own objects alone), tenants given by a file's tenants:
// section, and a tenant deleted with everything it owns.
func TestTenantsLifecycleCommands(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	p := startNode(t, dir, "")
	run := func(want []string, args ...string) string {
		t.Helper()
		return binaryPrints(t, "", append([]string{"--server", p.url}, args...), want...)
	}
	fails := func(want []string, args ...string) string {
		t.Helper()
		return binaryFails(t, nil, "", append([]string{"--server", p.url}, args...), want...)
	}

	run([]string{"tenant acme created"}, "tenants", "create", "acme", "--weight", "2", "--ingest-rate", "100/s",
		"--max-queued", "10", "--max-bytes", "1MiB", "--retention", "720h")
	run([]string{"tenant beta created"}, "tenants", "create", "beta")
	fails([]string{"tenant beta exists already"}, "tenants", "create", "beta", "--weight", "5")
	fails([]string{"tenants.gamma.weight: must be at least 1"}, "tenants", "create", "gamma", "--weight", "0")

	// Each tenant's topology in a file of its own, its names plain.
	acme := filepath.Join(dir, "acme.yaml")
	writeFile(t, acme, `endpoints:
  crm: {transport: file, dir: acme-out}
  pager: {transport: http, url: "http://127.0.0.1:9/pager"}
routes:
  orders: {endpoints: [crm]}
  ledger: {endpoints: [crm]}
`)
	beta := filepath.Join(dir, "beta.yaml")
	writeFile(t, beta, `endpoints:
  crm: {transport: file, dir: beta-out}
routes:
  orders: {endpoints: [crm]}
`)
	run([]string{"endpoint/crm created", "route/orders created", "4 changed"}, "--tenant", "acme", "apply", acme)
	run([]string{"2 changed"}, "--tenant", "beta", "apply", "-f", beta)
	run([]string{"orders", "ledger"}, "--tenant", "acme", "get", "routes")

	// set changes the settings given and keeps the others.
	run([]string{"tenant acme set"}, "tenants", "set", "acme", "--max-queued", "20", "--notify", "pager", "--max-per-hour", "3")
	out := run([]string{"Weight:", "2", "100/s", "of 20", "720h0m0s", "pager"}, "tenants", "show", "acme")
	if !regexp.MustCompile(`Max per hour:\s+3`).MatchString(out) {
		t.Errorf("tenants show acme does not show max per hour 3:\n%s", out)
	}
	fails([]string{`endpoint "nope" is not defined`}, "tenants", "set", "acme", "--notify", "nope")

	// A store tenant's quotas hold at ingest.
	run([]string{"tenant beta set"}, "tenants", "set", "beta", "--max-queued", "1")
	send := []string{"--server", p.url, "--tenant", "beta", "send", "--type", "invoice", "--route", "orders", "--deliver-after", "1h"}
	binaryPrints(t, `{"n": 1}`, send)
	binaryFails(t, nil, `{"n": 2}`, send, "max_queued")

	// A tenant's file applied with --prune deletes its own objects alone.
	writeFile(t, acme, `endpoints:
  crm: {transport: file, dir: acme-out}
  pager: {transport: http, url: "http://127.0.0.1:9/pager"}
routes:
  orders: {endpoints: [crm]}
`)
	run([]string{"route/ledger deleted", "1 changed"}, "--tenant", "acme", "apply", acme, "--prune")
	run([]string{"orders"}, "--tenant", "beta", "get", "routes")

	// A file's tenants: section gives tenants their settings.
	tenantsFile := filepath.Join(dir, "tenants.yaml")
	writeFile(t, tenantsFile, `tenants:
  gamma: {weight: 3, quotas: {max_endpoints: 5}}
`)
	run([]string{"tenant/gamma created"}, "apply", tenantsFile)
	run([]string{"Weight:", "3", "of 5"}, "tenants", "show", "gamma")

	// acme has messages waiting when it is deleted, beta one of its own.
	for _, id := range []string{"a-1", "a-2", "a-3"} {
		binaryPrints(t, `{"n": 1}`, []string{"--server", p.url, "--tenant", "acme", "send", "--id", id, "--type", "invoice",
			"--route", "orders", "--deliver-after", "1h"})
	}

	// Deleting asks, or needs --yes; default and system stay.
	fails([]string{"give --yes"}, "tenants", "delete", "acme")
	fails([]string{"cannot be deleted"}, "tenants", "delete", "default", "--yes")
	out = run([]string{"tenant acme deleted", "courier tenants erasing"}, "tenants", "delete", "acme", "--yes")
	m := regexp.MustCompile(`courier tenants erasing (\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("tenants delete names no operation:\n%s", out)
	}
	run([]string{"erasing tenant acme", "3 messages erased", "done", "operation " + m[1]}, "tenants", "erasing", m[1], "--wait")
	// A tenant made again under the name finds nothing of the one deleted.
	run([]string{"tenant acme created"}, "tenants", "create", "acme")
	if out := run(nil, "--tenant", "acme", "messages", "list"); strings.Contains(out, "a-1") {
		t.Errorf("the messages of a deleted tenant outlived it:\n%s", out)
	}
	run([]string{"tenant acme deleted"}, "tenants", "delete", "acme", "--yes", "--wait")
	run([]string{"invoice", "queued"}, "--tenant", "beta", "messages", "list") // beta's own message is untouched
	if out := run(nil, "tenants", "list"); strings.Contains(out, "acme") || !strings.Contains(out, "beta") {
		t.Errorf("tenants list after acme's delete:\n%s", out)
	}
	fails([]string{"no such tenant"}, "--tenant", "acme", "get", "routes")
	run([]string{"orders"}, "--tenant", "beta", "get", "routes")
	if out := run(nil, "get", "topology"); strings.Contains(out, "acme") {
		t.Errorf("the topology after acme's delete still has acme's objects:\n%s", out)
	}
}
