package web

import (
	"net/http"
	"net/url"
	"strings"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
)

// auditPageSize is how many entries a page of the audit log shows.
const auditPageSize = 50

// auditActions are the actions the audit page filters by.
var auditActions = []courier.ActionKind{
	courier.ActionCreate, courier.ActionReplace, courier.ActionDelete, courier.ActionRotateSecrets,
	courier.ActionResubmit, courier.ActionDiscard, courier.ActionResend, courier.ActionReplay, courier.ActionErase,
	courier.ActionEndpointOff, courier.ActionEndpointOn,
}

// auditFilter is the audit page's filter as the operator typed it.
type auditFilter struct {
	Who, Action, Object, Subject string
}

func (f auditFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"who": f.Who, "action": f.Action, "object": f.Object, "subject": f.Subject} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// auditRow is one entry of the log as the page shows it.
type auditRow struct {
	api.AuditEntry
	// Link is the page of what the entry is about; empty when there is
	// none (a deleted object).
	Link string
	// Changes are the fields a replace changed; Before and After the
	// object's fields as YAML, for a topology change.
	Changes       []fieldChange
	Before, After string
}

type auditData struct {
	Filter  auditFilter
	Actions []courier.ActionKind
	Kinds   []courier.TopologyKind
	Entries []auditRow
	// Next links to the older entries; empty on the last page. Newest
	// links back to the first page, from a later one.
	Next, Newest string
}

// audit shows the audit log, newest first: who changed the topology and
// how, and what operators did to messages and endpoints.
func (h *Handler) audit(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := auditFilter{Who: strings.TrimSpace(q.Get("who")), Action: q.Get("action"), Object: q.Get("object"),
		Subject: strings.TrimSpace(q.Get("subject"))}
	d := auditData{Filter: f, Actions: auditActions, Kinds: courier.TopologyKinds}
	p := h.base(r, s, "Audit log", "audit")
	cursor := q.Get("cursor")
	if cursor != "" {
		d.Newest = listLink("/ui/audit", f.query())
	}
	page, err := h.client(s).Audit(r.Context(), courier.AuditFilter{Who: f.Who, Kind: courier.ActionKind(f.Action),
		Object: courier.TopologyKind(f.Object), Subject: f.Subject, Cursor: cursor, Limit: auditPageSize})
	if h.listFailed(w, r, s, "audit.html", p, d, err) {
		return
	}
	for _, e := range page.Entries {
		d.Entries = append(d.Entries, auditRowOf(e))
	}
	d.Next = nextLink("/ui/audit", f.query(), page.Next)
	p.Data = d
	h.render(w, http.StatusOK, "audit.html", p)
}

func auditRowOf(e api.AuditEntry) auditRow {
	row := auditRow{AuditEntry: e}
	switch {
	case e.Object != "":
		if e.Action != courier.ActionDelete {
			row.Link = objectURL(e.Object, e.Subject)
		}
		if e.Action == courier.ActionReplace {
			row.Changes = specChanges(e.Before, e.After)
		}
		// A spec that cannot be shown as YAML is shown as it came.
		if len(e.Before) > 0 {
			if row.Before, _ = specYAML(e.Before); row.Before == "" {
				row.Before = string(e.Before)
			}
		}
		if len(e.After) > 0 {
			if row.After, _ = specYAML(e.After); row.After == "" {
				row.After = string(e.After)
			}
		}
	case e.Action == courier.ActionEndpointOff || e.Action == courier.ActionEndpointOn:
		row.Link = "/ui/endpoints#ep-" + e.Subject
	case e.Action == courier.ActionResubmit || e.Action == courier.ActionDiscard || e.Action == courier.ActionResend || e.Action == courier.ActionErase:
		row.Link = "/ui/messages/" + url.PathEscape(e.Subject)
	}
	return row
}
