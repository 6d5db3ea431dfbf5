package main

import (
	"path/filepath"
	"testing"
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
