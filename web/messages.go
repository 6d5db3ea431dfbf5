package web

import (
	"net/http"
	"net/url"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// messagesPageSize is how many messages a page of the list shows.
const messagesPageSize = 100

// messagesFilter is the messages page's filter as the operator typed it:
// the suspended queue's, with the start of an id, a state and, from a
// queued count of an endpoint, the routes that use it.
type messagesFilter struct {
	listFilter
	ID, State string
	Routes    string // comma-separated
}

func readMessagesFilter(q url.Values) messagesFilter {
	return messagesFilter{listFilter: readFilter(q.Get, ""), ID: strings.TrimSpace(q.Get("id")), State: q.Get("state"),
		Routes: strings.TrimSpace(q.Get("routes"))}
}

// query is the filter as URL parameters, for links to further pages.
func (f messagesFilter) query() url.Values {
	q := f.listFilter.query()
	for k, v := range map[string]string{"id": f.ID, "state": f.State, "routes": f.Routes} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// any reports whether the filter selects anything.
func (f messagesFilter) any() bool { return len(f.query()) > 0 }

// apiFilter turns the typed filter into the API's listing filter.
func (f messagesFilter) apiFilter() (courier.MessageFilter, error) {
	af, err := f.listFilter.apiFilter()
	if err != nil {
		return courier.MessageFilter{}, err
	}
	mf := af.MessageFilter()
	mf.State, mf.IDPrefix = courier.State(f.State), f.ID
	if f.Routes != "" {
		mf.Routes = strings.Split(f.Routes, ",")
	}
	return mf, nil
}

type messagesData struct {
	Filter   messagesFilter
	Any      bool // some filter is set
	Messages []api.Message
	Next     string // link to the next page; empty on the last
	Routes   []string
	States   []courier.State
	Reasons  []courier.Reason
}

// messages lists the messages that match a filter, newest first: by the
// start of an id, state, type, route, endpoint, subscription, reason and
// time. An id that is a message's whole id leads to its page (the search
// box of every page asks here).
func (h *Handler) messages(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := readMessagesFilter(q)
	c := h.client(s)
	if f.ID != "" && len(f.query()) == 1 {
		_, err := c.Message(r.Context(), f.ID)
		switch {
		case err == nil:
			http.Redirect(w, r, "/ui/messages/"+url.PathEscape(f.ID), http.StatusSeeOther)
			return
		case courier.ErrorCode(err) != courier.CodeNotFound:
			h.fail(w, r, s, err)
			return
		}
	}
	d := messagesData{Filter: f, Any: f.any(), States: courier.States, Reasons: courier.Reasons}
	p := h.base(r, s, "Messages", "messages")
	routes, err := h.routeNames(r.Context(), c)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d.Routes = routes
	mf, err := f.apiFilter()
	if err != nil {
		h.refuseFilter(w, "messages.html", p, d, err)
		return
	}
	mf.Cursor, mf.Limit = q.Get("cursor"), messagesPageSize
	list, err := c.Messages(r.Context(), mf)
	if h.listFailed(w, r, s, "messages.html", p, d, err) {
		return
	}
	d.Messages = list.Messages
	d.Next = nextLink("/ui/messages", f.query(), list.NextCursor)
	p.Data = d
	h.render(w, http.StatusOK, "messages.html", p)
}
