package web

import (
	"net/http"
	"net/url"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// eventsPageSize is how many events a page of the events shows.
const eventsPageSize = 50

// eventFilter is the events page's filter as the operator typed it.
type eventFilter struct {
	Event, Subject string
}

func (f eventFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"event": f.Event, "subject": f.Subject} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// eventRow is one event as the page shows it, with the page of its
// subject.
type eventRow struct {
	api.Event
	// Name is the event's kind, its Event field: in a template .Event is
	// the embedded struct itself, which prints as a Go value.
	Name courier.EventKind
	Link string
}

type eventsData struct {
	Filter eventFilter
	Kinds  []courier.EventKind
	Events []eventRow
	// Next links to the older events; empty on the last page. Newest
	// links back to the first page, from a later one.
	Next, Newest string
}

// events shows the operational events, newest first: endpoints suspended,
// switched off and recovered, routes lagging, receive locations stopped,
// and whether their notices went out.
func (h *Handler) events(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := eventFilter{Event: q.Get("event"), Subject: strings.TrimSpace(q.Get("subject"))}
	d := eventsData{Filter: f, Kinds: courier.EventKinds}
	p := h.base(r, s, "Events", "events")
	cursor := q.Get("cursor")
	if cursor != "" {
		d.Newest = listLink("/ui/events", f.query())
	}
	page, err := h.client(s).Events(r.Context(), courier.EventFilter{Kind: courier.EventKind(f.Event), Subject: f.Subject,
		Cursor: cursor, Limit: eventsPageSize})
	if h.listFailed(w, r, s, "events.html", p, d, err) {
		return
	}
	for _, e := range page.Events {
		d.Events = append(d.Events, eventRow{Event: e, Name: e.Event, Link: courier.Event{Kind: e.Event, Subject: e.Subject}.Link()})
	}
	d.Next = nextLink("/ui/events", f.query(), page.Next)
	p.Data = d
	h.render(w, http.StatusOK, "events.html", p)
}
