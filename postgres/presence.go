package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5"
)

var _ courier.Presence = (*Store)(nil)

// A node is present while a session of its own holds the advisory lock of
// class nodeLockClass on its name (schema and owner hashed, as the lock
// takes two int4 keys): the server drops the lock the moment the session
// ends, so the others learn of a process that died at once. The session
// beats every presenceBeat; a beat that fails, or takes longer than
// presenceTimeout, ends the presence on the node's side. The server ends a
// session it no longer hears from after its keepalives fail (presenceIdle,
// then presenceProbes probes presenceProbe apart, or unacknowledged data
// for presenceUserTimeout): at least four seconds after the last beat that
// got through, while the node stopped at most two seconds after it. A node
// cut off from the database therefore stops delivering before the others
// can take its work.
const (
	nodeLockClass       = "1852793701"
	presenceBeat        = 500 * time.Millisecond
	presenceTimeout     = 1500 * time.Millisecond
	presenceIdle        = "2"
	presenceProbe       = "1"
	presenceProbes      = "2"
	presenceUserTimeout = "4000"
)

// nodeKey is the lock key of owner $1 in this schema.
const nodeKey = `hashtext(current_schema() || ' ' || $1)`

// departedSQL lists the nodes whose lock nobody holds.
const departedSQL = `SELECT n.owner FROM nodes n WHERE NOT EXISTS (
	SELECT 1 FROM pg_locks l
	WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
	AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
	AND l.classid = ` + nodeLockClass + `::oid
	AND l.objid = hashtext(current_schema() || ' ' || n.owner)::oid)`

// Join makes owner present: a session of its own takes owner's lock, and
// the node is recorded. It fails if another session holds the lock: a node
// of the same name is present.
func (s *Store) Join(ctx context.Context, owner string) (courier.Attendance, error) {
	cfg := s.cfg.ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = cfg.RuntimeParams["application_name"] + " presence"
	cfg.RuntimeParams["tcp_keepalives_idle"] = presenceIdle
	cfg.RuntimeParams["tcp_keepalives_interval"] = presenceProbe
	cfg.RuntimeParams["tcp_keepalives_count"] = presenceProbes
	cfg.RuntimeParams["tcp_user_timeout"] = presenceUserTimeout
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, classify("join: connect", err)
	}
	var took bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(`+nodeLockClass+`, `+nodeKey+`)`, owner).Scan(&took); err != nil {
		conn.Close(context.Background())
		return nil, classify("join: take the node's lock", err)
	}
	if !took {
		conn.Close(context.Background())
		return nil, fmt.Errorf("join: a node named %s is present already", owner)
	}
	// The row only after the lock: a row without a lock is a node gone.
	if _, err := conn.Exec(ctx, `INSERT INTO nodes (owner) VALUES ($1) ON CONFLICT (owner) DO NOTHING`, owner); err != nil {
		conn.Close(context.Background())
		return nil, classify("join: record the node", err)
	}
	a := &attendance{conn: conn, lost: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	go a.beat(s.logger, owner)
	return a, nil
}

// attendance is a node's presence: its session and the goroutine that
// beats on it.
type attendance struct {
	conn      *pgx.Conn
	lost      chan struct{} // closed when the presence ended without Leave
	quit      chan struct{} // closed by Leave
	done      chan struct{} // closed when beat returned (the session is closed)
	leaveOnce sync.Once
}

func (a *attendance) Lost() <-chan struct{} { return a.lost }

// Leave closes the session, which frees the node's lock.
func (a *attendance) Leave() {
	a.leaveOnce.Do(func() { close(a.quit) })
	<-a.done
}

func (a *attendance) beat(logger *slog.Logger, owner string) {
	defer close(a.done)
	defer a.conn.Close(context.Background())
	t := time.NewTicker(presenceBeat)
	defer t.Stop()
	for {
		select {
		case <-a.quit:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), presenceTimeout)
		_, err := a.conn.Exec(ctx, `SELECT 1`)
		cancel()
		if err != nil {
			select {
			case <-a.quit:
			default:
				logger.Error("this node's session with PostgreSQL failed: it is no longer present, and other nodes may take over its work", "owner", owner, "err", err)
				close(a.lost)
			}
			return
		}
	}
}

// Departed returns the nodes that joined and whose lock nobody holds.
func (s *Store) Departed(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, departedSQL)
	return collect(nil, rows, err, "departed nodes", func(row scanner) (string, error) {
		var owner string
		return owner, row.Scan(&owner)
	})
}

// LeasesOf returns up to limit inflight messages leased by the owners.
func (s *Store) LeasesOf(ctx context.Context, owners []string, limit int) ([]*courier.Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM messages
		WHERE state = 'inflight' AND lease_owner = ANY($1) ORDER BY lease_until LIMIT $2`, owners, limit)
	return collectMessages(rows, err, "leases of departed nodes")
}

// Forget deletes the departed owners' slot holds, and their rows once no
// message is leased by them.
func (s *Store) Forget(ctx context.Context, owners []string) error {
	var b pgx.Batch
	b.Queue(`DELETE FROM endpoint_holds WHERE owner = ANY($1)`, owners)
	b.Queue(`DELETE FROM nodes n WHERE n.owner = ANY($1)
		AND NOT EXISTS (SELECT 1 FROM messages m WHERE m.state = 'inflight' AND m.lease_owner = n.owner)`, owners)
	if err := s.pool.SendBatch(ctx, &b).Close(); err != nil {
		return classify("forget departed nodes", err)
	}
	return nil
}

// EndPresence ends the session that keeps owner present, as the server
// does when a node's process dies or its connection is lost: a way to
// fence a node that hangs. It returns how many sessions it ended.
func (s *Store) EndPresence(ctx context.Context, owner string) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2 AND l.classid = `+nodeLockClass+`::oid
		AND l.objid = `+nodeKey+`::oid`, owner).Scan(&n)
	if err != nil {
		return 0, classify("end a node's presence", err)
	}
	return n, nil
}
