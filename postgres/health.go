package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

const healthColumns = `endpoint, state, failures, suspensions, suspended_until, probe_until, updated_at`

// Health returns every stored endpoint health.
func (s *Store) Health(ctx context.Context) ([]courier.EndpointHealth, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+healthColumns+` FROM endpoint_health WHERE NOT forgotten ORDER BY endpoint`)
	return collect(nil, rows, err, "read endpoint health", scanHealth)
}

// HealthChanges returns the health rows stamped with a transaction id at
// or after since. The cursor is the xmin of a snapshot taken before the
// rows are read: a transaction that snapshot did not see has an id at or
// above it, so the next read finds its rows, whenever it commits.
func (s *Store) HealthChanges(ctx context.Context, since int64) ([]courier.EndpointHealth, int64, error) {
	var b pgx.Batch
	b.Queue(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint`)
	b.Queue(`SELECT `+healthColumns+`, forgotten FROM endpoint_health WHERE xid >= $1::bigint::text::xid8`, since)
	br := s.pool.SendBatch(ctx, &b)
	var next int64
	if err := br.QueryRow().Scan(&next); err != nil {
		br.Close()
		return nil, since, classify("read endpoint health", err)
	}
	rows, err := br.Query()
	out, err := collect(nil, rows, err, "read endpoint health", func(row scanner) (courier.EndpointHealth, error) {
		var forgotten bool
		h, err := scanHealthAnd(row, &forgotten)
		if forgotten {
			h = courier.EndpointHealth{Endpoint: h.Endpoint, State: courier.HealthActive}
		}
		return h, err
	})
	if cerr := br.Close(); err == nil && cerr != nil {
		err = classify("read endpoint health", cerr)
	}
	if err != nil {
		return nil, since, err
	}
	return out, next, nil
}

// UpdateHealth applies next to an endpoint's health in one transaction that
// holds the endpoint's row: nodes updating the same endpoint take turns, and
// each sees the change of the one before.
func (s *Store) UpdateHealth(ctx context.Context, endpoint string, next func(courier.EndpointHealth) courier.EndpointHealth, a *courier.Action) (courier.EndpointHealth, error) {
	var out courier.EndpointHealth
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		h, err := lockHealth(ctx, tx, endpoint)
		if err != nil {
			return err
		}
		out = next(h)
		out.Endpoint = endpoint
		// A forgotten health keeps its row, marked, for HealthChanges to tell.
		if _, err := tx.Exec(ctx, `INSERT INTO endpoint_health (endpoint, state, failures, suspensions, suspended_until, probe_until, updated_at, forgotten)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			ON CONFLICT (endpoint) DO UPDATE SET state = $2, failures = $3, suspensions = $4,
			suspended_until = $5, probe_until = $6, updated_at = $7, forgotten = $8, xid = pg_current_xact_id()`,
			endpoint, string(out.State), out.Failures, out.Suspensions, ts(out.SuspendedUntil),
			ts(out.ProbeUntil), out.UpdatedAt, out.Forgettable()); err != nil {
			return classify("write health of "+endpoint, err)
		}
		if a != nil {
			return insertAction(ctx, tx, *a)
		}
		return nil
	})
	if err != nil {
		return courier.EndpointHealth{}, classify("health of "+endpoint, err)
	}
	return out, nil
}

// lockHealth reads an endpoint's health and locks its row until tx ends.
// An endpoint without a row, or whose health was forgotten, is active; the
// row made (or made anew) here to lock is overwritten or forgotten by the
// caller, in the same transaction. Should the row go while this one waits
// for it, it is made and locked again: starting from no row and no lock
// would let two waiting nodes overwrite each other's change.
func lockHealth(ctx context.Context, tx pgx.Tx, endpoint string) (courier.EndpointHealth, error) {
	for {
		if _, err := tx.Exec(ctx, `INSERT INTO endpoint_health (endpoint, state, updated_at)
			VALUES ($1, 'active', now()) ON CONFLICT (endpoint) DO UPDATE SET `+madeAnew+` WHERE endpoint_health.forgotten`, endpoint); err != nil {
			return courier.EndpointHealth{}, classify("health of "+endpoint, err)
		}
		h, err := scanHealth(tx.QueryRow(ctx, `SELECT `+healthColumns+` FROM endpoint_health WHERE endpoint = $1 FOR UPDATE`, endpoint))
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return courier.EndpointHealth{}, classify("read health of "+endpoint, err)
		}
		return h, nil
	}
}

// madeAnew makes a forgotten row, on conflict, as a new row is made.
const madeAnew = `state = 'active', failures = 0, suspensions = 0, suspended_until = NULL, probe_until = NULL,
	updated_at = now(), forgotten = false, xid = pg_current_xact_id()`

func scanHealth(row scanner) (courier.EndpointHealth, error) { return scanHealthAnd(row) }

// scanHealthAnd scans the healthColumns, then the columns after them into
// more.
func scanHealthAnd(row scanner, more ...any) (courier.EndpointHealth, error) {
	var h courier.EndpointHealth
	var state string
	var suspendedUntil, probeUntil pgtype.Timestamptz
	if err := row.Scan(append([]any{&h.Endpoint, &state, &h.Failures, &h.Suspensions, &suspendedUntil, &probeUntil, &h.UpdatedAt}, more...)...); err != nil {
		return h, err
	}
	h.State = courier.HealthState(state)
	h.SuspendedUntil, h.ProbeUntil = fromTS(suspendedUntil), fromTS(probeUntil)
	h.UpdatedAt = h.UpdatedAt.UTC()
	return h, nil
}

// CountQueued counts the queued messages of the routes.
func (s *Store) CountQueued(ctx context.Context, routes []string) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT
		(SELECT COUNT(*) FROM messages WHERE `+queuedDue+` AND route = ANY($1)) +
		(SELECT COUNT(*) FROM messages WHERE route = ANY($1) AND `+keyWaiting+`)`,
		routes).Scan(&n); err != nil {
		return 0, classify("count queued", err)
	}
	return n, nil
}

// QueuedRoutes lists the routes that have queued messages. It skips from
// route to route through the messages_queued index instead of reading every
// queued message.
func (s *Store) QueuedRoutes(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `WITH RECURSIVE r AS (
			(SELECT route FROM messages WHERE `+queuedDue+` ORDER BY route LIMIT 1)
			UNION ALL
			SELECT (SELECT m.route FROM messages m WHERE `+queuedDue+`
				AND m.route > r.route ORDER BY m.route LIMIT 1)
			FROM r WHERE r.route IS NOT NULL
		), w AS (
			(SELECT route FROM messages WHERE `+keyWaiting+` ORDER BY route LIMIT 1)
			UNION ALL
			SELECT (SELECT m.route FROM messages m WHERE m.route > w.route AND `+keyWaiting+` ORDER BY m.route LIMIT 1)
			FROM w WHERE w.route IS NOT NULL
		) SELECT route FROM r WHERE route IS NOT NULL UNION SELECT route FROM w WHERE route IS NOT NULL`)
	if err != nil {
		return nil, classify("queued routes", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, classify("queued routes", err)
	}
	return out, nil
}

// SuspendRoute suspends the queued messages of a route, as the root
// decides, through Apply.
func (s *Store) SuspendRoute(ctx context.Context, route string, reason courier.Reason, lastError string, now time.Time) (int, error) {
	n, err := sqlstore.SuspendRoute(ctx, s, route, reason, lastError, now)
	return n, classify("suspend route "+route, err)
}

// SwitchHealth makes the switches in one transaction: their endpoints'
// rows are locked in the order of their names (so that two switches of
// many endpoints never wait for each other in a circle), the changes are
// decided in Go, then written with one statement for the rows and one
// COPY for the actions.
func (s *Store) SwitchHealth(ctx context.Context, switches []courier.HealthSwitch) ([]courier.HealthChange, error) {
	names := make([]string, 0, len(switches))
	for _, sw := range switches {
		names = append(names, sw.Endpoint)
	}
	slices.Sort(names)
	names = slices.Compact(names)
	var out []courier.HealthChange
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		current, err := lockHealths(ctx, tx, names)
		if err != nil {
			return err
		}
		out = make([]courier.HealthChange, len(switches))
		written := map[string]courier.EndpointHealth{}
		var actions [][]any
		for i, sw := range switches {
			h := current[sw.Endpoint]
			out[i] = courier.HealthChange{Endpoint: sw.Endpoint, Before: h, After: h}
			next, ok := sw.Next(h)
			if !ok {
				continue
			}
			next.Endpoint = sw.Endpoint
			current[sw.Endpoint], written[sw.Endpoint] = next, next
			if sw.Action != nil {
				a := *sw.Action
				a.Subject = sw.Endpoint
				actions = append(actions, actionArgs(a))
			}
			out[i].After, out[i].Changed = next, true
		}
		var rows struct {
			endpoint, state           []string
			failures, suspensions     []int32
			suspended, probe, updated []pgtype.Timestamptz
			forgotten                 []bool // kept, marked, for HealthChanges to tell
		}
		stamp := func(t time.Time) pgtype.Timestamptz { return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()} }
		for _, name := range names {
			h, ok := written[name]
			if ok {
				rows.endpoint, rows.state = append(rows.endpoint, name), append(rows.state, string(h.State))
				rows.failures, rows.suspensions = append(rows.failures, int32(h.Failures)), append(rows.suspensions, int32(h.Suspensions))
				rows.suspended, rows.probe = append(rows.suspended, stamp(h.SuspendedUntil)), append(rows.probe, stamp(h.ProbeUntil))
				rows.updated, rows.forgotten = append(rows.updated, stamp(h.UpdatedAt)), append(rows.forgotten, h.Forgettable())
			}
		}
		// The writes go in one round trip; many actions by COPY.
		var b pgx.Batch
		if len(rows.endpoint) > 0 {
			b.Queue(`INSERT INTO endpoint_health (`+healthColumns+`, forgotten)
				SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::timestamptz[], $6::timestamptz[], $7::timestamptz[], $8::boolean[])
				ON CONFLICT (endpoint) DO UPDATE SET state = excluded.state, failures = excluded.failures,
				suspensions = excluded.suspensions, suspended_until = excluded.suspended_until,
				probe_until = excluded.probe_until, updated_at = excluded.updated_at,
				forgotten = excluded.forgotten, xid = pg_current_xact_id()`,
				rows.endpoint, rows.state, rows.failures, rows.suspensions, rows.suspended, rows.probe, rows.updated, rows.forgotten)
		}
		if len(actions) <= 100 {
			for _, a := range actions {
				b.Queue(insertActionSQL, a...)
			}
			actions = nil
		}
		if b.Len() > 0 {
			if err := tx.SendBatch(ctx, &b).Close(); err != nil {
				return classify("write the health of switched endpoints", err)
			}
		}
		if len(actions) > 0 {
			if _, err := tx.CopyFrom(ctx, pgx.Identifier{"actions"},
				[]string{"at", "who", "kind", "subject", "detail", "object", "before", "after", "version"}, pgx.CopyFromRows(actions)); err != nil {
				return classify("record the switches' actions", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, classify("switch endpoints", err)
	}
	return out, nil
}

// lockHealths reads the health of the endpoints, named in order, and locks
// their rows until tx ends, as lockHealth does for one.
func lockHealths(ctx context.Context, tx pgx.Tx, names []string) (map[string]courier.EndpointHealth, error) {
	// Made and then locked, in one round trip.
	var b pgx.Batch
	b.Queue(`INSERT INTO endpoint_health (endpoint, state, updated_at)
		SELECT name, 'active', now() FROM unnest($1::text[]) AS n(name) ORDER BY name
		ON CONFLICT (endpoint) DO UPDATE SET `+madeAnew+` WHERE endpoint_health.forgotten`, names)
	b.Queue(`SELECT `+healthColumns+` FROM endpoint_health WHERE endpoint = ANY($1) ORDER BY endpoint FOR UPDATE`, names)
	br := tx.SendBatch(ctx, &b)
	if _, err := br.Exec(); err != nil {
		br.Close()
		return nil, classify("health of switched endpoints", err)
	}
	rows, err := br.Query()
	found, err := collect(nil, rows, err, "read health of switched endpoints", scanHealth)
	if cerr := br.Close(); err == nil && cerr != nil {
		err = classify("read health of switched endpoints", cerr)
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]courier.EndpointHealth, len(names))
	for _, h := range found {
		out[h.Endpoint] = h
	}
	for _, name := range names {
		if _, ok := out[name]; !ok {
			// Forgotten by another node while this one waited for it.
			h, err := lockHealth(ctx, tx, name)
			if err != nil {
				return nil, err
			}
			out[name] = h
		}
	}
	return out, nil
}
