package api

import (
	"context"
	"net/http"
	"slices"
	"time"

	courier "github.com/courier-gw/courier"
)

// Event is one operational event as GET /v1/events lists it.
type Event struct {
	Seq     int64                `json:"seq"`
	ID      string               `json:"id"`
	Event   courier.EventKind    `json:"event"`
	Subject string               `json:"subject"`
	Kind    string               `json:"subject_kind"` // endpoint, route or receiver
	At      time.Time            `json:"at"`
	Text    string               `json:"text"`
	Details courier.EventDetails `json:"details"`
	// Notified says that notices went out; false when alerts.max_per_hour
	// held them back or no endpoint is to be notified.
	Notified bool `json:"notified"`
}

// EventPage is GET /v1/events: events newest first, and the cursor of the
// next page (empty on the last).
type EventPage struct {
	Events []Event `json:"events"`
	Next   string  `json:"next,omitempty"`
}

// eventParams are the query parameters of GET /v1/events.
var eventParams = []string{"event", "subject", "since", "limit", "cursor"}

func toEvent(ev courier.Event) Event {
	return Event{Seq: ev.Seq, ID: ev.ID, Event: ev.Kind, Subject: ev.Subject, Kind: ev.Kind.SubjectKind(), At: ev.At,
		Text: ev.Text(), Details: ev.Details, Notified: ev.Notified}
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sc := scopeOf(r)
	f := courier.EventFilter{Kind: courier.EventKind(q.Get("event")), Subject: sc.nameIf(q.Get("subject")), Cursor: q.Get("cursor")}
	if f.Kind != "" && !slices.Contains(courier.EventKinds, f.Kind) {
		s.writeError(w, r, courier.Errorf(courier.CodeInvalidArgument, "event %q is not one of endpoint.suspended, endpoint.off, "+
			"endpoint.recovered, endpoint.auth_failing, route.lagging, receiver.stopped", f.Kind))
		return
	}
	if err := listParams(q, &f.Limit, map[string]*time.Time{"since": &f.Since}); err != nil {
		s.writeError(w, r, err)
		return
	}
	page, err := s.opts.Store.Events(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := EventPage{Events: []Event{}, Next: page.Next}
	for _, ev := range page.Events {
		if !sc.owns(ev.Subject) {
			continue // another tenant's: a page may hold fewer than its limit
		}
		v := toEvent(ev)
		v.Subject, v.Text = sc.showName(v.Subject), sc.showText(v.Text)
		out.Events = append(out.Events, v)
	}
	writeJSON(w, http.StatusOK, out)
}

// Events returns one page of the operational events, newest first.
func (c *Client) Events(ctx context.Context, f courier.EventFilter) (*EventPage, error) {
	path := listPath("/v1/events", map[string]string{"event": string(f.Kind), "subject": f.Subject, "cursor": f.Cursor},
		f.Limit, map[string]time.Time{"since": f.Since})
	return request[EventPage](ctx, c, http.MethodGet, path, nil)
}
