package topology_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	amqptransport "github.com/courier-gw/courier/transport/amqp"
	httptransport "github.com/courier-gw/courier/transport/http"
	smtptransport "github.com/courier-gw/courier/transport/smtp"
	"strings"
	"sync"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/config"
	"github.com/courier-gw/courier/internal/testkit/pgtest"
	"github.com/courier-gw/courier/internal/testkit/sqlitetest"
	"github.com/courier-gw/courier/postgres"
	"github.com/courier-gw/courier/topology"
)

// stores runs a test on both stores.
func stores(t *testing.T, test func(t *testing.T, st courier.Store)) {
	t.Run("sqlite", func(t *testing.T) { test(t, sqlitetest.Open(t)) })
	t.Run("postgres", func(t *testing.T) { test(t, pgtest.Open(t)) })
}

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func open(t *testing.T, st courier.Store, keys ...[]byte) *topology.Keeper {
	t.Helper()
	var cur, old []byte
	if len(keys) > 0 {
		cur = keys[0]
	}
	if len(keys) > 1 {
		old = keys[1]
	}
	kr, err := topology.NewKeyring(cur, old)
	if err != nil {
		t.Fatal(err)
	}
	c, err := topology.Open(context.Background(), topology.Options{Store: st, Keyring: kr})
	if err != nil {
		t.Fatalf("open the keeper: %v", err)
	}
	return c
}

func put(t *testing.T, c *topology.Keeper, kind courier.TopologyKind, name, spec string) (courier.TopologyObject, bool) {
	t.Helper()
	o, created, err := c.Put(context.Background(), "admin", kind, name, []byte(spec), -1)
	if err != nil {
		t.Fatalf("put %s %s: %v", kind, name, err)
	}
	return o, created
}

func wantCode(t *testing.T, err error, code courier.Code, contains ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s", code)
	}
	if got := courier.ErrorCode(err); got != code {
		t.Fatalf("error %v: code %s, want %s", err, got, code)
	}
	for _, s := range contains {
		if !strings.Contains(courier.ErrorMessage(err), s) {
			t.Errorf("error %q does not say %q", courier.ErrorMessage(err), s)
		}
	}
}

func TestPutReplaceDelete(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st)
		o, created := put(t, c, courier.KindEndpoint, "acme", `{"transport": "http", "url": "http://127.0.0.1:9/in"}`)
		if !created || o.Version != 1 || c.Version() != 1 {
			t.Fatalf("created %v, version %d, catalog at %d; want a new object at version 1", created, o.Version, c.Version())
		}
		if got := c.Topology().Endpoints["acme"]; got == nil || httptransport.Of(got).URL != "http://127.0.0.1:9/in" {
			t.Fatalf("the topology's endpoint: %+v", got)
		}
		// The same spec, spelt otherwise, changes nothing.
		if o, created := put(t, c, courier.KindEndpoint, "acme", `{"url":"http://127.0.0.1:9/in","transport":"http"}`); created || o.Version != 1 || c.Version() != 1 {
			t.Fatalf("an unchanged put: created %v, version %d, catalog at %d", created, o.Version, c.Version())
		}
		if o, created := put(t, c, courier.KindEndpoint, "acme", `{"transport": "http", "url": "http://127.0.0.1:9/new", "timeout": "5s"}`); created || o.Version != 2 {
			t.Fatalf("a replace: created %v, version %d", created, o.Version)
		}
		if e := c.Topology().Endpoints["acme"]; httptransport.Of(e).URL != "http://127.0.0.1:9/new" || e.Timeout != 5*time.Second {
			t.Fatalf("the replaced endpoint: %s, %s", httptransport.Of(e).URL, e.Timeout)
		}

		// Checked as the file is, the error naming the field.
		_, _, err := c.Put(ctx, "admin", courier.KindEndpoint, "bad", []byte(`{"transport": "http", "url": "ftp://x"}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "endpoints.bad.url")
		_, _, err = c.Put(ctx, "admin", courier.KindRoute, "r", []byte(`{"endpoints": ["acme", "nope"]}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "routes.r.endpoints[1]", `"nope"`)
		_, _, err = c.Put(ctx, "admin", courier.KindRoute, "r", []byte(`["acme"]`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "routes.r")
		if c.Version() != 2 {
			t.Fatalf("refused changes moved the version to %d", c.Version())
		}

		put(t, c, courier.KindRoute, "r", `{"endpoints": ["acme"]}`)
		put(t, c, courier.KindSubscription, "s", `{"types": ["order.*"], "route": "r"}`)
		put(t, c, courier.KindPolicy, "invoice", `{"max_attempts": 3, "fallback": {"route": "r", "after": "1h"}}`)
		if p := c.Topology().Policy("invoice"); p.MaxAttempts != 3 || p.Fallback == nil {
			t.Fatalf("the policy: %+v", p)
		}

		// What others use cannot go.
		wantCode(t, c.Delete(ctx, "admin", courier.KindEndpoint, "acme", -1), courier.CodeConflict, "routes.r.endpoints[0]")
		wantCode(t, c.Delete(ctx, "admin", courier.KindRoute, "r", -1), courier.CodeConflict, "subscriptions.s.route", "policies.invoice.fallback.route")
		// Nor can a replace take away what another object needs.
		_, _, err = c.Put(ctx, "admin", courier.KindEndpoint, "mail", []byte(`{"transport": "file", "dir": "/tmp"}`), -1)
		if err != nil {
			t.Fatal(err)
		}
		put(t, c, courier.KindPolicy, "alert", `{"escalate": [{"after": "1h", "notify": "acme"}]}`)
		_, _, err = c.Put(ctx, "admin", courier.KindEndpoint, "acme", []byte(`{"transport": "file", "dir": "/tmp"}`), -1)
		wantCode(t, err, courier.CodeConflict, "policies.alert.escalate[0].notify")

		for _, d := range []struct {
			kind courier.TopologyKind
			name string
		}{{courier.KindSubscription, "s"}, {courier.KindPolicy, "invoice"}, {courier.KindPolicy, "alert"}, {courier.KindRoute, "r"}, {courier.KindEndpoint, "acme"}} {
			if err := c.Delete(ctx, "admin", d.kind, d.name, -1); err != nil {
				t.Fatalf("delete %s %s: %v", d.kind, d.name, err)
			}
		}
		wantCode(t, c.Delete(ctx, "admin", courier.KindEndpoint, "acme", -1), courier.CodeNotFound)
		if tp := c.Topology(); len(tp.Routes) != 0 || len(tp.Endpoints) != 1 || len(tp.Subscriptions) != 0 {
			t.Fatalf("after the deletes: %d routes, %d endpoints, %d subscriptions", len(tp.Routes), len(tp.Endpoints), len(tp.Subscriptions))
		}

		// A fresh keeper reads what the store holds, deletes included.
		again := open(t, st)
		if again.Version() != c.Version() || len(again.Objects("")) != 1 {
			t.Fatalf("reopened: version %d (want %d), %d objects", again.Version(), c.Version(), len(again.Objects("")))
		}
		// Re-created after a delete.
		if _, created := put(t, again, courier.KindEndpoint, "acme", `{"transport": "http", "url": "http://127.0.0.1:9/in"}`); !created {
			t.Fatal("a re-created endpoint is not reported as created")
		}
	})
}

func TestConditionalChanges(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st)
		o, _ := put(t, c, courier.KindEndpoint, "e", `{"transport": "file", "dir": "/tmp/a"}`)
		put(t, c, courier.KindEndpoint, "other", `{"transport": "file", "dir": "/tmp/b"}`)
		_, _, err := c.Put(ctx, "admin", courier.KindEndpoint, "e", []byte(`{"transport": "file", "dir": "/tmp/c"}`), o.Version+1)
		wantCode(t, err, courier.CodeFailedPrecondition, "version")
		if _, _, err := c.Put(ctx, "admin", courier.KindEndpoint, "e", []byte(`{"transport": "file", "dir": "/tmp/c"}`), o.Version); err != nil {
			t.Fatalf("a put at the object's version: %v", err)
		}
		_, _, err = c.Put(ctx, "admin", courier.KindEndpoint, "e", []byte(`{"transport": "file", "dir": "/tmp/d"}`), 0)
		wantCode(t, err, courier.CodeFailedPrecondition, "exists")
		wantCode(t, c.Delete(ctx, "admin", courier.KindEndpoint, "e", o.Version), courier.CodeFailedPrecondition)
		if _, _, err := c.Put(ctx, "admin", courier.KindEndpoint, "new", []byte(`{"transport": "file", "dir": "/tmp/e"}`), 0); err != nil {
			t.Fatalf("a create-only put of a new object: %v", err)
		}
	})
}

func TestSecretsSealed(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		key := newKey(t)
		c := open(t, st, key)
		put(t, c, courier.KindEndpoint, "hook", `{"transport": "http", "url": "http://127.0.0.1:9/in", "secret": "whsec_c2VjcmV0LXNpZ25pbmcta2V5"}`)
		put(t, c, courier.KindEndpoint, "mail", `{"transport": "smtp", "addr": "127.0.0.1:25", "from": "a@example.org", "to": ["b@example.org"], "username": "u", "password": "hunter2-password"}`)
		put(t, c, courier.KindEndpoint, "mq", `{"transport": "amqp", "url": "amqp://guest:broker-pass@127.0.0.1:5672/", "routing_key": "in"}`)

		// The store holds no secret in the clear.
		objs, _, err := st.TopologyChanges(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			for _, secret := range []string{"c2VjcmV0LXNpZ25pbmcta2V5", "hunter2-password", "broker-pass"} {
				if strings.Contains(string(o.Spec), secret) {
					t.Errorf("the store holds %s %s with a secret in the clear: %s", o.Kind, o.Name, o.Spec)
				}
			}
		}
		// Answers show "set"; the topology has the secrets.
		for name, want := range map[string]string{"hook": `"secret":"set"`, "mail": `"password":"set"`, "mq": `guest:set@`} {
			o, _ := c.Object(courier.KindEndpoint, name)
			if !strings.Contains(string(o.Spec), want) {
				t.Errorf("%s is shown as %s; want %s in it", name, o.Spec, want)
			}
		}
		tp := c.Topology()
		if httptransport.Of(tp.Endpoints["hook"]).Secrets[0] != "whsec_c2VjcmV0LXNpZ25pbmcta2V5" || smtptransport.Of(tp.Endpoints["mail"]).Password != "hunter2-password" ||
			amqptransport.Of(tp.Endpoints["mq"]).URL != "amqp://guest:broker-pass@127.0.0.1:5672/" {
			t.Fatalf("the topology lacks the secrets: %q %q %q", httptransport.Of(tp.Endpoints["hook"]).Secrets, smtptransport.Of(tp.Endpoints["mail"]).Password, amqptransport.Of(tp.Endpoints["mq"]).URL)
		}
		// The audit log shows them as "set" too.
		page, err := st.Audit(ctx, courier.AuditFilter{Object: courier.KindEndpoint})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range page.Actions {
			if strings.Contains(a.After, "hunter2") || strings.Contains(a.After, "broker-pass") || strings.Contains(a.After, "c2VjcmV0") {
				t.Errorf("the audit log shows a secret: %s", a.After)
			}
		}

		// A spec read back, edited and written again keeps the secret.
		o, _ := c.Object(courier.KindEndpoint, "mq")
		edited := strings.Replace(string(o.Spec), `"routing_key":"in"`, `"routing_key":"in2"`, 1)
		put(t, c, courier.KindEndpoint, "mq", edited)
		if got := c.Topology().Endpoints["mq"]; amqptransport.Of(got).URL != "amqp://guest:broker-pass@127.0.0.1:5672/" || amqptransport.Of(got).RoutingKey != "in2" {
			t.Fatalf("after writing the shown spec back: %s %s", amqptransport.Of(got).URL, amqptransport.Of(got).RoutingKey)
		}
		_, _, err = c.Put(ctx, "admin", courier.KindEndpoint, "fresh", []byte(`{"transport": "http", "url": "http://127.0.0.1:9/in", "secret": "set"}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "endpoints.fresh.secret")

		// Another node without the key cannot read them; one without any key cannot write them.
		kr, _ := topology.NewKeyring(newKey(t), nil)
		if _, err := topology.Open(ctx, topology.Options{Store: st, Keyring: kr}); err == nil || !strings.Contains(err.Error(), "key") {
			t.Fatalf("a keeper with another key opened: %v", err)
		}
		bare := open(t, sqlitetest.Open(t))
		_, _, err = bare.Put(ctx, "admin", courier.KindEndpoint, "hook", []byte(`{"transport": "http", "url": "http://127.0.0.1:9/in", "secret": "whsec_c2VjcmV0"}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "secrets_key")

		// Rotation: the new key current and the old one kept to read with,
		// then the old one dropped.
		next := newKey(t)
		both := open(t, st, next, key)
		n, err := both.RotateSecrets(ctx, "admin")
		if err != nil || n != 3 {
			t.Fatalf("rotate: %d objects, %v; want 3", n, err)
		}
		if n, err := both.RotateSecrets(ctx, "admin"); err != nil || n != 0 {
			t.Fatalf("a second rotation: %d objects, %v; want none", n, err)
		}
		after := open(t, st, next)
		if smtptransport.Of(after.Topology().Endpoints["mail"]).Password != "hunter2-password" {
			t.Fatal("after the rotation the new key alone does not open the secrets")
		}
	})
}

func specs(t *testing.T, yaml string) config.Specs {
	t.Helper()
	cfg, err := config.Parse("apply.yaml", []byte(yaml), nil)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return cfg.Specs
}

func TestApply(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st)
		file := specs(t, `
endpoints:
  a: {transport: http, url: "http://127.0.0.1:9/a"}
  b: {transport: http, url: "http://127.0.0.1:9/b"}
routes:
  r: {endpoints: [a, b], strategy: failover}
policies:
  default: {max_attempts: 5}
  invoice: {max_age: 1h}
subscriptions:
  s: {types: [invoice], route: r}
`)
		dry, err := c.Apply(ctx, "admin", file, courier.Applying{DryRun: true})
		if err != nil || len(dry) != 6 || c.Version() != 0 {
			t.Fatalf("dry run: %d changes, %v, version %d; want 6 changes and nothing written", len(dry), err, c.Version())
		}
		changes, err := c.Apply(ctx, "admin", file, courier.Applying{})
		if err != nil || len(changes) != 6 || c.Version() != 1 {
			t.Fatalf("apply: %d changes, %v, version %d", len(changes), err, c.Version())
		}
		if p := c.Topology().Policy("invoice"); p.MaxAttempts != 5 || p.MaxAge != time.Hour {
			t.Fatalf("invoice does not inherit from default: %+v", p)
		}
		if changes, err := c.Apply(ctx, "admin", file, courier.Applying{}); err != nil || len(changes) != 0 || c.Version() != 1 {
			t.Fatalf("applied again: %d changes, %v, version %d; want nothing", len(changes), err, c.Version())
		}

		// A file with an error changes nothing, and says every problem.
		bad := specs(t, `
endpoints:
  a: {transport: http, url: "http://127.0.0.1:9/a2"}
  b: {transport: http, url: "http://127.0.0.1:9/b"}
  c: {transport: http, url: "http://127.0.0.1:9/c"}
routes:
  r: {endpoints: [a, b], strategy: failover}
`)
		bad[courier.KindEndpoint]["c"] = []byte(`{"transport": "http", "url": "nope"}`)
		bad[courier.KindRoute]["q"] = []byte(`{"endpoints": ["zz"]}`)
		_, err = c.Apply(ctx, "admin", bad, courier.Applying{})
		wantCode(t, err, courier.CodeInvalidArgument, "endpoints.c.url")
		if c.Version() != 1 || httptransport.Of(c.Topology().Endpoints["a"]).URL != "http://127.0.0.1:9/a" {
			t.Fatalf("a refused apply changed the topology (version %d)", c.Version())
		}

		// Prune deletes what the file lacks.
		smaller := specs(t, `
endpoints:
  a: {transport: http, url: "http://127.0.0.1:9/a"}
routes:
  r: {endpoints: [a]}
`)
		changes, err = c.Apply(ctx, "admin", smaller, courier.Applying{Prune: true})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ch := range changes {
			got = append(got, fmt.Sprintf("%s %s %s", ch.Kind, ch.Object, ch.Subject))
		}
		want := "replace route r|delete endpoint b|delete policy default|delete policy invoice|delete subscription s"
		if strings.Join(sortStrings(got), "|") != strings.Join(sortStrings(strings.Split(want, "|")), "|") {
			t.Fatalf("prune changes: %q\nwant %q", got, want)
		}
		if n := len(c.Objects("")); n != 2 {
			t.Fatalf("after prune %d objects, want 2", n)
		}
	})
}

func sortStrings(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestAuditRecordsChanges(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st)
		put(t, c, courier.KindEndpoint, "e", `{"transport": "file", "dir": "/tmp/a"}`)
		put(t, c, courier.KindEndpoint, "e", `{"transport": "file", "dir": "/tmp/b"}`)
		put(t, c, courier.KindEndpoint, "e", `{"transport": "file", "dir": "/tmp/b"}`) // no change, no entry
		if err := c.Delete(ctx, "ops", courier.KindEndpoint, "e", -1); err != nil {
			t.Fatal(err)
		}
		page, err := st.Audit(ctx, courier.AuditFilter{Subject: "e"})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range page.Actions {
			got = append(got, fmt.Sprintf("%s %s v%d by %s: %s -> %s", a.Kind, a.Object, a.Version, a.Who, a.Before, a.After))
		}
		want := []string{
			`delete endpoint v3 by ops: {"dir":"/tmp/b","transport":"file"} -> `,
			`replace endpoint v2 by admin: {"dir":"/tmp/a","transport":"file"} -> {"dir":"/tmp/b","transport":"file"}`,
			`create endpoint v1 by admin:  -> {"dir":"/tmp/a","transport":"file"}`,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("audit:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	})
}

// Two nodes on one PostgreSQL database: each sees the other's changes,
// through the notice within a second, and writers that race each win once.
func TestNodesShareTheTopology(t *testing.T) {
	dsn, schema := pgtest.Schema(t)
	openPG := func() *postgres.Store {
		s, err := postgres.Open(context.Background(), dsn, postgres.Options{Schema: schema, MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan *courier.Topology, 100)
	stA, stB := openPG(), openPG()
	a := open(t, stA)
	b, err := topology.Open(ctx, topology.Options{Store: stB, ListenFunc: stB.ListenTopology, PollInterval: time.Hour,
		OnChange: func(t *courier.Topology) { changed <- t }})
	if err != nil {
		t.Fatal(err)
	}
	<-changed // the first read
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(context.Background())

	put(t, a, courier.KindEndpoint, "e", `{"transport": "file", "dir": "/tmp/a"}`)
	select {
	case tp := <-changed:
		if tp.Endpoints["e"] == nil {
			t.Fatal("node B's new topology lacks the endpoint node A made")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node B did not hear of node A's change (the poll is an hour: the notice should have told it)")
	}

	// Concurrent writers on both nodes: every change lands, none is lost.
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		for node, c := range map[string]*topology.Keeper{"a": a, "b": b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				spec, _ := json.Marshal(map[string]any{"transport": "file", "dir": fmt.Sprintf("/tmp/%s%d", node, i)})
				if _, _, err := c.Put(ctx, node, courier.KindEndpoint, fmt.Sprintf("%s%d", node, i), spec, -1); err != nil {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for _, c := range []*topology.Keeper{a, b} {
		if err := c.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		if n := len(c.Topology().Endpoints); n != 41 {
			t.Fatalf("a node has %d endpoints, want 41", n)
		}
	}
	if a.Version() != 41 || b.Version() != 41 {
		t.Fatalf("versions %d and %d, want 41: one per change", a.Version(), b.Version())
	}
	// Conditional writes racing on one object: exactly one wins.
	o, _ := a.Object(courier.KindEndpoint, "e")
	var wins, lost int
	var mu sync.Mutex
	for i := range 8 {
		wg.Add(1)
		c := []*topology.Keeper{a, b}[i%2]
		go func() {
			defer wg.Done()
			_, _, err := c.Put(ctx, "x", courier.KindEndpoint, "e", []byte(fmt.Sprintf(`{"transport": "file", "dir": "/tmp/race%d"}`, i)), o.Version)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case courier.ErrorCode(err) == courier.CodeFailedPrecondition:
				lost++
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 || lost != 7 {
		t.Fatalf("%d conditional writers won and %d lost; want 1 and 7", wins, lost)
	}
}

func TestKeys(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st)
		hash := func(s string) string { return fmt.Sprintf("sha256:%064x", []byte(s)) }
		put(t, c, courier.KindEndpoint, "e", `{"transport": "file", "dir": "/tmp/a"}`)
		put(t, c, courier.KindRoute, "acme", `{"endpoints": ["e"]}`)

		// The first key must be an admin key, or nobody could change keys.
		_, _, err := c.Put(ctx, "local", courier.KindKey, "erp", []byte(`{"role": "sender", "hash": "`+hash("erp")+`", "routes": ["acme"]}`), -1)
		wantCode(t, err, courier.CodeConflict, "admin key")
		put(t, c, courier.KindKey, "root", `{"role": "admin", "hash": "`+hash("root")+`"}`)
		put(t, c, courier.KindKey, "erp", `{"role": "sender", "hash": "`+hash("erp")+`", "routes": ["acme"]}`)
		if keys := c.Keys(); len(keys) != 2 || keys[0].Name != "erp" || keys[0].Routes[0] != "acme" || keys[1].Role != courier.RoleAdmin {
			t.Fatalf("keys: %+v", keys)
		}
		// Checked as the file's keys are.
		_, _, err = c.Put(ctx, "root", courier.KindKey, "dup", []byte(`{"role": "operator", "hash": "`+hash("erp")+`"}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "keys.dup.hash", `"erp"`)
		_, _, err = c.Put(ctx, "root", courier.KindKey, "shop", []byte(`{"role": "sender", "hash": "`+hash("shop")+`", "routes": ["nope"]}`), -1)
		wantCode(t, err, courier.CodeInvalidArgument, "keys.shop.routes[0]")
		wantCode(t, c.Delete(ctx, "root", courier.KindRoute, "acme", -1), courier.CodeConflict, "keys.erp.routes[0]")
		// The last admin key stays.
		wantCode(t, c.Delete(ctx, "root", courier.KindKey, "root", -1), courier.CodeConflict, "admin key")
		_, _, err = c.Put(ctx, "root", courier.KindKey, "root", []byte(`{"role": "operator", "hash": "`+hash("root")+`"}`), -1)
		wantCode(t, err, courier.CodeConflict, "admin key")

		// Keys are no part of the topology: not listed with it, not pruned.
		for _, o := range c.Objects("") {
			if o.Kind == courier.KindKey {
				t.Fatalf("the topology lists key %s", o.Name)
			}
		}
		if _, err := c.Apply(ctx, "root", map[courier.TopologyKind]map[string][]byte{courier.KindEndpoint: {"e": []byte(`{"transport": "file", "dir": "/tmp/a"}`)},
			courier.KindRoute: {"acme": []byte(`{"endpoints": ["e"]}`)}}, courier.Applying{Prune: true}); err != nil {
			t.Fatal(err)
		}
		if len(c.Keys()) != 2 {
			t.Fatalf("prune removed keys: %+v", c.Keys())
		}

		// With the keys in the file, the store's are not written.
		kf, err := topology.Open(ctx, topology.Options{Store: st, KeysFile: "courier.yaml"})
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = kf.Put(ctx, "root", courier.KindKey, "ops", []byte(`{"role": "operator", "hash": "`+hash("ops")+`"}`), -1)
		wantCode(t, err, courier.CodeConflict, "courier.yaml")
	})
}

// A claim check is refused on a node without public_url, on which its
// notices' URLs are built, and taken on one with it.
func TestClaimCheckNeedsPublicURL(t *testing.T) {
	st := sqlitetest.Open(t)
	c := open(t, st)
	spec := `{"transport": "http", "url": "http://127.0.0.1:9/in", "claim_check": {"above": "2MiB"}}`
	_, _, err := c.Put(context.Background(), "admin", courier.KindEndpoint, "archive", []byte(spec), -1)
	wantCode(t, err, courier.CodeInvalidArgument, "endpoints.archive.claim_check", "public_url")
	// Other changes still go through.
	put(t, c, courier.KindEndpoint, "plain", `{"transport": "http", "url": "http://127.0.0.1:9/in"}`)

	withURL, err := topology.Open(context.Background(), topology.Options{Store: st, PublicURL: "https://courier.example.org", Retention: 72 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	long := `{"transport": "http", "url": "http://127.0.0.1:9/in", "claim_check": {"ttl": "72h"}}`
	_, _, err = withURL.Put(context.Background(), "admin", courier.KindEndpoint, "archive", []byte(long), -1)
	wantCode(t, err, courier.CodeInvalidArgument, "endpoints.archive.claim_check.ttl", "retention")
	if _, _, err := withURL.Put(context.Background(), "admin", courier.KindEndpoint, "archive", []byte(spec), -1); err != nil {
		t.Fatalf("a claim check on a node with public_url: %v", err)
	}
	if got := withURL.Topology().Endpoints["archive"].ClaimCheck; got == nil || got.Above != 2<<20 {
		t.Fatalf("claim check stored as %+v", got)
	}
}

// The store holds the tenants' objects and the file their settings: every
// topology of the store's is given the file's tenants, and a reload's.
func TestTenantsFromTheFile(t *testing.T) {
	st := sqlitetest.Open(t)
	acme := map[string]*courier.Tenant{"acme": {Name: "acme", Weight: 2}}
	var changes []*courier.Topology
	c, err := topology.Open(context.Background(), topology.Options{Store: st, Tenants: acme,
		OnChange: func(t *courier.Topology) { changes = append(changes, t) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Topology().Tenants["acme"]; got == nil || got.Weight != 2 {
		t.Fatalf("the opened topology's tenant acme: %+v", got)
	}
	put(t, c, courier.KindEndpoint, "acme/crm", `{"transport": "http", "url": "https://crm.acme.example/in"}`)
	if top := c.Topology(); top.Tenants["acme"] == nil || top.Endpoints["acme/crm"] == nil {
		t.Fatalf("after a change, the topology has tenants %v and endpoints %v; want acme's", top.Tenants, top.Endpoints)
	}
	c.SetTenants(map[string]*courier.Tenant{"acme": {Name: "acme", Weight: 5}})
	top := c.Topology()
	if top.Tenants["acme"].Weight != 5 || top.Endpoints["acme/crm"] == nil {
		t.Errorf("after the reload: tenant %+v, endpoints %v; want weight 5 and acme/crm kept", top.Tenants["acme"], top.Endpoints)
	}
	if len(changes) == 0 || changes[len(changes)-1] != top {
		t.Error("the reload's tenants were not told as a change")
	}
}

// A tenant's max_endpoints refuses a change that gives it one more, not
// one that rewrites an endpoint it has.
func TestTenantEndpointCap(t *testing.T) {
	st := sqlitetest.Open(t)
	c, err := topology.Open(context.Background(), topology.Options{Store: st,
		Tenants: map[string]*courier.Tenant{"acme": {Name: "acme", Weight: 1, Quotas: courier.Quotas{MaxEndpoints: 1}}, "beta": {Name: "beta", Weight: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	put(t, c, courier.KindEndpoint, "acme/crm", `{"transport": "http", "url": "https://crm.acme.example/in"}`)
	put(t, c, courier.KindEndpoint, "acme/crm", `{"transport": "http", "url": "https://crm.acme.example/v2"}`)
	put(t, c, courier.KindEndpoint, "beta/crm", `{"transport": "http", "url": "https://crm.beta.example/in"}`)
	_, _, err = c.Put(context.Background(), "admin", courier.KindEndpoint, "acme/erp", []byte(`{"transport": "http", "url": "https://erp.acme.example/in"}`), -1)
	wantCode(t, err, courier.CodeQuotaExceeded, "tenant acme would have 2 endpoints, over its max_endpoints quota of 1")
	if c.Topology().Endpoints["acme/erp"] != nil {
		t.Error("the endpoint over the cap was taken")
	}
}

// An http endpoint's credentials and secret headers are sealed in the
// store like its signing secret, shown as "set", and kept when the shown
// spec is written back.
func TestAuthSecretsSealed(t *testing.T) {
	stores(t, func(t *testing.T, st courier.Store) {
		ctx := context.Background()
		c := open(t, st, newKey(t))
		put(t, c, courier.KindEndpoint, "crm", `{"transport": "http", "url": "https://crm.example/in",
			"auth": {"oauth2": {"token_url": "https://u:token-url-pass@auth.example/token", "client_id": "courier", "client_secret": "client-s3cret"}},
			"headers": {"X-Api-Key": {"secret": "hdr-s3cret"}, "X-Region": "eu"}}`)
		put(t, c, courier.KindEndpoint, "basic", `{"transport": "http", "url": "https://b.example/in", "auth": {"basic": {"username": "u", "password": "basic-s3cret"}}}`)
		put(t, c, courier.KindEndpoint, "bearer", `{"transport": "http", "url": "https://c.example/in", "auth": {"bearer": "bearer-s3cret"}}`)
		secrets := []string{"token-url-pass", "client-s3cret", "hdr-s3cret", "basic-s3cret", "bearer-s3cret"}
		objs, _, err := st.TopologyChanges(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		page, err := st.Audit(ctx, courier.AuditFilter{Object: courier.KindEndpoint})
		if err != nil {
			t.Fatal(err)
		}
		var shown []string
		for _, o := range objs {
			shown = append(shown, string(o.Spec))
		}
		for _, a := range page.Actions {
			shown = append(shown, a.After)
		}
		for _, name := range []string{"crm", "basic", "bearer"} {
			o, _ := c.Object(courier.KindEndpoint, name)
			shown = append(shown, string(o.Spec))
		}
		for _, text := range shown {
			for _, s := range secrets {
				if strings.Contains(text, s) {
					t.Errorf("the store, the audit or an answer holds %q in the clear: %s", s, text)
				}
			}
		}
		o, _ := c.Object(courier.KindEndpoint, "crm")
		put(t, c, courier.KindEndpoint, "crm", strings.Replace(string(o.Spec), `"X-Region":"eu"`, `"X-Region":"us"`, 1))
		s := httptransport.Of(c.Topology().Endpoints["crm"])
		if s.Auth.OAuth2.ClientSecret != "client-s3cret" || s.Headers[0].Value != "hdr-s3cret" || !strings.Contains(s.Auth.OAuth2.TokenURL, "token-url-pass") {
			t.Fatalf("after the shown spec was written back: %+v %+v", s.Auth.OAuth2, s.Headers)
		}
		if s.Headers[1].Value != "us" {
			t.Fatalf("the edit was not taken: %+v", s.Headers)
		}
	})
}
