package api

import (
	"net/http"
	"slices"
	"strings"
	"time"

	courier "github.com/courier-gw/courier"
)

// TypeList is GET /v1/types: the catalog of message types taken in.
type TypeList struct {
	Types []TypeView `json:"types"`
}

// TypeView is one message type: how many messages of it came, the policy
// that retries them, and the subscriptions that want it.
type TypeView struct {
	Type      string    `json:"type"`
	Count     int64     `json:"count"` // messages taken in (a published one counts once)
	FirstSeen time.Time `json:"first_seen"`
	LastSeen  time.Time `json:"last_seen"`
	Policy    string    `json:"policy"`
	// Subscriptions want messages of the type, by name; those with a
	// header filter only the messages that have those headers.
	Subscriptions []SubscriptionView `json:"subscriptions"`
}

// SubscriptionView is a subscription as the catalog shows it.
type SubscriptionView struct {
	Name    string            `json:"name"`
	Route   string            `json:"route"`
	Types   []string          `json:"types"`
	Headers map[string]string `json:"headers,omitempty"`
}

func (s *Server) handleTypes(w http.ResponseWriter, r *http.Request) {
	seen, err := s.opts.Store.Types(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	sc := scopeOf(r)
	seen = slices.DeleteFunc(seen, func(ts courier.TypeSeen) bool { return !sc.owns(ts.Type) })
	out := toTypeList(seen, s.topology.Load())
	for i := range out.Types {
		v := &out.Types[i]
		v.Type, v.Policy = sc.showName(v.Type), sc.showName(v.Policy)
		for j := range v.Subscriptions {
			sub := &v.Subscriptions[j]
			sub.Name, sub.Route, sub.Types = sc.showName(sub.Name), sc.showName(sub.Route), sc.showNames(sub.Types)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func toTypeList(seen []courier.TypeSeen, t *courier.Topology) TypeList {
	out := TypeList{Types: make([]TypeView, len(seen))}
	for i, ts := range seen {
		v := TypeView{Type: ts.Type, Count: ts.Count, FirstSeen: ts.FirstSeen, LastSeen: ts.LastSeen,
			Policy: t.Policy(ts.Type).Name, Subscriptions: []SubscriptionView{}}
		for _, sub := range t.Subscriptions {
			if sub.WantsType(ts.Type) { // with its header filter, shown
				v.Subscriptions = append(v.Subscriptions, SubscriptionView{Name: sub.Name, Route: sub.Route, Types: sub.Types, Headers: sub.Headers})
			}
		}
		slices.SortFunc(v.Subscriptions, func(a, b SubscriptionView) int { return strings.Compare(a.Name, b.Name) })
		out.Types[i] = v
	}
	return out
}
