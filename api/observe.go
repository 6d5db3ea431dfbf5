package api

import (
	"context"
	"net/http"
	"time"

	courier "github.com/courier-gw/courier"
)

// Observer is told of what the API does, for metrics. Its methods must be
// quick and safe for concurrent use.
type Observer interface {
	// Ingested is called for each message stored by an ingest (not for
	// repeats of one stored before).
	Ingested(m *courier.Message)
	// Acted is called after an operator action on n messages or endpoints.
	Acted(kind courier.ActionKind, n int)
}

type nopObserver struct{}

func (nopObserver) Ingested(*courier.Message)     {}
func (nopObserver) Acted(courier.ActionKind, int) {}

// Stats is GET /v1/stats: the tenant's messages in each live state as last
// counted in the store, and this node's deliveries and failures of them.
type Stats struct {
	// States counts queued, inflight and suspended messages.
	States    map[courier.State]int `json:"states"`
	CountedAt time.Time             `json:"counted_at"`
	// Node is what this node has done since it started.
	Node *NodeStats `json:"node,omitempty"`
	// Rates are deliveries and failed attempts per second on this node over
	// the last five minutes.
	Rates *Rates `json:"rates,omitempty"`
	// LastHour sums Minutes.
	LastHour *Counts `json:"last_hour,omitempty"`
	// Minutes are this node's last 60 minutes, oldest first.
	Minutes []MinuteStats `json:"minutes,omitempty"`
}

// NodeStats counts what one node has done since it started.
type NodeStats struct {
	Since     time.Time `json:"since"`
	Ingested  int64     `json:"ingested"`
	Delivered int64     `json:"delivered"`
	Suspended int64     `json:"suspended"`
	Discarded int64     `json:"discarded"`
}

// Rates are events per second over a window.
type Rates struct {
	Window    string  `json:"window"`
	Delivered float64 `json:"delivered_per_second"`
	Failed    float64 `json:"failed_per_second"`
}

// MinuteStats counts the deliveries (messages) and failed attempts of the
// minute that begins at Start.
type MinuteStats struct {
	Start     time.Time `json:"start"`
	Delivered int       `json:"delivered"`
	Failed    int       `json:"failed"`
}

// Counts are deliveries (messages) and failed attempts.
type Counts struct {
	Delivered int `json:"delivered"`
	Failed    int `json:"failed"`
}

// rateWindow is the span of Stats.Rates, in minutes.
const rateWindow = 5

func toStats(s courier.Stats, now time.Time) Stats {
	out := Stats{
		States: map[courier.State]int{courier.StateQueued: s.Live.Queued, courier.StateInflight: s.Live.Inflight,
			courier.StateSuspended: s.Live.Suspended},
		CountedAt: s.CountedAt,
	}
	if s.Since.IsZero() {
		return out
	}
	out.Node = &NodeStats{Since: s.Since, Ingested: s.Ingested, Delivered: s.Delivered, Suspended: s.Suspended, Discarded: s.Discarded}
	out.LastHour = &Counts{}
	out.Minutes = make([]MinuteStats, len(s.Minutes))
	for i, m := range s.Minutes {
		out.Minutes[i] = MinuteStats{Start: m.Start, Delivered: m.Delivered, Failed: m.Failed}
		out.LastHour.Delivered += m.Delivered
		out.LastHour.Failed += m.Failed
	}
	if n := len(s.Minutes); n >= rateWindow {
		// The last minute is the current one, under way: the window is the
		// full minutes before it and the part of it gone by.
		window := time.Duration(rateWindow-1)*time.Minute + now.Sub(s.Minutes[n-1].Start)
		if up := now.Sub(s.Since); up > 0 && up < window {
			window = up // the node has not run that long
		}
		var d, f int
		for _, m := range s.Minutes[n-rateWindow:] {
			d, f = d+m.Delivered, f+m.Failed
		}
		out.Rates = &Rates{Window: window.Round(time.Second).String(),
			Delivered: float64(d) / window.Seconds(), Failed: float64(f) / window.Seconds()}
	}
	return out
}

// handleStats answers the statistics of the request's tenant: of its
// messages alone, every figure, so that none tells of another tenant's.
// The system tenant owns no messages; its statistics are the server's as a
// whole, which its keys administer.
func (s *Server) handleStats(w http.ResponseWriter, r *http.Request) {
	tenant := scopeOf(r).tenant
	if tenant == courier.SystemTenant {
		tenant = courier.AllTenants
	}
	var st courier.Stats
	var err error
	if s.opts.StatsFunc != nil {
		st, err = s.opts.StatsFunc(r.Context(), tenant)
	} else {
		var routes []courier.RouteLive
		st.CountedAt = s.opts.Clock.Now()
		routes, err = s.opts.Store.CountLive(r.Context())
		st.Live = courier.LiveByTenant(routes)[tenant]
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toStats(st, s.opts.Clock.Now()))
}

// handleMetrics serves the metrics handler, or 404 when there is none.
func (s *Server) handleMetrics(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h == nil {
			s.writeError(w, r, courier.Errorf(courier.CodeNotFound, "this server has no metrics"))
			return
		}
		h.ServeHTTP(w, r)
	}
}

// actionViews returns the operator actions on a message or endpoint.
// actionViews returns the actions on a message or an endpoint: those
// recorded with the subject, less the changes of topology objects of
// another kind that share its name (object is the kind it is, empty for
// a message).
func (s *Server) actionViews(ctx context.Context, subject string, object courier.TopologyKind) ([]ActionView, error) {
	actions, err := s.opts.Store.Actions(ctx, subject)
	if err != nil {
		return nil, err
	}
	var out []ActionView
	for _, a := range actions {
		if a.Object != "" && a.Object != object {
			continue
		}
		out = append(out, ActionView{At: a.At, Who: a.Who, Kind: a.Kind, Detail: a.Detail})
	}
	return out, nil
}

// KeysRequired reports whether callers need an API key: false when the
// server runs without keys (on loopback only).
func (s *Server) KeysRequired() bool { return s.keys.Load() != nil }

// Identify returns the name and role of the key with the given secret, as
// the API authenticates a bearer token, or an error with
// CodeUnauthenticated. Without keys configured, every caller is "local"
// with every right.
func (s *Server) Identify(secret string) (name string, role courier.Role, err error) {
	kr := s.keys.Load()
	if kr == nil {
		return "local", courier.RoleAdmin, nil
	}
	k, err := kr.match(secret)
	if err != nil {
		return "", "", err
	}
	return k.Name, k.Role, nil
}
