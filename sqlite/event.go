package sqlite

import (
	"context"
	"database/sql"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// RecordEvents records the events, each unless its id is recorded already,
// with the notices decide sends, in one transaction; SQLite's single writer
// makes the writers of a subject take turns, and each event of the batch
// is read back by the decisions after it.
func (s *Store) RecordEvents(ctx context.Context, evs []courier.Event, window time.Duration, decide func(courier.Event, []courier.Event) (courier.Event, []*courier.Message)) ([]courier.Event, error) {
	var out []courier.Event
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		exists, err := tx.Prepare(`SELECT 1 FROM events WHERE id = ?`)
		if err != nil {
			return classify("record events", err)
		}
		defer exists.Close()
		recent, err := tx.Prepare(`SELECT ` + sqlstore.EventColumns + ` FROM events WHERE subject = ? AND at >= ? ORDER BY seq DESC`)
		if err != nil {
			return classify("record events", err)
		}
		defer recent.Close()
		insert, err := tx.Prepare(`INSERT INTO events (id, kind, subject, at, details, notified) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return classify("record events", err)
		}
		defer insert.Close()
		for _, ev := range evs {
			var one int
			switch err := exists.QueryRow(ev.ID).Scan(&one); err {
			case nil:
				continue // recorded before
			case sql.ErrNoRows:
			default:
				return classify("read event "+ev.ID, err)
			}
			rows, err := recent.Query(ev.Subject, micros(ev.At.Add(-window)))
			seen, err := collect([]courier.Event{}, rows, err, "read events of "+ev.Subject, sqlstore.ScanEvent)
			if err != nil {
				return err
			}
			rec, notices := decide(ev, seen)
			res, err := insert.Exec(rec.ID, string(rec.Kind), rec.Subject, micros(rec.At), sqlstore.EventDetails(rec.Details), rec.Notified)
			if err != nil {
				return classify("record event "+rec.ID, err)
			}
			if rec.Seq, err = res.LastInsertId(); err != nil {
				return classify("record event "+rec.ID, err)
			}
			for _, n := range notices {
				// A notice whose id exists was sent for this same event before.
				if _, err := s.execInsert(tx, s.insertStmt, n, 0); err != nil {
					return err
				}
			}
			out = append(out, rec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Events lists the events that f selects, newest first; the cursor is the
// seq of the last event of the previous page.
func (s *Store) Events(ctx context.Context, f courier.EventFilter) (courier.EventPage, error) {
	page, err := sqlstore.Events(sqlstore.Where{Time: micros}, f, s.readRows(ctx), sqlstore.ScanEvent)
	return page, classify("list events", err)
}
