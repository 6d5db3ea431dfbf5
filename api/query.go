package api

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	courier "github.com/courier-gw/courier"
)

// anyQuery is what the probes and /metrics take: load balancers and
// scrapers ask them with queries of their own, which are not for courier to
// refuse.
var anyQuery = []string{"*"}

// checkQuery refuses a query that a route would not read whole, rather
// than answer as if it had been read: one that cannot be parsed (400; the
// pairs url.ParseQuery cannot read are dropped without a word by
// Request.URL.Query), a parameter the route does not take, or one given
// twice (422). params are the parameters the route takes.
func checkQuery(r *http.Request, params []string) error {
	if slices.Equal(params, anyQuery) {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return malformed("the query string cannot be read: %v", err)
	}
	for _, key := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(params, key):
			return courier.Errorf(courier.CodeInvalidArgument, "unknown query parameter %q", key)
		case len(q[key]) > 1:
			return courier.Errorf(courier.CodeInvalidArgument, "query parameter %q is given %d times; it takes one value", key, len(q[key]))
		}
	}
	return nil
}

// listParams reads what bounds a page of a listing: its limit into limit,
// and the RFC 3339 times of times (see queryTimes).
func listParams(q url.Values, limit *int, times map[string]*time.Time) error {
	n, err := listLimit(q)
	if err != nil {
		return err
	}
	*limit = n
	return queryTimes(q, times)
}

// listLimit reads the limit of a listing, 0 when the query gives none.
func listLimit(q url.Values) (int, error) {
	v := q.Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > courier.MaxListLimit {
		return 0, courier.Errorf(courier.CodeInvalidArgument, "limit must be a whole number from 1 to %d", courier.MaxListLimit)
	}
	return n, nil
}

// queryTimes reads RFC 3339 times of a query into their destinations,
// leaving those the query does not give.
func queryTimes(q url.Values, dst map[string]*time.Time) error {
	for _, key := range slices.Sorted(maps.Keys(dst)) {
		if v := q.Get(key); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return courier.Errorf(courier.CodeInvalidArgument, "%s must be an RFC 3339 time", key)
			}
			*dst[key] = t
		}
	}
	return nil
}
