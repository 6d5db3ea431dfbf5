package postgres

import (
	"context"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
)

// RecordEvent records an event unless its id is recorded already, with the
// notices decide sends, in one transaction. The writers of one subject take
// turns under a transaction lock of the subject, so that each decides on
// the events of the ones before.
func (s *Store) RecordEvent(ctx context.Context, ev courier.Event, since time.Time, decide func([]courier.Event) (courier.Event, []*courier.Message)) (courier.Event, bool, error) {
	var out courier.Event
	var created bool
	var due []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out, created, due = ev, false, nil
		// The lock and the reads go in one round trip: the reads come
		// after the lock in the same pipeline, so they see what the
		// writer before committed.
		var reads pgx.Batch
		reads.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('courier.events.' || $1, 0))`, ev.Subject)
		reads.Queue(`SELECT EXISTS (SELECT 1 FROM events WHERE id = $1)`, ev.ID)
		reads.Queue(`SELECT `+sqlstore.EventColumns+` FROM events WHERE subject = $1 AND at >= $2 ORDER BY seq DESC`, ev.Subject, since)
		br := tx.SendBatch(ctx, &reads)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return classify("lock events of "+ev.Subject, err)
		}
		var exists bool
		if err := br.QueryRow().Scan(&exists); err != nil {
			br.Close()
			return classify("read event "+ev.ID, err)
		}
		rows, err := br.Query()
		recent, err := collect([]courier.Event{}, rows, err, "read events of "+ev.Subject, scanEvent)
		if cerr := br.Close(); err == nil && cerr != nil {
			err = classify("read events of "+ev.Subject, cerr)
		}
		if err != nil {
			return err
		}
		if exists {
			return nil // recorded before
		}
		rec, notices := decide(recent)
		if err := tx.QueryRow(ctx, `INSERT INTO events (id, kind, subject, at, details, notified) VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING seq`, rec.ID, string(rec.Kind), rec.Subject, rec.At, sqlstore.EventDetails(rec.Details), rec.Notified).Scan(&rec.Seq); err != nil {
			return classify("record event "+rec.ID, err)
		}
		// A notice whose id exists was sent for this same event before.
		var b ingestBatch
		b.add(notices)
		if _, due, err = ingest(ctx, tx, b); err != nil {
			return err
		}
		out, created = rec, true
		return nil
	})
	if err != nil {
		return courier.Event{}, false, classify("record event "+ev.ID, err)
	}
	s.dueNow(due...)
	return out, created, nil
}

// Events lists the events that f selects, newest first; the cursor is the
// seq of the last event of the previous page.
func (s *Store) Events(ctx context.Context, f courier.EventFilter) (courier.EventPage, error) {
	page, err := sqlstore.Events(sqlstore.Where{Numbered: true}, f,
		func(q string, args ...any) (sqlstore.Rows, error) { return s.pool.Query(ctx, q, args...) },
		scanEvent)
	return page, classify("list events", err)
}

func scanEvent(row scanner) (courier.Event, error) {
	var ev courier.Event
	var details string
	err := row.Scan(&ev.Seq, &ev.ID, &ev.Kind, &ev.Subject, &ev.At, &details, &ev.Notified)
	ev.At, ev.Details = ev.At.UTC(), sqlstore.ParseEventDetails(details)
	return ev, err
}
