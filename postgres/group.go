package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/jackc/pgx/v5/pgconn"
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
	results, due, err := ingest(ctx, s.pool, all)
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
	results, due, err := ingest(c.ctx, s.pool, b)
	if err == nil {
		s.dueNow(due...)
	}
	c.done <- ingestDone{results: results, err: err}
}
