package main

import (
	"strings"
	"testing"

	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
)

// courier keys list shows the keys of the server's store, as a table or
// as JSON, and refuses an output it does not know.
func TestKeysList(t *testing.T) {
	url := topologyServer(t, sqlitetest.Open(t), secretsKey(1), nil)
	cliPrints(t, "", as(url, rootSecret, "keys", "create", "root", "--role", "admin"), "key root created")
	cliPrints(t, "", as(url, rootSecret, "keys", "create", "erp", "--role", "sender"), "key erp created")

	cliPrints(t, "", as(url, rootSecret, "keys", "list"), "NAME", "ROLE", "root", "admin", "erp", "sender")
	cliPrints(t, "", as(url, rootSecret, "keys", "list", "-o", "json"), `"name": "erp"`, `"role": "sender"`)
	if _, _, err := runCLI(t, "", as(url, rootSecret, "keys", "list", "-o", "yaml")...); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("keys list takes -o yaml: %v", err)
	}
}
