package courier

import (
	"net/http"
	"sort"
	"strings"
)

// Subscription gives a delivery of every published message it matches to
// its route (docs/design.md §14): a message published by type, without a route,
// goes to every subscription that wants it.
type Subscription struct {
	Name string
	// Types are exact type names ("order.created") or prefixes written
	// with ".*" ("order.*": every type that begins with "order.").
	Types []string
	// Route delivers this subscription's copy of each message.
	Route string
	// Headers, when set, must each be among the message's headers with
	// exactly this value (the name matches without regard to case, as in
	// HTTP).
	Headers map[string]string
}

// ValidTypePattern reports whether s is what a subscription's types may
// hold: a type name, or a prefix of type names followed by ".*".
func ValidTypePattern(s string) bool {
	if prefix, ok := strings.CutSuffix(s, ".*"); ok {
		return ValidType(prefix) && len(s) <= MaxTypeLen
	}
	return ValidType(s)
}

// Matches reports whether the subscription wants a message of the type
// with the headers.
func (s *Subscription) Matches(msgType string, headers map[string]string) bool {
	return s.WantsType(msgType) && s.matchesHeaders(headers)
}

// WantsType reports whether the subscription's types take in msgType, whatever
// its header filter says.
func (s *Subscription) WantsType(msgType string) bool {
	for _, p := range s.Types {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(msgType, prefix) && len(msgType) > len(prefix) {
				return true
			}
		} else if p == msgType {
			return true
		}
	}
	return false
}

func (s *Subscription) matchesHeaders(headers map[string]string) bool {
	for name, want := range s.Headers {
		got, ok := headers[name]
		if !ok {
			got, ok = headerFold(headers, name)
		}
		if !ok || got != want {
			return false
		}
	}
	return true
}

// headerFold finds a header by a name that differs only in case.
func headerFold(headers map[string]string, name string) (string, bool) {
	canonical := http.CanonicalHeaderKey(name)
	for k, v := range headers {
		if http.CanonicalHeaderKey(k) == canonical {
			return v, true
		}
	}
	return "", false
}

// Subscribers returns the subscriptions that want a message of the type
// with the headers, by name: the order in which a publish gets its
// deliveries.
func (t *Topology) Subscribers(msgType string, headers map[string]string) []*Subscription {
	var out []*Subscription
	for _, s := range t.Subscriptions {
		if s.Matches(msgType, headers) {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
