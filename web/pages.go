package web

import (
	"context"
	"encoding/hex"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
	"github.com/courier-gw/courier/api"
	"github.com/google/uuid"
)

// notes are the messages a page shows after a redirect, by the code in its
// ?note= query: fixed texts, so that a link cannot make the dashboard say
// anything else.
var notes = map[string]string{
	"resubmitted":      "The message was resubmitted: it is queued and due now.",
	"resent":           "The message was resent: it is queued and due now, in a new round.",
	"discarded":        "The message was discarded.",
	"erased":           "The payload was erased for good: the message's record is kept without it.",
	"endpoint_off":     "The endpoint was switched off: its messages are held until it is switched on.",
	"endpoint_on":      "The endpoint was switched on: its held messages go out.",
	"receiver_stop":    "The receive location was stopped on this node: it takes nothing in until it is started.",
	"receiver_start":   "The receive location was started on this node.",
	"object_created":   "Created. Every node takes it in within a second.",
	"object_saved":     "Saved. Every node takes the change in within a second.",
	"object_unchanged": "Saved: it was already so, nothing changed.",
	"object_deleted":   "Deleted. Every node lets go of it within a second.",
}

func note(r *http.Request) string { return notes[r.URL.Query().Get("note")] }

// base starts the page data of a session.
func (h *Handler) base(r *http.Request, s *session, title, nav string) page {
	p := s.page(title, nav)
	p.Note, p.Now = note(r), h.clock.Now()
	return p
}

type overviewData struct {
	Stats *api.Stats
	// Tenant is, in a tenant other than the default, its use against its
	// quotas, shown instead of the server's statistics.
	Tenant    *api.TenantView
	Queued    int
	Inflight  int
	Suspended int
	StatsErr  string
	Chart     chart
	NotActive []api.Endpoint
	Endpoints int
	// Queues are, by endpoint, the routes that use it, comma-separated:
	// its queued count counts their messages, which its link lists.
	Queues map[string]string
	// NotRunning are the receive locations of this node that are stopped or
	// cannot reach their source, out of Receivers.
	NotRunning []courier.ReceiverStatus
	Receivers  int
}

func (h *Handler) overview(w http.ResponseWriter, r *http.Request, s *session) {
	c := h.client(s)
	var d overviewData
	if s.serverWide() {
		stats := c
		if s.switches() {
			// A key that sees every tenant is shown the server's counts,
			// which are the system tenant's statistics; the default
			// tenant's are of its own messages alone.
			stats = c.InTenant(courier.SystemTenant)
		}
		st, err := stats.Stats(r.Context())
		switch {
		case courier.ErrorCode(err) == courier.CodeUnavailable:
			d.StatsErr = courier.ErrorMessage(err)
		case err != nil:
			h.fail(w, r, s, err)
			return
		default:
			d.Stats = st
			d.Queued, d.Inflight, d.Suspended = st.States[courier.StateQueued], st.States[courier.StateInflight], st.States[courier.StateSuspended]
			d.Chart = newChart(st.Minutes)
		}
	} else {
		// The server's statistics are not a tenant's: its use is.
		d.Tenant = s.use()
	}
	all, err := endpointsAndReceivers(r.Context(), c, s.serverWide())
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d.Endpoints, d.Queues = len(all.Endpoints), all.Queues
	for _, e := range all.Endpoints {
		if e.State != courier.HealthActive {
			d.NotActive = append(d.NotActive, e)
		}
	}
	d.Receivers = len(all.Receivers)
	for _, rc := range all.Receivers {
		if rc.State != courier.ReceiverRunning {
			d.NotRunning = append(d.NotRunning, rc)
		}
	}
	p := h.base(r, s, "Overview", "overview")
	p.Data = d
	h.render(w, http.StatusOK, "overview.html", p)
}

// endpointsData is the endpoints page: where messages go, and the receive
// locations where they come from.
type endpointsData struct {
	Endpoints []api.Endpoint
	Receivers []courier.ReceiverStatus
	// Mode says whether endpoints can be created and edited here; Known
	// are the endpoints of the topology, which have a page of settings.
	Mode  topologyMode
	Known map[string]bool
	// Queues are, by endpoint, the routes that use it, comma-separated:
	// its queued count counts their messages, which its link lists.
	Queues map[string]string
	// Tested is what the receiver answered to the test message just sent.
	Tested *api.EndpointTestResult
}

// endpointsAndReceivers reads the endpoints and, where the session acts on
// the server as a whole (receivers), this node's receive locations, which
// the overview sums up and the endpoints page lists.
func endpointsAndReceivers(ctx context.Context, c *api.Client, receivers bool) (endpointsData, error) {
	eps, err := c.Endpoints(ctx)
	if err != nil {
		return endpointsData{}, err
	}
	var rs []courier.ReceiverStatus
	if receivers {
		if rs, err = c.Receivers(ctx); err != nil {
			return endpointsData{}, err
		}
	}
	cfg, err := c.Routes(ctx)
	if err != nil {
		return endpointsData{}, err
	}
	uses := map[string][]string{}
	for _, rt := range cfg.Routes {
		for _, ep := range rt.Endpoints {
			uses[ep] = append(uses[ep], rt.Name)
		}
	}
	queues := map[string]string{}
	for ep, routes := range uses {
		slices.Sort(routes)
		queues[ep] = strings.Join(routes, ",")
	}
	return endpointsData{Endpoints: eps, Receivers: rs, Queues: queues}, nil
}

func (h *Handler) endpoints(w http.ResponseWriter, r *http.Request, s *session) {
	h.endpointsPage(w, r, s, nil)
}

// endpointsPage shows the endpoints, with the answer to a test message
// when one was just sent.
func (h *Handler) endpointsPage(w http.ResponseWriter, r *http.Request, s *session, tested *api.EndpointTestResult) {
	c := h.client(s)
	d, err := endpointsAndReceivers(r.Context(), c, s.serverWide())
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	t, mode, err := h.topology(r.Context(), c, s)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d.Mode, d.Known = mode, map[string]bool{}
	for name := range t.Endpoints {
		d.Known[name] = true
	}
	d.Tested = tested
	p := h.base(r, s, "Endpoints", "endpoints")
	p.Data = d
	h.render(w, http.StatusOK, "endpoints.html", p)
}

// types shows the catalog of message types and who subscribes to each.
func (h *Handler) types(w http.ResponseWriter, r *http.Request, s *session) {
	types, err := h.client(s).Types(r.Context())
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	p := h.base(r, s, "Types", "types")
	p.Data = types
	h.render(w, http.StatusOK, "types.html", p)
}

// replay starts a replay for a subscription and shows its progress on the
// operation page.
func (h *Handler) replay(w http.ResponseWriter, r *http.Request, s *session) {
	var req api.ReplayRequest
	for _, tf := range []struct {
		field, name string
		dst         **time.Time
	}{{"since", "Ingested from", &req.Since}, {"until", "until", &req.Until}} {
		text := strings.TrimSpace(r.PostFormValue(tf.field))
		if text == "" {
			continue
		}
		t, err := time.Parse(timeLayout, text)
		if err != nil {
			h.fail(w, r, s, courier.Errorf(courier.CodeInvalidArgument, "%s: %q is not a time like 2026-11-21T10:00", tf.name, text))
			return
		}
		*tf.dst = &t
	}
	id, err := uuid.NewV7()
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	req.Again, req.OperationID = r.PostFormValue("again") != "", "replay-"+id.String()
	op, err := h.client(s).Replay(r.Context(), strings.TrimSpace(r.PostFormValue("subscription")), req)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/ui/operations/"+url.PathEscape(op.ID), http.StatusSeeOther)
}

func (h *Handler) switchReceiver(w http.ResponseWriter, r *http.Request, s *session) {
	name, verb := r.PathValue("name"), r.PathValue("verb")
	if verb != "stop" && verb != "start" {
		h.notFound(w, r, s)
		return
	}
	if _, err := h.client(s).SwitchReceiver(r.Context(), name, verb == "start"); err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/ui/endpoints?note=receiver_"+verb+"#receivers", http.StatusSeeOther)
}

func (h *Handler) switchEndpoint(w http.ResponseWriter, r *http.Request, s *session) {
	name, verb := r.PathValue("name"), r.PathValue("verb")
	if verb == "test" {
		// The answer is shown at once: a test is no change to come back to.
		res, err := h.client(s).TestEndpoint(r.Context(), name, api.EndpointTestRequest{})
		if err != nil {
			h.fail(w, r, s, err)
			return
		}
		h.endpointsPage(w, r, s, res)
		return
	}
	if verb != "on" && verb != "off" {
		h.notFound(w, r, s)
		return
	}
	if _, err := h.client(s).SwitchEndpoint(r.Context(), name, verb == "on"); err != nil {
		h.fail(w, r, s, err)
		return
	}
	http.Redirect(w, r, "/ui/endpoints?note=endpoint_"+verb, http.StatusSeeOther)
}

// listFilter is the filter of a list of messages (the suspended queue,
// the messages page) as the operator typed it.
type listFilter struct {
	Type, Route, Endpoint, Subscription, Reason, After, Before string
}

// timeLayout is how the filter's times are typed (an HTML datetime-local
// field), in UTC.
const timeLayout = "2006-01-02T15:04"

func readFilter(get func(string) string, prefix string) listFilter {
	return listFilter{Type: strings.TrimSpace(get(prefix + "type")), Route: strings.TrimSpace(get(prefix + "route")),
		Endpoint: strings.TrimSpace(get(prefix + "endpoint")), Subscription: strings.TrimSpace(get(prefix + "subscription")),
		Reason: get(prefix + "reason"),
		After:  strings.TrimSpace(get(prefix + "after")), Before: strings.TrimSpace(get(prefix + "before"))}
}

// apiFilter turns the typed filter into the API's, for suspended messages.
func (f listFilter) apiFilter() (api.Filter, error) {
	out := api.Filter{State: courier.StateSuspended, Type: f.Type, Route: f.Route, Endpoint: f.Endpoint, Subscription: f.Subscription,
		Reason: courier.Reason(f.Reason)}
	for _, tf := range []struct {
		text, name string
		dst        **time.Time
	}{{f.After, "Ingested after", &out.CreatedAfter}, {f.Before, "Ingested before", &out.CreatedBefore}} {
		if tf.text == "" {
			continue
		}
		t, err := time.Parse(timeLayout, tf.text)
		if err != nil {
			return out, courier.Errorf(courier.CodeInvalidArgument, "%s: %q is not a time like 2026-11-21T10:00", tf.name, tf.text)
		}
		*tf.dst = &t
	}
	return out, nil
}

// query is the filter as URL parameters, for links to further pages.
func (f listFilter) query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"type": f.Type, "route": f.Route, "endpoint": f.Endpoint, "subscription": f.Subscription,
		"reason": f.Reason, "after": f.After, "before": f.Before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

type suspendedData struct {
	Filter   listFilter
	Messages []api.Message
	Next     string // link to the next page; empty on the last
	Routes   []string
	Reasons  []courier.Reason
}

func (h *Handler) suspended(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	f := readFilter(q.Get, "")
	d := suspendedData{Filter: f, Reasons: courier.Reasons}
	p := h.base(r, s, "Suspended", "suspended")
	c := h.client(s)
	routes, err := h.routeNames(r.Context(), c)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	d.Routes = routes
	af, err := f.apiFilter()
	if err != nil {
		h.refuseFilter(w, "suspended.html", p, d, err)
		return
	}
	mf := af.MessageFilter()
	mf.Cursor, mf.Limit = q.Get("cursor"), 100
	list, err := c.Messages(r.Context(), mf)
	if h.listFailed(w, r, s, "suspended.html", p, d, err) {
		return
	}
	d.Messages = list.Messages
	d.Next = nextLink("/ui/suspended", f.query(), list.NextCursor)
	p.Data = d
	h.render(w, http.StatusOK, "suspended.html", p)
}

// refuseFilter shows a listing's page name again with data and the
// problem err found in its filter, status 422, for the operator to
// correct it.
func (h *Handler) refuseFilter(w http.ResponseWriter, name string, p page, data any, err error) {
	p.Error = courier.ErrorMessage(err)
	p.Data = data
	h.render(w, http.StatusUnprocessableEntity, name, p)
}

// listFailed answers a listing the API did not give: a filter the API
// refuses shows on the page (refuseFilter), any other error on the error
// page. It reports whether there was an error to answer.
func (h *Handler) listFailed(w http.ResponseWriter, r *http.Request, s *session, name string, p page, data any, err error) bool {
	switch {
	case err == nil:
		return false
	case courier.ErrorCode(err) == courier.CodeInvalidArgument:
		h.refuseFilter(w, name, p, data, err)
	default:
		h.fail(w, r, s, err)
	}
	return true
}

// listLink links to the listing at path with the filter's parameters q.
func listLink(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// nextLink links to the listing's page that starts at cursor, with the
// filter's parameters q; empty on the last page, which has no cursor.
func nextLink(path string, q url.Values, cursor string) string {
	if cursor == "" {
		return ""
	}
	q.Set("cursor", cursor)
	return listLink(path, q)
}

// routeNames lists the configured routes, for the resubmit forms.
func (h *Handler) routeNames(ctx context.Context, c *api.Client) ([]string, error) {
	cfg, err := c.Routes(ctx)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(cfg.Routes))
	for i, rt := range cfg.Routes {
		names[i] = rt.Name
	}
	return names, nil
}

// outcome is what happened to one selected message.
type outcome struct {
	ID    string
	Error string
}

type doneData struct {
	Action   string
	Outcomes []outcome
	OK       int
	Back     string
}

// suspendedAction resubmits or discards the selected messages one by one,
// or every message matching the filter as a bulk operation whose progress
// the operation page shows.
func (h *Handler) suspendedAction(w http.ResponseWriter, r *http.Request, s *session) {
	action, route := r.PostFormValue("action"), strings.TrimSpace(r.PostFormValue("route"))
	f := readFilter(r.PostFormValue, "f_")
	back := "/ui/suspended"
	if q := f.query(); len(q) > 0 {
		back += "?" + q.Encode()
	}
	c := h.client(s)
	switch action {
	case "resubmit", "discard":
		ids := r.PostForm["id"]
		if len(ids) == 0 {
			h.fail(w, r, s, courier.Errorf(courier.CodeInvalidArgument, "no message was selected"))
			return
		}
		d := doneData{Action: map[string]string{"resubmit": "Resubmitted", "discard": "Discarded"}[action], Back: back}
		for _, id := range ids {
			var err error
			if action == "resubmit" {
				_, err = c.Resubmit(r.Context(), id, route)
			} else {
				_, err = c.Discard(r.Context(), id)
			}
			if courier.ErrorCode(err) == courier.CodeUnauthenticated || courier.ErrorCode(err) == courier.CodePermissionDenied {
				h.fail(w, r, s, err)
				return
			}
			o := outcome{ID: id}
			if err != nil {
				o.Error = courier.ErrorMessage(err)
			} else {
				d.OK++
			}
			d.Outcomes = append(d.Outcomes, o)
		}
		p := h.base(r, s, d.Action, "suspended")
		p.Data = d
		h.render(w, http.StatusOK, "done.html", p)
	case "resubmit_all", "discard_all":
		af, err := f.apiFilter()
		if err != nil {
			h.fail(w, r, s, err)
			return
		}
		kind := courier.ActionResubmit
		if action == "discard_all" {
			kind = courier.ActionDiscard
			if route != "" {
				route = "" // a discard has no route
			}
		}
		id := "ui-" + hex.EncodeToString(randomBytes(8))
		h.startBulk(r, c, kind, api.BulkRequest{Filter: af, Route: route, OperationID: id}, s.who)
		http.Redirect(w, r, "/ui/operations/"+id, http.StatusSeeOther)
	default:
		h.fail(w, r, s, courier.Errorf(courier.CodeInvalidArgument, "unknown action %q", action))
	}
}

// startBulk runs a bulk operation through the API in the background: the
// API answers when the operation is done, and the operation page shows its
// progress meanwhile. A refusal (a route that is not configured) is kept
// for that page to show.
func (h *Handler) startBulk(r *http.Request, c *api.Client, kind courier.ActionKind, req api.BulkRequest, who string) {
	ctx, cancel := detach(r.Context())
	h.bulkErrs.Store(req.OperationID, "")
	go func() {
		defer cancel()
		if _, err := c.Bulk(ctx, kind, req); err != nil {
			h.logger.Warn("bulk operation from the dashboard failed", "operation", req.OperationID, "by", who, "err", err)
			h.bulkErrs.Store(req.OperationID, courier.ErrorMessage(err))
		}
	}()
	// The record of a refusal is forgotten after a while.
	time.AfterFunc(bulkTimeout, func() { h.bulkErrs.Delete(req.OperationID) })
}

type operationData struct {
	ID    string
	Op    *api.Operation
	Error string
}

func (h *Handler) operation(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	p := h.base(r, s, "Bulk operation", "suspended")
	d := operationData{ID: id}
	op, err := h.client(s).Operation(r.Context(), id)
	switch {
	case courier.ErrorCode(err) == courier.CodeNotFound:
		v, started := h.bulkErrs.Load(id)
		if !started {
			h.fail(w, r, s, err)
			return
		}
		d.Error = v.(string)
		if d.Error == "" {
			p.Refresh = 1 // not recorded yet
		}
	case err != nil:
		h.fail(w, r, s, err)
		return
	default:
		d.Op = op
		if !op.Done {
			p.Refresh = 1
		}
	}
	p.Data = d
	h.render(w, http.StatusOK, "operation.html", p)
}

type messageData struct {
	M           *api.Message
	Stands      string // where its workflow stands; empty for a message of no workflow
	Attempts    []api.Attempt
	Payload     preview
	Headers     []header
	Routes      []string
	CanResubmit bool
	CanDiscard  bool
	CanResend   bool
	// CanErase: the message's payload (of all its deliveries) may be
	// erased on request; on a delivery's page it is not offered, as it
	// would erase the other deliveries' too.
	CanErase bool
}

type header struct{ Name, Value string }

func (h *Handler) message(w http.ResponseWriter, r *http.Request, s *session) {
	id := r.PathValue("id")
	c := h.client(s)
	m, err := c.StoredMessage(r.Context(), id)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	attempts, err := c.Attempts(r.Context(), id)
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	// A published message is acted on delivery by delivery, each on its
	// own page; a compensated workflow has nothing left to do (the API
	// refuses).
	one := len(m.Deliveries) == 0
	d := messageData{M: m, Attempts: attempts, Payload: makePreview(m),
		CanResubmit: one && m.State == courier.StateSuspended && m.Reason != courier.ReasonCompensated,
		CanDiscard:  one && (m.State == courier.StateSuspended || m.State == courier.StateQueued),
		// A suspended one is resubmitted (a resend of it is one); a
		// workflow's steps are not done again.
		CanResend: one && m.Workflow == nil && m.Erased == nil && (m.State == courier.StateDelivered || m.State == courier.StateDiscarded),
		CanErase:  m.Subscription == "" && m.Erased == nil}
	if m.Workflow != nil {
		d.Stands = m.WorkflowStands()
	}
	for _, k := range slices.Sorted(maps.Keys(m.Headers)) {
		d.Headers = append(d.Headers, header{k, m.Headers[k]})
	}
	if d.CanResubmit {
		if d.Routes, err = h.routeNames(r.Context(), c); err != nil {
			h.fail(w, r, s, err)
			return
		}
	}
	p := h.base(r, s, "Message "+m.ID, "")
	p.Data = d
	h.render(w, http.StatusOK, "message.html", p)
}

func (h *Handler) messageAction(w http.ResponseWriter, r *http.Request, s *session) {
	id, verb := r.PathValue("id"), r.PathValue("verb")
	c := h.client(s)
	var err error
	switch verb {
	case "resubmit":
		_, err = c.Resubmit(r.Context(), id, strings.TrimSpace(r.PostFormValue("route")))
	case "discard":
		_, err = c.Discard(r.Context(), id)
	case "resend":
		_, err = c.Resend(r.Context(), id)
	case "erase":
		_, err = c.Erase(r.Context(), id, strings.TrimSpace(r.PostFormValue("reason")))
	default:
		h.notFound(w, r, s)
		return
	}
	if err != nil {
		h.fail(w, r, s, err)
		return
	}
	done := map[string]string{"resubmit": "resubmitted", "discard": "discarded", "resend": "resent", "erase": "erased"}[verb]
	http.Redirect(w, r, "/ui/messages/"+url.PathEscape(id)+"?note="+done, http.StatusSeeOther)
}
