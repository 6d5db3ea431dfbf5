package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Ingests without ordering keys are committed in groups: a few committers
// each take every call waiting at the time and store their messages in one
// statement, so that many senders of one message each share commits instead
// of paying one each (a commit waits for the WAL to reach the disk). A
// group whose statement the database refuses for its data is tried again
// in halves, down to single calls, so that a message it refuses fails only
// its own call; any other failure fails the whole group at once.

const (
	ingestCommitters = 4    // statements in flight at once
	maxGroupMessages = 2000 // messages a group takes at most, beside its first call
	groupTimeout     = 30 * time.Second
)

// ingestCall is one Ingest waiting for its group.
type ingestCall struct {
	ctx  context.Context
	msgs []*courier.Message
	done chan ingestDone // buffered: the committer never waits for the caller
}

type ingestDone struct {
	results []courier.IngestResult
	err     error
}

var errStoreClosed = errors.New("postgres store is closed")

// groupIngest stores msgs, which have no ordering keys, in the next group.
func (s *Store) groupIngest(ctx context.Context, msgs []*courier.Message) ([]courier.IngestResult, error) {
	c := &ingestCall{ctx: ctx, msgs: msgs, done: make(chan ingestDone, 1)}
	// A closed store takes no call: its committers are gone, and a call
	// left in the queue would wait for its context, maybe for ever.
	select {
	case <-s.quit:
		return nil, classify("ingest", errStoreClosed)
	default:
	}
	select {
	case s.ingests <- c:
	case <-ctx.Done():
		return nil, gaveUp(ctx)
	case <-s.quit:
		return nil, classify("ingest", errStoreClosed)
	}
	select {
	case d := <-c.done:
		return d.results, d.err
	case <-ctx.Done():
		// The group may still commit the messages: a sender that gave up
		// sends again, and learns that they exist.
		return nil, gaveUp(ctx)
	case <-s.quit:
		// The committers stop at Close and may leave this call in the
		// queue. One that took it answers it before it stops, so the
		// answer is there once they all have: never a refusal for
		// messages that were stored.
		select {
		case <-s.stopped:
		case <-ctx.Done():
			return nil, gaveUp(ctx)
		}
		select {
		case d := <-c.done:
			return d.results, d.err
		default:
			return nil, classify("ingest", errStoreClosed)
		}
	}
}

// gaveUp answers a call whose caller stopped waiting before its group was
// stored: the store did not answer in time, whatever the cause the caller
// gave.
func gaveUp(ctx context.Context) error {
	return courier.Unavailable("the store", fmt.Errorf("ingest: %w", context.Cause(ctx)))
}

// ingestLoop is one committer.
func (s *Store) ingestLoop() {
	defer s.bg.Done()
	for {
		var first *ingestCall
		select {
		case <-s.quit:
			return
		case first = <-s.ingests:
		}
		group, n := []*ingestCall{first}, len(first.msgs)
	gather:
		for n < maxGroupMessages {
			select {
			case c := <-s.ingests:
				group, n = append(group, c), n+len(c.msgs)
			default:
				break gather
			}
		}
		s.commitGroup(group)
	}
}

// commitGroup stores the messages of the calls in one statement and
// answers each call with its own results.
func (s *Store) commitGroup(group []*ingestCall) {
	live := group[:0]
	for _, c := range group {
		if c.ctx.Err() != nil {
			c.done <- ingestDone{err: gaveUp(c.ctx)}
			continue
		}
		live = append(live, c)
	}
	if len(live) == 0 {
		return
	}
	if s.commitCapped(live) {
		return
	}
	if len(live) == 1 {
		s.commitAlone(live[0])
		return
	}
	var all ingestBatch
	for _, c := range live {
		all.add(c.msgs)
	}
	// The statement serves every call: it runs to its end even when one
	// caller stops waiting, bounded by a timeout of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), groupTimeout)
	var results []courier.IngestResult
	var due []string
	err := s.acknowledged(ctx, "ingest", func(conn *pgxpool.Conn) (err error) {
		results, due, err = ingest(ctx, conn, all)
		return err
	})
	cancel()
	if err != nil && refused(err) {
		// One call's messages may be what the database refused: each half
		// goes again on its own, down to single calls, so that one refused
		// message costs a few statements and fails only its own call.
		mid := len(live) / 2
		s.commitGroup(live[:mid])
		s.commitGroup(live[mid:])
		return
	}
	if err != nil {
		// The database is out of reach, or failed as a whole: every call
		// hears so at once, rather than after a statement each.
		for _, c := range live {
			c.done <- ingestDone{err: err}
		}
		return
	}
	s.dueNow(due...)
	s.grouped.Add(1)
	for _, c := range live {
		c.done <- ingestDone{results: results[:len(c.msgs):len(c.msgs)]}
		results = results[len(c.msgs):]
	}
}

// refused reports whether the database refused the statement for its data
// (a data exception or an integrity violation), which the messages of one
// call may cause, rather than failing whatever it was sent.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
}

// commitAlone stores one call's messages in a statement of their own.
func (s *Store) commitAlone(c *ingestCall) {
	var b ingestBatch
	b.add(c.msgs)
	var results []courier.IngestResult
	var due []string
	err := s.acknowledged(c.ctx, "ingest", func(conn *pgxpool.Conn) (err error) {
		results, due, err = ingest(c.ctx, conn, b)
		return err
	})
	if err == nil {
		s.dueNow(due...)
	}
	c.done <- ingestDone{results: results, err: err}
}

// commitCapped stores a group that has messages of capped tenants, and
// reports false when it has none. The group's transaction takes the locks
// of their tenants (in order, as ingestAlone does), reads their use in a
// statement after, and stores in one statement every call whose messages
// fit their tenants' caps even if each of them were new, counting the
// calls before it: so a tenant's ingests share commits under a cap as
// others do, and the cap holds on every node. A call that may not fit is
// stored alone afterwards (ingestAlone), which checks what it creates: it
// is refused, or it repeated messages that exist.
func (s *Store) commitCapped(live []*ingestCall) bool {
	var tenants []string
	for _, c := range live {
		t, _ := s.quotas.Of(c.msgs)
		tenants = append(tenants, t...)
	}
	if len(tenants) == 0 {
		return false
	}
	slices.Sort(tenants)
	tenants = slices.Compact(tenants)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(live[0].ctx), groupTimeout)
	defer cancel()
	var fit, alone []*ingestCall
	var results []courier.IngestResult
	var due []string
	err := s.inCappedTx(ctx, tenants, func(q querier, use map[string]courier.TenantUsage) error {
		for _, c := range live {
			_, quotas := s.quotas.Of(c.msgs)
			if sqlstore.Fits(quotas, c.msgs, use) {
				fit = append(fit, c)
			} else {
				alone = append(alone, c)
			}
		}
		if len(fit) == 0 {
			return nil
		}
		var all ingestBatch
		for _, c := range fit {
			all.add(c.msgs)
		}
		var err error
		results, due, err = ingest(ctx, q, all)
		return err
	})
	switch {
	case err != nil && refused(err):
		// One call's messages may be what the database refused: each
		// goes alone, so that it fails only its own call.
		fit, alone = nil, live
	case err != nil:
		for _, c := range live {
			c.done <- ingestDone{err: classify("ingest", err)}
		}
		return true
	}
	s.dueNow(due...)
	for _, c := range fit {
		c.done <- ingestDone{results: results[:len(c.msgs):len(c.msgs)]}
		results = results[len(c.msgs):]
	}
	for _, c := range alone {
		results, err := s.ingestAlone(c.ctx, c.msgs)
		c.done <- ingestDone{results: results, err: err}
	}
	return true
}

// inCappedTx runs fn in a transaction that holds the locks of tenants and
// has read their use after taking them, its beginning, locks and read in
// one round trip, and commits it unless fn fails.
func (s *Store) inCappedTx(ctx context.Context, tenants []string, fn func(q querier, use map[string]courier.TenantUsage) error) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return classify("ingest", err)
	}
	// A connection left in its transaction by an error is closed, not
	// reused, and the transaction ends with it.
	defer conn.Release()
	var b pgx.Batch
	b.Queue(`BEGIN`)
	b.Queue(lockTenantsSQL, tenants)
	b.Queue(tenantUsageSQL+` WHERE tenant = ANY($1) GROUP BY tenant`, tenants)
	results := conn.SendBatch(ctx, &b)
	_, err = results.Exec()
	if err == nil {
		_, err = results.Exec()
	}
	var use map[string]courier.TenantUsage
	if err == nil {
		rows, qerr := results.Query()
		use, err = usageByTenant(collectUsage(rows, qerr))
	}
	if cerr := results.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return classify("read the use of tenants", err)
	}
	if err := fn(conn, use); err != nil {
		conn.Exec(context.WithoutCancel(ctx), `ROLLBACK`)
		return err
	}
	if _, err := conn.Exec(ctx, `COMMIT`); err != nil {
		return classify("ingest", err)
	}
	return replicated(conn.Conn())
}
