package postgres

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
	"github.com/jackc/pgx/v5"
)

// RecordEvents records the events, each unless its id is recorded already,
// with the notices decide sends, in one transaction. The writers of one
// subject take turns under a transaction lock of the subject (the
// subjects of a batch are locked in the order of their names, so that two
// batches never wait for each other in a circle); the batch's events are
// decided in Go, each on the events before it, then written with one
// statement.
func (s *Store) RecordEvents(ctx context.Context, evs []courier.Event, window time.Duration, decide func(courier.Event, []courier.Event) (courier.Event, []*courier.Message)) ([]courier.Event, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	since := map[string]time.Time{} // per subject, the earliest its events look back to
	ids := make([]string, 0, len(evs))
	for _, ev := range evs {
		if t, ok := since[ev.Subject]; !ok || ev.At.Add(-window).Before(t) {
			since[ev.Subject] = ev.At.Add(-window)
		}
		ids = append(ids, ev.ID)
	}
	subjects := slices.Sorted(maps.Keys(since))
	starts := make([]time.Time, len(subjects))
	for i, sub := range subjects {
		starts[i] = since[sub]
	}
	var out []courier.Event
	var due []string
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		out, due = nil, nil
		// The locks and the reads go in one round trip: the reads come
		// after the locks in the same pipeline, so they see what the
		// writers before committed.
		var reads pgx.Batch
		reads.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('courier.events.' || subject, 0))
			FROM unnest($1::text[]) WITH ORDINALITY AS s(subject, n) ORDER BY n`, subjects)
		reads.Queue(`SELECT id FROM events WHERE id = ANY($1)`, ids)
		reads.Queue(`SELECT `+eventColumns("e")+` FROM unnest($1::text[], $2::timestamptz[]) AS w(subject, since)
			JOIN events e ON e.subject = w.subject AND e.at >= w.since ORDER BY e.seq DESC`, subjects, starts)
		br := tx.SendBatch(ctx, &reads)
		if _, err := br.Exec(); err != nil {
			br.Close()
			return classify("lock events", err)
		}
		rows, err := br.Query()
		found, err := collect(nil, rows, err, "read events", func(row scanner) (string, error) {
			var id string
			err := row.Scan(&id)
			return id, err
		})
		var stored []courier.Event
		if err == nil {
			rows, err = br.Query()
			stored, err = collect(nil, rows, err, "read events", sqlstore.ScanEvent)
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			err = classify("read events", cerr)
		}
		if err != nil {
			return err
		}
		recorded := make(map[string]bool, len(found)+len(evs))
		for _, id := range found {
			recorded[id] = true
		}
		recent := map[string][]courier.Event{} // per subject, newest first
		for _, ev := range stored {
			recent[ev.Subject] = append(recent[ev.Subject], ev)
		}
		var (
			b                         ingestBatch
			idv, kinds, subs, details []string
			ats                       []time.Time
			notified                  []bool
		)
		for _, ev := range evs {
			if recorded[ev.ID] {
				continue // recorded before
			}
			from := ev.At.Add(-window)
			var seen []courier.Event
			for _, r := range recent[ev.Subject] {
				if !r.At.Before(from) {
					seen = append(seen, r)
				}
			}
			rec, notices := decide(ev, seen)
			recorded[rec.ID] = true
			recent[rec.Subject] = append([]courier.Event{rec}, recent[rec.Subject]...)
			idv, kinds, subs = append(idv, rec.ID), append(kinds, string(rec.Kind)), append(subs, rec.Subject)
			ats, details, notified = append(ats, rec.At), append(details, sqlstore.EventDetails(rec.Details)), append(notified, rec.Notified)
			// A notice whose id exists was sent for this same event before.
			b.add(notices)
			out = append(out, rec)
		}
		if len(out) == 0 {
			return nil
		}
		// The seqs follow the order of the batch.
		rows, err = tx.Query(ctx, `INSERT INTO events (id, kind, subject, at, details, notified)
			SELECT id, kind, subject, at, details, notified
			FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::boolean[])
				WITH ORDINALITY AS e(id, kind, subject, at, details, notified, n)
			ORDER BY n RETURNING seq`, idv, kinds, subs, ats, details, notified)
		seqs, err := collect(nil, rows, err, "record events", func(row scanner) (int64, error) {
			var seq int64
			err := row.Scan(&seq)
			return seq, err
		})
		if err != nil {
			return err
		}
		if len(seqs) != len(out) {
			return classify("record events", fmt.Errorf("%d events written, %d returned", len(out), len(seqs)))
		}
		slices.Sort(seqs)
		for i := range out {
			out[i].Seq = seqs[i]
		}
		if _, due, err = ingest(ctx, tx, b); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, classify("record events", err)
	}
	s.dueNow(due...)
	return out, nil
}

// Events lists the events that f selects, newest first; the cursor is the
// seq of the last event of the previous page.
func (s *Store) Events(ctx context.Context, f courier.EventFilter) (courier.EventPage, error) {
	page, err := sqlstore.Events(sqlstore.Where{Numbered: true}, f, s.readRows(ctx), sqlstore.ScanEvent)
	return page, classify("list events", err)
}

// eventColumns are sqlstore.EventColumns of the table aliased as alias.
func eventColumns(alias string) string {
	cols := strings.Split(sqlstore.EventColumns, ", ")
	for i, c := range cols {
		cols[i] = alias + "." + strings.TrimSpace(c)
	}
	return strings.Join(cols, ", ")
}
