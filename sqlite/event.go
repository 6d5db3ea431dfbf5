package sqlite

import (
	"context"
	"database/sql"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/internal/sqlstore"
)

// RecordEvent records an event unless its id is recorded already, with the
// notices decide sends, in one transaction; SQLite's single writer makes
// the writers of a subject take turns.
func (s *Store) RecordEvent(ctx context.Context, ev courier.Event, since time.Time, decide func([]courier.Event) (courier.Event, []*courier.Message)) (courier.Event, bool, error) {
	var out courier.Event
	var created bool
	err := s.write(ctx, func(tx *sql.Tx) error {
		out, created = ev, false
		var one int
		switch err := tx.QueryRow(`SELECT 1 FROM events WHERE id = ?`, ev.ID).Scan(&one); err {
		case nil:
			return nil // recorded before
		case sql.ErrNoRows:
		default:
			return classify("read event "+ev.ID, err)
		}
		rows, err := tx.Query(`SELECT `+sqlstore.EventColumns+` FROM events WHERE subject = ? AND at >= ? ORDER BY seq DESC`,
			ev.Subject, micros(since))
		recent, err := collect([]courier.Event{}, rows, err, "read events of "+ev.Subject, scanEvent)
		if err != nil {
			return err
		}
		rec, notices := decide(recent)
		res, err := tx.Exec(`INSERT INTO events (id, kind, subject, at, details, notified) VALUES (?, ?, ?, ?, ?, ?)`,
			rec.ID, string(rec.Kind), rec.Subject, micros(rec.At), sqlstore.EventDetails(rec.Details), rec.Notified)
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
		out, created = rec, true
		return nil
	})
	if err != nil {
		return courier.Event{}, false, err
	}
	return out, created, nil
}

// Events lists the events that f selects, newest first; the cursor is the
// seq of the last event of the previous page.
func (s *Store) Events(ctx context.Context, f courier.EventFilter) (courier.EventPage, error) {
	page, err := sqlstore.Events(sqlstore.Where{Time: micros}, f,
		func(q string, args ...any) (sqlstore.Rows, error) { return s.rdb.QueryContext(ctx, q, args...) },
		scanEvent)
	return page, classify("list events", err)
}

func scanEvent(row scanner) (courier.Event, error) {
	var ev courier.Event
	var at int64
	var details string
	err := row.Scan(&ev.Seq, &ev.ID, &ev.Kind, &ev.Subject, &at, &details, &ev.Notified)
	ev.At, ev.Details = fromMicros(at), sqlstore.ParseEventDetails(details)
	return ev, err
}
