package courier

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// EventKind names an operational event: a change in how courier itself
// delivers that an operator wants to hear of.
type EventKind string

// The operational events.
const (
	EventEndpointSuspended EventKind = "endpoint.suspended" // an endpoint became suspended
	EventEndpointOff       EventKind = "endpoint.off"       // an operator switched an endpoint off
	EventEndpointRecovered EventKind = "endpoint.recovered" // a suspended or off endpoint is active again
	// EventEndpointAuthFailing: an endpoint's credentials could not be
	// obtained (its token endpoint is down or refuses them); its health is
	// untouched, as its receiver was not reached.
	EventEndpointAuthFailing EventKind = "endpoint.auth_failing"
	EventRouteLagging        EventKind = "route.lagging"    // a route's oldest due message has waited longer than oldest_due
	EventReceiverStopped     EventKind = "receiver.stopped" // a receive location stopped
)

// EventKinds lists every event.
var EventKinds = []EventKind{EventEndpointSuspended, EventEndpointOff, EventEndpointRecovered, EventEndpointAuthFailing,
	EventRouteLagging, EventReceiverStopped}

// SubjectKind is what an event is about: "endpoint", "route" or "receiver".
func (k EventKind) SubjectKind() string {
	kind, _, _ := strings.Cut(string(k), ".")
	return kind
}

// Defaults of the alerts section.
const (
	DefaultOldestDue     = 15 * time.Minute
	DefaultAlertsPerHour = 6
)

// Alerts is the alerts section: which endpoints hear of operational events,
// when a route counts as lagging, and how many notices one subject may
// cause in an hour.
type Alerts struct {
	// Notify are the endpoints (smtp or http) that get a notice of each
	// event; with none, events are only recorded.
	Notify []string
	// OldestDue is how long a route's oldest due message may wait before
	// the route is lagging (default DefaultOldestDue).
	OldestDue time.Duration
	// MaxPerHour bounds the events of one subject (an endpoint, a route, a
	// receive location) that send notices within any hour (default
	// DefaultAlertsPerHour); the events past it are recorded, not sent.
	MaxPerHour int
	// PublicURL is public_url, for the dashboard links of notices; empty
	// leaves them out.
	PublicURL string
}

// Event is one operational event, as recorded in the store and listed at
// GET /v1/events.
type Event struct {
	// ID is derived from the transition (EventID), so that every node that
	// sees the same transition records, and notifies, it once.
	ID      string
	Kind    EventKind
	Subject string // the endpoint, route or receive location's name
	At      time.Time
	Details EventDetails
	// Notified says that notices went out for the event; false when the
	// rate limit held them back or no endpoint is to be notified.
	Notified bool
	// Seq orders the events: set by the store.
	Seq int64
}

// EventDetails say more of an event; each field is set for the events it
// fits.
type EventDetails struct {
	State          HealthState `json:"state,omitempty"`           // an endpoint's health after the change
	SuspendedUntil time.Time   `json:"suspended_until,omitzero"`  // when a suspended endpoint is probed
	Suspensions    int         `json:"suspensions,omitempty"`     // suspensions in a row
	DueSince       time.Time   `json:"due_since,omitzero"`        // since when a lagging route's oldest due message is due
	OldestDueAge   int64       `json:"oldest_due_age_s,omitzero"` // how long it has waited, in seconds
	Reason         string      `json:"reason,omitempty"`          // what caused the event, for people
}

// EventFilter selects events for a listing. Empty fields match all.
type EventFilter struct {
	Kind    EventKind
	Subject string
	Since   time.Time // at or after
	Limit   int       // at most MaxListLimit; 0 means DefaultListLimit
	Cursor  string    // from the previous page's Next
}

// EventPage is one page of events, newest first. Next is the cursor of the
// following page, empty on the last.
type EventPage struct {
	Events []Event
	Next   string
}

// EventID is the id of the event of kind on subject at the time of its
// transition: the same on every node that sees that transition.
func EventID(kind EventKind, subject string, at time.Time) string {
	id := "event." + string(kind) + "." + subject + "." + at.UTC().Format("20060102T150405.000000Z")
	if len(id) > MaxIDLen-64 { // room for the notice's endpoint
		sum := sha256.Sum256([]byte(id))
		id = "event." + string(kind) + "." + hex.EncodeToString(sum[:16])
	}
	return id
}

// newEvent makes an event at the time, kept to the microsecond as the
// stores keep it.
func newEvent(kind EventKind, subject string, at time.Time, d EventDetails) Event {
	at = at.UTC().Truncate(time.Microsecond)
	return Event{ID: EventID(kind, subject, at), Kind: kind, Subject: subject, At: at, Details: d}
}

// HealthEvent is the event of an endpoint's health change from before to
// after, if it is one: suspended (from any other state; a failed probe that
// suspends it again is no new event), switched off, or recovered (active
// again after suspended or off). A timeout state coming and going is none.
// reason says what caused it, for people.
func HealthEvent(endpoint string, before, after EndpointHealth, reason string) (Event, bool) {
	active := func(s HealthState) bool { return s == "" || s == HealthActive }
	var kind EventKind
	switch {
	case after.State == HealthSuspended && before.State != HealthSuspended:
		kind = EventEndpointSuspended
	case after.State == HealthOff && before.State != HealthOff:
		kind = EventEndpointOff
	case active(after.State) && (before.State == HealthSuspended || before.State == HealthOff):
		kind = EventEndpointRecovered
	default:
		return Event{}, false
	}
	state := after.State
	if state == "" {
		state = HealthActive
	}
	d := EventDetails{State: state, Reason: reason}
	if kind == EventEndpointSuspended {
		d.SuspendedUntil, d.Suspensions = after.SuspendedUntil.UTC(), after.Suspensions
	}
	return newEvent(kind, endpoint, after.UpdatedAt, d), true
}

// AuthEvent is the event of an endpoint whose credentials could not be
// obtained at the time, when its attempts on this node had been obtaining
// them (or none had been made): each node keeps its own tokens, so each
// tells of its own failure once, until it obtains them again.
func AuthEvent(endpoint, reason string, at time.Time) Event {
	return newEvent(EventEndpointAuthFailing, endpoint, at, EventDetails{Reason: reason})
}

// LagEvent is the event of a route whose oldest due message has been due
// since dueSince, seen at now. Its id is derived from dueSince, which every
// node reads alike from the store, so that the nodes that see one lag
// record it once.
func LagEvent(route string, dueSince, now time.Time) Event {
	dueSince = dueSince.UTC().Truncate(time.Microsecond)
	age := now.Sub(dueSince)
	ev := newEvent(EventRouteLagging, route, now, EventDetails{DueSince: dueSince, OldestDueAge: int64(age / time.Second),
		Reason: "the oldest due message has waited " + roundAge(age)})
	ev.ID = EventID(EventRouteLagging, route, dueSince)
	return ev
}

// Lagging reports whether a route whose oldest due message is due since
// dueSince lags at now. Notice routes are left out: their lag is the
// notify endpoint's, which its own events tell of.
func (a *Alerts) Lagging(route string, dueSince, now time.Time) bool {
	return a != nil && !IsNoticeRoute(route) && !dueSince.IsZero() && now.Sub(dueSince) > a.oldestDue()
}

func (a *Alerts) oldestDue() time.Duration {
	if a.OldestDue > 0 {
		return a.OldestDue
	}
	return DefaultOldestDue
}

// IsNoticeRoute reports whether a route is the implicit one that carries
// notices to an endpoint (NoticeRoute).
func IsNoticeRoute(route string) bool {
	_, ok := noticeEndpoint(route)
	return ok
}

// ReceiverEvent is the event of a receive location that stopped at the
// time, for the reason given.
func ReceiverEvent(receiver, reason string, at time.Time) Event {
	return newEvent(EventReceiverStopped, receiver, at, EventDetails{Reason: reason})
}

// Allow decides whether ev sends notices, the rate limit of alerts: at most
// MaxPerHour events of one subject send notices within any hour, counted
// over the events recorded for it in the hour before ev (recent, as the
// store returns the subject's events since ev.At minus an hour). The first
// events of a flapping endpoint go out, the rest are only recorded, until
// an hour after the first of those that went out.
func (a *Alerts) Allow(ev Event, recent []Event) bool {
	if a == nil || len(a.Notify) == 0 {
		return false
	}
	return notifiedWithin(ev, recent) < perHour(a.MaxPerHour)
}

// Allow decides whether ev sends notices to a tenant's alert targets, by
// the rule of the server's (Alerts.Allow) with the tenant's max_per_hour.
// An event counts as sent when it went to anyone: each group's notices are
// the first events of the hour up to its own limit, so the events that
// went anywhere number at least those that went to this group, and at
// most its limit once it is reached.
func (ta *TenantAlerts) Allow(ev Event, recent []Event) bool {
	if ta == nil || len(ta.Notify) == 0 {
		return false
	}
	return notifiedWithin(ev, recent) < perHour(ta.MaxPerHour)
}

// notifiedWithin counts the events of ev's subject that sent notices in
// the hour before ev.
func notifiedWithin(ev Event, recent []Event) int {
	from := ev.At.Add(-time.Hour)
	sent := 0
	for _, r := range recent {
		if r.Notified && r.ID != ev.ID && r.Kind.SubjectKind() == ev.Kind.SubjectKind() && r.Subject == ev.Subject &&
			r.At.After(from) && !r.At.After(ev.At) {
			sent++
		}
	}
	return sent
}

func perHour(n int) int {
	if n > 0 {
		return n
	}
	return DefaultAlertsPerHour
}

// TenantAlerts returns the alert targets of the tenant whose endpoint or
// route ev is about, nil when it has none (an event of a receive location
// is the server's alone).
func (t *Topology) TenantAlerts(ev Event) *TenantAlerts {
	switch ev.Kind.SubjectKind() {
	case "endpoint", "route":
	default:
		return nil
	}
	if tn := t.Tenants[TenantOf(ev.Subject)]; tn != nil && len(tn.Alerts.Notify) > 0 {
		return &tn.Alerts
	}
	return nil
}

// EventBody is the payload of an event's notice.
type EventBody struct {
	Event   EventKind    `json:"event"`
	Subject string       `json:"subject"`
	Kind    string       `json:"subject_kind"` // endpoint, route or receiver
	At      time.Time    `json:"at"`
	Text    string       `json:"text"`
	Details EventDetails `json:"details"`
	// Link is the dashboard page of the subject; empty without public_url.
	Link string `json:"link,omitempty"`
}

// Text says what the event is, for people.
func (ev Event) Text() string {
	s := fmt.Sprintf("%s %s", ev.Kind.SubjectKind(), ev.Subject)
	switch ev.Kind {
	case EventEndpointSuspended:
		s += fmt.Sprintf(" is suspended until %s", ev.Details.SuspendedUntil.Format(time.RFC3339))
	case EventEndpointOff:
		if r := ev.Details.Reason; strings.HasPrefix(r, "switched off") {
			return s + " was " + r // "switched off by ops", said once
		}
		s += " was switched off"
	case EventEndpointRecovered:
		s += " is active again"
	case EventEndpointAuthFailing:
		s += " cannot obtain its credentials (its health is untouched)"
	case EventRouteLagging:
		s += " is lagging"
	case EventReceiverStopped:
		s += " stopped"
	}
	if ev.Details.Reason != "" {
		s += ": " + ev.Details.Reason
	}
	return s
}

// Link is the path of the dashboard page of ev's subject.
func (ev Event) Link() string {
	switch ev.Kind.SubjectKind() {
	case "endpoint":
		return "/ui/endpoints#ep-" + url.PathEscape(ev.Subject)
	case "receiver":
		return "/ui/endpoints#rc-" + url.PathEscape(ev.Subject)
	case "route":
		return "/ui/topology/routes/" + url.PathEscape(ev.Subject)
	}
	return "/ui/events"
}

// Notices are the messages that tell each endpoint of a.Notify of ev, one
// each, with ids derived from the event's: a second node that sends them
// again sends nothing new.
func (a *Alerts) Notices(ev Event, notify []string) []*Message {
	b := EventBody{Event: ev.Kind, Subject: ev.Subject, Kind: ev.Kind.SubjectKind(), At: ev.At, Text: ev.Text(), Details: ev.Details}
	if base := strings.TrimRight(a.PublicURL, "/"); base != "" {
		b.Link = base + ev.Link()
	}
	body, _ := json.Marshal(b)
	out := make([]*Message, 0, len(notify))
	for _, ep := range notify {
		m := &Message{ID: ev.ID + "." + ep, Type: NoticeType, Route: NoticeRoute(ep), Payload: body, ContentType: "application/json",
			Headers: map[string]string{"Courier-Notice": string(ev.Kind), "Courier-Event-Id": ev.ID}}
		if len(m.ID) > MaxIDLen {
			sum := sha256.Sum256([]byte(m.ID))
			m.ID = "notice." + hex.EncodeToString(sum[:])
		}
		Accept(m, &Policy{Priority: 9}, false, ev.At)
		out = append(out, m)
	}
	return out
}
