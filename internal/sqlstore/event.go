package sqlstore

import (
	"encoding/json"

	courier "github.com/courier-gw/courier"
)

// EventColumns are the columns of table events that ScanEvent reads, in
// its order.
const EventColumns = `seq, id, kind, subject, at, details, notified`

// EventsQuery returns the statement that reads a page of the events that
// f selects, newest first, with its arguments in w, and the size of the
// page. Like ListQuery it reads one row more than the page holds.
func EventsQuery(w *Where, f courier.EventFilter) (query string, limit int, err error) {
	w.Equal("kind", string(f.Kind))
	w.Equal("subject", f.Subject)
	if !f.Since.IsZero() {
		w.Add("at >= ?", w.time(f.Since))
	}
	return pageQuery(w, EventColumns, "events", f.Cursor, f.Limit)
}

// Events reads the page of events that f selects, newest first, as
// EventsQuery makes it: query runs the statement with its arguments, and
// scan reads a row into an event.
func Events(w Where, f courier.EventFilter, query QueryFunc,
	scan func(Scanner) (courier.Event, error)) (courier.EventPage, error) {
	q, limit, err := EventsQuery(&w, f)
	if err != nil {
		return courier.EventPage{}, err
	}
	events, next, err := readPage(q, w.Args, limit, query, scan, func(e courier.Event) int64 { return e.Seq })
	return courier.EventPage{Events: events, Next: next}, err
}

// ScanEvent reads a row of EventColumns into an event.
func ScanEvent(row Scanner) (courier.Event, error) {
	var ev courier.Event
	var at Time
	var details string
	err := row.Scan(&ev.Seq, &ev.ID, &ev.Kind, &ev.Subject, &at, &details, &ev.Notified)
	ev.At, ev.Details = at.Time, ParseEventDetails(details)
	return ev, err
}

// EventDetails encodes an event's details for the details column.
func EventDetails(d courier.EventDetails) string {
	b, _ := json.Marshal(d)
	return string(b)
}

// ParseEventDetails decodes the details column.
func ParseEventDetails(s string) courier.EventDetails {
	var d courier.EventDetails
	_ = json.Unmarshal([]byte(s), &d) // written by EventDetails; a row that is not is shown without details
	return d
}
