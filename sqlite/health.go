package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

const healthColumns = `endpoint, state, failures, suspensions, suspended_until, probe_until, updated_at`

// writeHealth writes an endpoint's health, numbered above every write
// before (the one writer keeps the numbers in commit order); a forgotten
// health keeps its row, marked forgotten, for HealthChanges to tell.
const writeHealth = `INSERT INTO endpoint_health (` + healthColumns + `, forgotten, version)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT COALESCE(MAX(version), 0) + 1 FROM endpoint_health))
	ON CONFLICT (endpoint) DO UPDATE SET state = excluded.state, failures = excluded.failures,
	suspensions = excluded.suspensions, suspended_until = excluded.suspended_until,
	probe_until = excluded.probe_until, updated_at = excluded.updated_at,
	forgotten = excluded.forgotten, version = excluded.version`

// writeHealthArgs are the arguments of writeHealth for h.
func writeHealthArgs(h courier.EndpointHealth) []any {
	return []any{h.Endpoint, string(h.State), h.Failures, h.Suspensions, micros(h.SuspendedUntil),
		micros(h.ProbeUntil), micros(h.UpdatedAt), h.Forgettable()}
}

// Health returns every stored endpoint health.
func (s *Store) Health(ctx context.Context) ([]courier.EndpointHealth, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+healthColumns+` FROM endpoint_health WHERE forgotten = 0 ORDER BY endpoint`)
	return collect(nil, rows, err, "read endpoint health", scanHealth)
}

// HealthChanges returns the health rows numbered above since; the cursor
// is the highest number read.
func (s *Store) HealthChanges(ctx context.Context, since int64) ([]courier.EndpointHealth, int64, error) {
	next := since
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+healthColumns+`, forgotten, version FROM endpoint_health
		WHERE version > ? ORDER BY version`, since)
	out, err := collect(nil, rows, err, "read endpoint health", func(row scanner) (courier.EndpointHealth, error) {
		var forgotten bool
		var version int64
		h, err := scanHealthAnd(row, &forgotten, &version)
		next = max(next, version)
		if forgotten {
			h = courier.EndpointHealth{Endpoint: h.Endpoint, State: courier.HealthActive}
		}
		return h, err
	})
	if err != nil {
		return nil, since, err
	}
	return out, next, nil
}

// UpdateHealth applies next to an endpoint's health in one transaction.
func (s *Store) UpdateHealth(ctx context.Context, endpoint string, next func(courier.EndpointHealth) courier.EndpointHealth, a *courier.Action) (courier.EndpointHealth, error) {
	var out courier.EndpointHealth
	err := s.write(ctx, func(tx *sql.Tx) error {
		h, err := scanHealth(tx.QueryRow(`SELECT `+healthColumns+` FROM endpoint_health WHERE endpoint = ? AND forgotten = 0`, endpoint))
		if errors.Is(err, sql.ErrNoRows) {
			h, err = courier.EndpointHealth{Endpoint: endpoint, State: courier.HealthActive}, nil
		}
		if err != nil {
			return classify("read health of "+endpoint, err)
		}
		out = next(h)
		out.Endpoint = endpoint
		if _, err := tx.Exec(writeHealth, writeHealthArgs(out)...); err != nil {
			return classify("write health of "+endpoint, err)
		}
		if a != nil {
			return insertAction(tx, *a)
		}
		return nil
	})
	if err != nil {
		// The write may still be running (its caller gave up waiting):
		// out is not read.
		return courier.EndpointHealth{}, err
	}
	return out, nil
}

func scanHealth(row scanner) (courier.EndpointHealth, error) { return scanHealthAnd(row) }

// scanHealthAnd scans the healthColumns, then the columns after them into
// more.
func scanHealthAnd(row scanner, more ...any) (courier.EndpointHealth, error) {
	var h courier.EndpointHealth
	var state string
	var suspendedUntil, probeUntil sql.NullInt64
	var updated int64
	if err := row.Scan(append([]any{&h.Endpoint, &state, &h.Failures, &h.Suspensions, &suspendedUntil, &probeUntil, &updated}, more...)...); err != nil {
		return h, err
	}
	h.State = courier.HealthState(state)
	h.SuspendedUntil, h.ProbeUntil = fromNullMicros(suspendedUntil), fromNullMicros(probeUntil)
	h.UpdatedAt = fromMicros(updated)
	return h, nil
}

// CountQueued counts the queued messages of the routes.
func (s *Store) CountQueued(ctx context.Context, routes []string) (int, error) {
	total := 0
	for _, r := range routes {
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT
			(SELECT COUNT(*) FROM messages INDEXED BY messages_queued WHERE `+queuedDue+` AND route = ?1) +
			(SELECT COUNT(*) FROM messages INDEXED BY messages_key_waiting WHERE route = ?1 AND `+keyWaiting+`)`, r).Scan(&n); err != nil {
			return 0, classify("count queued of "+r, err)
		}
		total += n
	}
	return total, nil
}

// QueuedRoutes lists the routes that have queued messages.
func (s *Store) QueuedRoutes(ctx context.Context) ([]string, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT DISTINCT route FROM messages INDEXED BY messages_queued WHERE `+queuedDue+`
		UNION SELECT DISTINCT route FROM messages INDEXED BY messages_key_waiting WHERE `+keyWaiting)
	return collect(nil, rows, err, "queued routes", func(row scanner) (string, error) {
		var r string
		err := row.Scan(&r)
		return r, err
	})
}

// SuspendRoute suspends the queued messages of a route, as the root
// decides, through Apply.
func (s *Store) SuspendRoute(ctx context.Context, route string, reason courier.Reason, lastError string, now time.Time) (int, error) {
	n, err := sqlstore.SuspendRoute(ctx, s, route, reason, lastError, now)
	return n, classify("suspend route "+route, err)
}

// SwitchHealth makes the switches in one transaction, with its statements
// prepared once for all of them.
func (s *Store) SwitchHealth(ctx context.Context, switches []courier.HealthSwitch) ([]courier.HealthChange, error) {
	var out []courier.HealthChange
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = make([]courier.HealthChange, len(switches))
		read, err := tx.Prepare(`SELECT ` + healthColumns + ` FROM endpoint_health WHERE endpoint = ? AND forgotten = 0`)
		if err != nil {
			return classify("switch endpoints", err)
		}
		defer read.Close()
		write, err := tx.Prepare(writeHealth)
		if err != nil {
			return classify("switch endpoints", err)
		}
		defer write.Close()
		for i, sw := range switches {
			h, err := scanHealth(read.QueryRow(sw.Endpoint))
			if errors.Is(err, sql.ErrNoRows) {
				h, err = courier.EndpointHealth{Endpoint: sw.Endpoint, State: courier.HealthActive}, nil
			}
			if err != nil {
				return classify("read health of "+sw.Endpoint, err)
			}
			out[i] = courier.HealthChange{Endpoint: sw.Endpoint, Before: h, After: h}
			next, ok := sw.Next(h)
			if !ok {
				continue
			}
			next.Endpoint = sw.Endpoint
			if _, err := write.Exec(writeHealthArgs(next)...); err != nil {
				return classify("write health of "+sw.Endpoint, err)
			}
			if sw.Action != nil {
				a := *sw.Action
				a.Subject = sw.Endpoint
				if err := insertAction(tx, a); err != nil {
					return err
				}
			}
			out[i].After, out[i].Changed = next, true
		}
		return nil
	})
	if err != nil {
		// The write may still be running (its caller gave up waiting):
		// out is not read.
		return nil, err
	}
	return out, nil
}
