package storetest

import (
	"context"
	"maps"
	"os"
	"strconv"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// MigrateBefore leaves the database of a store's upgrade test as a release
// whose last migration came before version first left it: through exec,
// which fails the test, it runs each migration of the store's (those of
// its folder migrations, the test's working directory) older than first,
// and records its version with record, a statement of one argument.
func MigrateBefore(t testing.TB, first int, exec func(q string, args ...any), record string) {
	t.Helper()
	migrations, err := sqlstore.Migrations(os.DirFS("."))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations {
		if m.Version >= first {
			break
		}
		exec(m.SQL)
		exec(record, m.Version)
	}
}

// UpgradeSQL lists, in order, the statements that make the keyed messages
// an upgrade test starts from, in the schema of a release that kept the
// order of keyed messages with triggers: each statement as that release
// wrote it, so that the triggers put every message where that release
// did. ?-style placeholders are the ingest time, as unix microseconds for
// SQLite; a store's test rewrites them as it needs. On route acme:
//
//   - key k: m1 suspended (it holds the key), m2 and m3 waiting behind it;
//   - key j: a1 in flight (leased, token 1), a2 waiting;
//   - key q: q1 due, q2 waiting, both of priority 4 (a store that claims
//     only the priorities it knows of must learn them from the old rows);
//
// and an operator's discard of a message "old", for the audit log.
var UpgradeSQL = []string{
	insertOld("m1", 0),
	`UPDATE messages SET ordering_key = ordering_key, state = 'suspended', reason = 'rejected',
		last_error = 'HTTP 400', next_attempt_at = NULL, finished_at = $1, updated_at = $1 WHERE id = 'm1'`,
	insertOld("m2", 0), insertOld("m3", 0),
	insertOld("a1", 0),
	`UPDATE messages SET state = 'inflight', lease_until = $1, lease_owner = 'old-node', total_attempts = 1, updated_at = $1 WHERE id = 'a1'`,
	insertOld("a2", 0),
	insertOld("q1", 4), insertOld("q2", 4),
	`INSERT INTO actions (at, who, kind, subject, detail) VALUES ($1, 'ops', 'discard', 'old', 'why')`,
}

func insertOld(id string, priority int) string {
	return `INSERT INTO messages (id, type, route, size, content_type, ordering_key, priority, hash, state,
		next_attempt_at, round_started_at, created_at, updated_at)
		VALUES ('` + id + `', 't', 'acme', 1, 'text/plain', '` + id[:1] + `', ` + strconv.Itoa(priority) + `, 'h-` + id + `', 'queued', $1, $1, $1, $1)`
}

// UpgradeWaiting are the messages that UpgradeSQL leaves waiting.
var UpgradeWaiting = []string{"m2", "m3", "a2", "q2"}

// OrderAfterUpgrade checks that the messages UpgradeSQL made at made, in a
// store opened on them with the current schema, go on in order: each
// waiting message goes when the one ahead of it is done, and not before.
func OrderAfterUpgrade(t *testing.T, s courier.Store, made time.Time) {
	ctx := context.Background()
	now := made.Add(time.Minute)
	for _, id := range UpgradeWaiting {
		if m := mustGet(t, s, id); !m.Waiting() {
			t.Fatalf("%s after the upgrade: %s, due %v; want waiting", id, m.State, m.NextAttemptAt)
		}
	}
	claimOnly := func(want string) *courier.Message {
		t.Helper()
		got := claim(t, s, now, courier.RouteQuota{Route: "acme", Limit: 10})
		if ids(got) != "["+want+"]" {
			t.Fatalf("claimed %s, want [%s]", ids(got), want)
		}
		return got[0]
	}
	deliver := func(m *courier.Message) {
		t.Helper()
		next := *m
		next.State, next.LeaseUntil, next.LeaseOwner, next.FinishedAt, next.UpdatedAt = courier.StateDelivered, time.Time{}, "", now, now
		next.NextAttemptAt, next.TimerAt = time.Time{}, time.Time{}
		MustApply(t, s, courier.Change{Message: &next, From: courier.StateInflight, Token: m.TotalAttempts})
	}
	deliver(claimOnly("q1"))
	deliver(claimOnly("q2"))
	deliver(mustGet(t, s, "a1"))
	deliver(claimOnly("a2"))
	if got := claim(t, s, now, courier.RouteQuota{Route: "acme", Limit: 10}); len(got) != 0 {
		t.Fatalf("claimed %s while m1 holds key k", ids(got))
	}
	if _, err := s.Discard(ctx, "m1", courier.Action{At: now, Who: "ops"}); err != nil {
		t.Fatal(err)
	}
	deliver(claimOnly("m2"))
	deliver(claimOnly("m3"))
}

// AuditAfterUpgrade checks that the action UpgradeSQL recorded at made
// reads back from the audit log of a store opened on it with the current
// schema, as an operator action (no topology object, version 0), and that
// the topology starts at version 0.
func AuditAfterUpgrade(t *testing.T, s courier.Store, made time.Time) {
	ctx := context.Background()
	page, err := s.Audit(ctx, courier.AuditFilter{Subject: "old"})
	if err != nil {
		t.Fatal(err)
	}
	want := courier.Action{At: made, Who: "ops", Kind: courier.ActionDiscard, Subject: "old", Detail: "why"}
	if len(page.Actions) != 1 {
		t.Fatalf("audit of the old action: %+v, want %+v", page.Actions, want)
	}
	got := page.Actions[0]
	if got.Seq == 0 {
		t.Errorf("the old action has no seq")
	}
	if got.Seq = 0; !sameTime(got.At, made) || got.Who != want.Who || got.Kind != want.Kind || got.Subject != want.Subject ||
		got.Detail != want.Detail || got.Object != "" || got.Before != "" || got.After != "" || got.Version != 0 {
		t.Errorf("the old action reads %+v, want %+v", got, want)
	}
	if v, err := s.TopologyVersion(ctx); err != nil || v != 0 {
		t.Errorf("topology version after the upgrade: %d, %v; want 0", v, err)
	}
}

// UpgradeIDs are the messages an upgrade test of ids starts from, made at
// made: a message sent to the route erp, and the deliveries of a
// published one (to erp-orders and audit-all), the first of them its
// lead. A store's test writes them in its old schema, the lead and the
// message sent to a route each with its payload, the other delivery
// sharing the lead's.
func UpgradeIDs(t *testing.T, made time.Time) (sent *courier.Message, pub []*courier.Message) {
	sent = &courier.Message{ID: "sent-1", Type: "invoice", Route: "erp", Payload: []byte(`{"n":1}`), ContentType: "application/json"}
	courier.Accept(sent, courier.DefaultPolicy(), false, made)
	pub = published(t, pubTopology(), "pub-1", "order.created", `{"n":2}`, nil, made)
	if len(pub) != 2 {
		t.Fatalf("%d deliveries of the published message, want 2", len(pub))
	}
	return sent, pub
}

// IdsAfterUpgrade checks that a store opened on the messages of
// UpgradeIDs, made at made, keeps their ids as the old schema did: the
// same content again is no new message, other content under an id is a
// conflict, an id sent to a route is never published nor the other way
// round, and the shared delivery reads its lead's payload.
func IdsAfterUpgrade(t *testing.T, s courier.Store, made time.Time) {
	sent, pub := UpgradeIDs(t, made)
	if r := mustIngest(t, s, sent); r[0].Status != courier.IngestExists {
		t.Errorf("the message sent to a route again: %v, want exists", r[0].Status)
	}
	other := *sent
	other.Payload = []byte(`{"n":3}`)
	courier.Accept(&other, courier.DefaultPolicy(), false, made)
	if r := mustIngest(t, s, &other); r[0].Status != courier.IngestConflict {
		t.Errorf("other content under its id: %v, want conflict", r[0].Status)
	}
	for i, r := range mustIngest(t, s, pub...) {
		if r.Status != courier.IngestExists {
			t.Errorf("the published message again, delivery %d: %v, want exists", i, r.Status)
		}
	}
	if r := mustIngest(t, s, published(t, pubTopology(), "sent-1", "order.created", `{"n":1}`, nil, made)...); r[0].Status != courier.IngestConflict {
		t.Errorf("a publish under the id of the message sent to a route: %v, want conflict", r[0].Status)
	}
	p2p := &courier.Message{ID: "pub-1", Type: "order.created", Route: "erp", Payload: []byte(`{"n":2}`), ContentType: "application/json"}
	courier.Accept(p2p, courier.DefaultPolicy(), false, made)
	if r := mustIngest(t, s, p2p); r[0].Status != courier.IngestConflict {
		t.Errorf("a message to a route under the published id: %v, want conflict", r[0].Status)
	}
	ds, err := s.Deliveries(context.Background(), "pub-1")
	if err != nil || len(ds) != 2 {
		t.Fatalf("deliveries of pub-1: %d, %v; want 2", len(ds), err)
	}
	for _, d := range ds {
		if string(d.Payload) != `{"n":2}` {
			t.Errorf("delivery to %s reads the payload %q", d.Subscription, d.Payload)
		}
	}
	if m := mustGet(t, s, "sent-1"); string(m.Payload) != `{"n":1}` {
		t.Errorf("sent-1 reads the payload %q", m.Payload)
	}
}

// UpgradeHealthSQL makes, in the schema of a release that read the
// endpoints' health whole, endpoint acme off ($1 is the time, as unix
// microseconds for SQLite).
const UpgradeHealthSQL = `INSERT INTO endpoint_health (endpoint, state, updated_at) VALUES ('acme', 'off', $1)`

// HealthAfterUpgrade checks that the health written by the release before
// (UpgradeHealthSQL) is read by a first read of the changes, and a write
// after the upgrade by the next.
func HealthAfterUpgrade(t *testing.T, s courier.Store) {
	t.Helper()
	ctx := context.Background()
	hs, cursor, err := s.HealthChanges(ctx, 0)
	if err != nil || len(hs) != 1 || hs[0].Endpoint != "acme" || hs[0].State != courier.HealthOff {
		t.Fatalf("first read of the changes after the upgrade: %+v %v; want acme off", hs, err)
	}
	if _, err := s.UpdateHealth(ctx, "acme", func(h courier.EndpointHealth) courier.EndpointHealth { return h.SwitchedOn(time.Now()) }, nil); err != nil {
		t.Fatal(err)
	}
	hs, _, err = s.HealthChanges(ctx, cursor)
	if err != nil || len(hs) != 1 || hs[0].State != courier.HealthActive {
		t.Fatalf("changes after acme was switched on: %+v %v; want acme active", hs, err)
	}
}

// UsageAfterUpgrade checks that the tenants' use after an upgrade is what
// the messages made before it hold (counted by migration 0019), before
// any other write.
func UsageAfterUpgrade(t *testing.T, s courier.Store) {
	t.Helper()
	got, want := usage(t, s), recount(t, s)
	if len(want) == 0 || !maps.Equal(got, want) {
		t.Fatalf("use after the upgrade %v, counted from the messages %v", got, want)
	}
}
