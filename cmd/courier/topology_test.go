package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/topology"
)

// The secrets of the topology tests' API keys: an admin, who may change
// the topology, and an operator, who may not.
const (
	rootSecret = "courier_root-secret-for-the-topology-tests"
	opsSecret  = "courier_ops-secret-for-the-topology-tests"
)

// secretsKey returns a key for secrets_key made of one byte repeated.
func secretsKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// topologyServer serves the API over loopback with the topology held in
// store and its secrets sealed under key (oldKey reading what an earlier
// key sealed), as `courier serve` does when its file has no topology, with
// the keys root (admin) and ops (operator). It returns the server's URL.
func topologyServer(t *testing.T, store courier.Store, key, oldKey []byte) string {
	t.Helper()
	kr, err := topology.NewKeyring(key, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	var srv *api.Server
	cat, err := topology.Open(context.Background(), topology.Options{Store: store, Keyring: kr, OnChange: func(tp *courier.Topology) {
		if srv != nil {
			srv.SetTopology(tp)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	var keys []api.Key
	for name, k := range map[string]struct {
		role   courier.Role
		secret string
	}{"root": {courier.RoleAdmin, rootSecret}, "ops": {courier.RoleOperator, opsSecret}} {
		h, err := api.ParseKeyHash(api.HashSecret(k.secret))
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, api.Key{Name: name, Role: k.role, Hash: h})
	}
	srv = api.NewServer(api.Options{Store: store, Topology: cat.Topology(), Objects: cat, SigningKeys: cat, Keys: keys})
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	return ts.URL
}

// topologyFile is a file with one object of each kind, a signing secret
// among them, and values YAML could read as something other than the
// strings they are.
const topologyFile = `listen: 127.0.0.1:8425
outbound: {allow_networks: [127.0.0.0/8]}
endpoints:
  acme-primary:
    transport: http
    url: http://127.0.0.1:9000/inbox
    secret: whsec_c2VjcmV0LXNpZ25pbmcta2V5
    timeout: 10s
    suspension: {initial: 30s, factor: 1.5, max: 1h}
  acme-backup: {transport: file, dir: ./outbox}
routes:
  acme: {endpoints: [acme-primary, acme-backup], strategy: failover}
policies:
  invoice:
    schedule: [10s, 1m]
    priority: 8
subscriptions:
  erp-orders:
    types: [order.*]
    route: acme
    filter:
      headers: {X-Tenant: acme, X-Count: "5", X-Flag: "true", X-Null: "null", X-Hash: "#x", X-Colon: "a: b"}
`

// as returns the global flags that talk to url with the secret of a key.
func as(url, secret string, args ...string) []string {
	return append([]string{"--server", url, "--api-key", secret}, args...)
}

// writeTemp writes text to name in a fresh directory and returns its path.
func writeTemp(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	writeFile(t, path, text)
	return path
}

// topologyVersion reads the version of the server's topology.
func topologyVersion(t *testing.T, url string) int64 {
	t.Helper()
	top, err := api.NewClient(url, rootSecret).Topology(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return top.Version
}

func TestApplyCommand(t *testing.T) {
	url := topologyServer(t, sqlitetest.Open(t), secretsKey(1), nil)
	file := writeTemp(t, "courier.yaml", topologyFile)

	out := cliPrints(t, "", as(url, rootSecret, "apply", "-f", file, "--dry-run"),
		"endpoint/acme-primary created (dry run)", "subscription/erp-orders created (dry run)", "5 to change (dry run: nothing written)")
	if strings.Contains(out, "changed,") {
		t.Errorf("a dry run says it changed something:\n%s", out)
	}
	if v := topologyVersion(t, url); v != 0 {
		t.Fatalf("after a dry run the topology is at version %d, want 0", v)
	}

	cliPrints(t, "", as(url, rootSecret, "apply", "-f", file),
		"endpoint/acme-backup created\n", "endpoint/acme-primary created\n", "route/acme created\n", "policy/invoice created\n",
		"subscription/erp-orders created\n", "5 changed, version 1")
	if out := cliPrints(t, "", as(url, rootSecret, "apply", "-f", file), "nothing to change (version 1)"); strings.Count(out, "\n") != 1 {
		t.Errorf("applying the same file again prints more than that it changes nothing:\n%s", out)
	}

	// A replace shows the fields it changes.
	changed := strings.NewReplacer("9000/inbox", "9001/inbox", "    timeout: 10s\n", "    rate: 10/s\n", "initial: 30s", "initial: 1m").Replace(topologyFile)
	writeFile(t, file, changed)
	out = cliPrints(t, "", as(url, rootSecret, "apply", "-f", file), "endpoint/acme-primary configured\n",
		`    url: "http://127.0.0.1:9000/inbox" → "http://127.0.0.1:9001/inbox"`+"\n",
		`    suspension.initial: "30s" → "1m"`+"\n", `  + rate: "10/s"`+"\n", `  - timeout: "10s"`+"\n", "1 changed, version 2")
	if strings.Contains(out, "secret") || strings.Contains(out, "route/") {
		t.Errorf("the diff shows what did not change:\n%s", out)
	}

	// --prune deletes what the file lacks; --dry-run keeps it.
	noPolicies := strings.Replace(changed, "policies:\n  invoice:\n    schedule: [10s, 1m]\n    priority: 8\n", "", 1)
	writeFile(t, file, noPolicies)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", file), "nothing to change")
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", file, "--prune", "--dry-run"), "policy/invoice deleted (dry run)", "1 to change")
	if v := topologyVersion(t, url); v != 2 {
		t.Fatalf("after a dry run of --prune the topology is at version %d, want 2", v)
	}
	out, _, err := runCLI(t, "", as(url, rootSecret, "-o", "json", "apply", "-f", file, "--prune")...)
	var res api.ApplyResult
	if err != nil || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("apply --prune -o json: %v\n%s", err, out)
	}
	if len(res.Changes) != 1 || res.Changes[0].Action != courier.ActionDelete || res.Changes[0].Name != "invoice" || res.Version != 3 {
		t.Fatalf("apply --prune: %s", out)
	}
	top, err := api.NewClient(url, rootSecret).Topology(context.Background())
	if err != nil || len(top.Policies) != 0 || len(top.Endpoints) != 2 {
		t.Fatalf("after --prune: %+v %v", top, err)
	}

	// A file with errors changes nothing, and says where they are.
	bad := writeTemp(t, "bad.yaml", "endpoints:\n  acme-primary: {transport: http, url: \"http://127.0.0.1:9/in\"}\n  other: {transport: http, url: \"http://127.0.0.1:9/in\", timeout: soon}\nroutes:\n  acme: {endpoints: [acme-primary]}\n")
	_, errOut, err := runCLI(t, "", as(url, rootSecret, "apply", "-f", bad, "--prune")...)
	if err == nil || !strings.Contains(errOut, bad+":3: endpoints.other.timeout:") || !strings.Contains(errOut, "nothing was applied") {
		t.Fatalf("a file with an error: %v\n%s", err, errOut)
	}
	if v := topologyVersion(t, url); v != 3 {
		t.Fatalf("a file with an error moved the topology to version %d", v)
	}
	_, _, err = runCLI(t, "", as(url, rootSecret, "apply", "-f", writeTemp(t, "plain.yaml", "listen: 127.0.0.1:8425\n"))...)
	if err == nil || !strings.Contains(err.Error(), "none of the sections") {
		t.Fatalf("a file without a topology: %v", err)
	}

	// Only admin keys change the topology.
	_, _, err = runCLI(t, "", as(url, opsSecret, "apply", "-f", file)...)
	if courier.ErrorCode(err) != courier.CodePermissionDenied {
		t.Fatalf("an operator key applies: %v", err)
	}
}

func TestGetTopologyRoundTrip(t *testing.T) {
	url := topologyServer(t, sqlitetest.Open(t), secretsKey(1), nil)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", writeTemp(t, "courier.yaml", topologyFile)), "5 changed")

	exported := cliPrints(t, "", as(url, rootSecret, "get", "topology"), "# topology version 1\n", "endpoints:\n  acme-backup:\n",
		"    secret: set\n", "\nroutes:\n", "\npolicies:\n", "\nsubscriptions:\n", "    types: [order.*]\n")
	if strings.Contains(exported, "whsec_") || strings.Contains(exported, "c2VjcmV0") {
		t.Fatalf("get topology shows the secret:\n%s", exported)
	}
	if !strings.Contains(exported, "    suspension:\n      factor: 1.5\n      initial: 30s\n      max: 1h\n    timeout: 10s\n    transport: http\n    url: ") {
		t.Errorf("fields are not in alphabetical order:\n%s", exported)
	}
	// What get prints, apply takes back as it is: with --prune too, so
	// every object is in it, and secrets as "set" keep the stored ones.
	file := writeTemp(t, "topology.yaml", exported)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", file, "--prune"), "nothing to change (version 1)")

	// One kind, one object, JSON.
	if out := cliPrints(t, "", as(url, rootSecret, "get", "endpoint", "acme-primary"), "endpoints:\n  acme-primary:\n"); strings.Contains(out, "acme-backup") || strings.Contains(out, "routes:") {
		t.Errorf("get endpoint acme-primary prints more:\n%s", out)
	}
	cliPrints(t, "", as(url, rootSecret, "get", "route/acme"), "routes:\n  acme:\n    endpoints: [acme-primary, acme-backup]\n")
	out := cliPrints(t, "", as(url, rootSecret, "get", "endpoints", "-o", "json"))
	var top api.Topology
	if err := json.Unmarshal([]byte(out), &top); err != nil || len(top.Endpoints) != 2 || top.Routes != nil || top.Version != 1 {
		t.Fatalf("get endpoints -o json: %v\n%s", err, out)
	}
	cliPrints(t, "", as(url, rootSecret, "get", "policies"), "policies:\n  invoice:\n")
	if _, _, err := runCLI(t, "", as(url, rootSecret, "get", "endpoint", "nope")...); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Errorf("get a missing endpoint: %v", err)
	}
	if _, _, err := runCLI(t, "", as(url, rootSecret, "get", "widgets")...); err == nil || !strings.Contains(err.Error(), "not a kind") {
		t.Errorf("get widgets: %v", err)
	}

	// An empty topology is written with its sections, so that applying it
	// with --prune empties the store's.
	empty := topologyServer(t, sqlitetest.Open(t), secretsKey(1), nil)
	cliPrints(t, "", as(empty, rootSecret, "get", "topology"), "endpoints: {}\n\nroutes: {}\n\npolicies: {}\n\nsubscriptions: {}\n")
}

func TestDeleteCommand(t *testing.T) {
	url := topologyServer(t, sqlitetest.Open(t), secretsKey(1), nil)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", writeTemp(t, "courier.yaml", topologyFile)), "5 changed")

	_, _, err := runCLI(t, "", as(url, rootSecret, "delete", "endpoint", "acme-primary")...)
	if courier.ErrorCode(err) != courier.CodeConflict || !strings.Contains(describe(err), "routes.acme.endpoints[0]") || strings.Contains(describe(err), "(conflict)") {
		t.Fatalf("delete an endpoint a route uses: %v", err)
	}
	_, _, err = runCLI(t, "", as(url, rootSecret, "delete", "route", "acme")...)
	if courier.ErrorCode(err) != courier.CodeConflict || !strings.Contains(describe(err), "subscriptions.erp-orders.route") {
		t.Fatalf("delete a route a subscription uses: %v", err)
	}
	cliPrints(t, "", as(url, rootSecret, "delete", "subscription", "erp-orders"), "subscription/erp-orders deleted\n")
	_, _, err = runCLI(t, "", as(url, rootSecret, "delete", "routes", "acme", "--if-match", "7")...)
	if courier.ErrorCode(err) != courier.CodeFailedPrecondition {
		t.Fatalf("delete at another version: %v", err)
	}
	cliPrints(t, "", as(url, rootSecret, "delete", "route/acme", "--if-match", "1"), "route/acme deleted\n")
	cliPrints(t, "", as(url, rootSecret, "delete", "endpoint", "acme-primary"), "endpoint/acme-primary deleted\n")
	if _, _, err := runCLI(t, "", as(url, rootSecret, "delete", "endpoint", "acme-primary")...); courier.ErrorCode(err) != courier.CodeNotFound {
		t.Fatalf("delete it again: %v", err)
	}
	if _, _, err := runCLI(t, "", as(url, opsSecret, "delete", "endpoint", "acme-backup")...); courier.ErrorCode(err) != courier.CodePermissionDenied {
		t.Fatalf("an operator key deletes: %v", err)
	}
}

func TestAuditCommand(t *testing.T) {
	url := topologyServer(t, sqlitetest.Open(t), secretsKey(1), nil)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", writeTemp(t, "courier.yaml", topologyFile)), "5 changed")
	cliPrints(t, "", as(url, opsSecret, "endpoints", "off", "acme-backup"), "is off")
	cliPrints(t, "", as(url, rootSecret, "delete", "subscription", "erp-orders"), "deleted")

	out := cliPrints(t, "", as(url, rootSecret, "audit"), "AT ", "WHO", "VERSION/DETAIL")
	want := []string{
		"root delete subscription erp-orders version 2",
		"ops endpoint_off - acme-backup -",
		"root create subscription erp-orders version 1",
		"root create policy invoice version 1",
		"root create route acme version 1",
		"root create endpoint acme-primary version 1",
		"root create endpoint acme-backup version 1",
	}
	if got := auditRows(t, out); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit lists\n%s\nwant, newest first\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--who", "ops"}, []string{"ops endpoint_off - acme-backup -"}},
		{[]string{"--object", "routes"}, []string{"root create route acme version 1"}},
		{[]string{"--subject", "erp-orders", "--action", "delete"}, []string{"root delete subscription erp-orders version 2"}},
		{[]string{"--until", "1h"}, nil}, // an hour ago
		{[]string{"--since", "1h", "--action", "create", "--object", "endpoint"}, want[5:]},
	} {
		out := cliPrints(t, "", as(url, rootSecret, append([]string{"audit"}, tc.args...)...))
		if got := auditRows(t, out); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("audit %s lists\n%s\nwant\n%s", strings.Join(tc.args, " "), strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
		}
	}

	// --all follows the cursor through every page.
	_, errOut, err := runCLI(t, "", as(url, rootSecret, "audit", "--limit", "3")...)
	if err != nil || !strings.Contains(errOut, "--cursor") {
		t.Fatalf("audit --limit 3 does not say there is more: %v %q", err, errOut)
	}
	out = cliPrints(t, "", as(url, rootSecret, "-o", "json", "audit", "--limit", "3", "--all"))
	var page api.AuditPage
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Entries) != 7 || page.Next != "" {
		t.Fatalf("audit --limit 3 --all -o json: %v\n%s", err, out)
	}
	if e := page.Entries[0]; e.Action != courier.ActionDelete || e.Who != "root" || !strings.Contains(string(e.Before), `"route": "acme"`) {
		t.Errorf("the newest entry: %+v", e)
	}
	if _, _, err := runCLI(t, "", as(url, rootSecret, "audit", "--since", "yesterday")...); err == nil {
		t.Error("audit --since yesterday was accepted")
	}
}

func TestSecretsCommands(t *testing.T) {
	out := cliPrints(t, "", []string{"secrets", "new-key"})
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(out))
	if err != nil || len(key) != 32 {
		t.Fatalf("secrets new-key printed %q: %d bytes, %v", out, len(key), err)
	}
	if again := cliPrints(t, "", []string{"secrets", "new-key"}); again == out {
		t.Fatal("secrets new-key printed the same key twice")
	}

	// The documented rotation: a secret stored under one key, the nodes
	// restarted with a new key and the old one, a rotate, and the old key
	// no longer needed.
	store := sqlitetest.Open(t)
	url := topologyServer(t, store, secretsKey(1), nil)
	file := writeTemp(t, "courier.yaml", topologyFile)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", file), "5 changed")
	url = topologyServer(t, store, secretsKey(2), secretsKey(1))
	if _, _, err := runCLI(t, "", as(url, opsSecret, "secrets", "rotate")...); courier.ErrorCode(err) != courier.CodePermissionDenied {
		t.Fatalf("an operator key rotates: %v", err)
	}
	cliPrints(t, "", as(url, rootSecret, "secrets", "rotate"), "1 object sealed again under the current key")
	cliPrints(t, "", as(url, rootSecret, "secrets", "rotate"), "nothing to seal again")
	url = topologyServer(t, store, secretsKey(2), nil)
	cliPrints(t, "", as(url, rootSecret, "apply", "-f", file), "nothing to change")
	out = cliPrints(t, "", as(url, rootSecret, "audit", "--action", "rotate_secrets"))
	if got := auditRows(t, out); len(got) != 1 || got[0] != "root rotate_secrets endpoint acme-primary version 2" {
		t.Fatalf("audit --action rotate_secrets: %q", got)
	}
}

// auditRows returns the rows of courier audit's table after the time,
// their cells separated by one space.
func auditRows(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "AT ") {
		t.Fatalf("audit printed no header:\n%s", out)
	}
	var rows []string
	for _, l := range lines[1:] {
		rows = append(rows, strings.Join(strings.Fields(l)[2:], " "))
	}
	return rows
}

func TestSpecDiff(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		want          []string
	}{
		{`{"a":1}`, `{"a":1}`, nil},
		{`{"url":"http://a"}`, `{"url":"http://b"}`, []string{`    url: "http://a" → "http://b"`}},
		{`{"a":1,"rate":"10/s"}`, `{"a":1,"timeout":"5s"}`, []string{`  - rate: "10/s"`, `  + timeout: "5s"`}},
		{`{"s":{"initial":"1s","max":"1h"}}`, `{"s":{"initial":"2s"}}`, []string{`    s.initial: "1s" → "2s"`, `  - s.max: "1h"`}},
		{`{"e":["a","b"]}`, `{"e":["a"]}`, []string{`    e: ["a","b"] → ["a"]`}},
		{`{"n":1.50}`, `{"n":"1.50"}`, []string{`    n: 1.50 → "1.50"`}},
		{`{"h":"<&>"}`, `{}`, []string{`  - h: "<&>"`}},
	} {
		got, err := specDiff([]byte(tc.before), []byte(tc.after))
		if err != nil || strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("specDiff(%s, %s) = %q, %v; want %q", tc.before, tc.after, got, err, tc.want)
		}
	}
}

func TestTopologyCommandsHelp(t *testing.T) {
	// Every new command has help with an example.
	for _, args := range [][]string{{"apply"}, {"get"}, {"delete"}, {"audit"}, {"secrets", "new-key"}, {"secrets", "rotate"}} {
		out := cliPrints(t, "", append(args, "--help"), "Example")
		if !strings.Contains(out, "courier "+args[0]) {
			t.Errorf("courier %s --help has no example of it:\n%s", strings.Join(args, " "), out)
		}
	}
}
