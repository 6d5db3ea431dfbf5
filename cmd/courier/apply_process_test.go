package main

import (
	"path/filepath"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
)

// apply leaves a claim check's need of public_url to the server it applies
// to: a server with public_url takes the endpoint though the file and the
// shell have none; one without refuses it and says why.
func TestApplyChecksClaimCheckOnTheServer(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "topology.yaml")
	writeFile(t, file, `endpoints:
  erp: {transport: file, dir: out, claim_check: {above: 1MiB}}
routes:
  erp: {endpoints: [erp]}
`)
	env := []string{"COURIER_PUBLIC_URL="} // nothing from the shell

	with := startNode(t, filepath.Join(dir), "public_url: https://courier.example.org\n")
	out, errOut, status := runBinary(t, env, "", "--server", with.url, "apply", "-f", file)
	if status != 0 {
		t.Fatalf("apply to a server with public_url: exit status %d\n%s%s", status, out, errOut)
	}
	binaryPrints(t, "", []string{"--server", with.url, "get", "endpoint", "erp"}, "claim_check")

	without := startNode(t, t.TempDir(), "")
	binaryFails(t, env, "", []string{"--server", without.url, "apply", "-f", file},
		"endpoints.erp.claim_check: needs public_url", "configuration of every node")
}

// Deleting what something uses says what uses it; a state that does not
// exist is answered with every state there is.
func TestDeleteInUseAndBadStateSayWhy(t *testing.T) {
	skipIfShort(t)
	dir := t.TempDir()
	p := startNode(t, dir, "")
	file := filepath.Join(dir, "topology.yaml")
	writeFile(t, file, `endpoints:
  erp: {transport: file, dir: out}
routes:
  erp: {endpoints: [erp]}
subscriptions:
  erp-orders: {types: [order.*], route: erp}
`)
	binaryPrints(t, "", []string{"--server", p.url, "apply", "-f", file}, "3 changed")
	errOut := binaryFails(t, nil, "", []string{"--server", p.url, "delete", "endpoint", "erp"},
		`endpoint "erp" is in use; change or delete what uses it first:`, `route "erp" uses endpoint "erp" (routes.erp.endpoints[0])`)
	binaryFails(t, nil, "", []string{"--server", p.url, "delete", "route", "erp"},
		`subscription "erp-orders" uses route "erp" (subscriptions.erp-orders.route)`)
	if strings.Contains(errOut, "not defined") {
		t.Errorf("delete of an endpoint in use says it is not defined: %s", errOut)
	}
	binaryFails(t, nil, "", []string{"--server", p.url, "messages", "list", "--state", "bogus"},
		`state "bogus" is not `+courier.OneOf(courier.States))
	out := binaryPrints(t, "", []string{"messages", "list", "--help"})
	if !strings.Contains(out, courier.OneOf(courier.States)) {
		t.Errorf("messages list --help does not name every state (%s):\n%s", courier.OneOf(courier.States), out)
	}
}
