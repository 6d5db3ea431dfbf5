// Package sourcetest has the checks the tests of receive locations' sources
// share: fetching an exact number of items, and fetching none.
package sourcetest

import (
	"context"
	"testing"

	courier "github.com/courier-gw/courier"
)

// FetchN fetches until n items came, and fails when fewer or more come
// within a generous number of fetches (each waits about a second for a
// first item).
func FetchN(t testing.TB, s courier.Source, n int) []*courier.InboundItem {
	t.Helper()
	var got []*courier.InboundItem
	for try := 0; try < 30 && len(got) < n; try++ {
		items, err := s.Fetch(context.Background(), n-len(got))
		if err != nil {
			t.Fatalf("fetch: %v", err)
		}
		got = append(got, items...)
	}
	if len(got) != n {
		t.Fatalf("fetched %d items (%q), want %d", len(got), Bodies(got), n)
	}
	return got
}

// FetchNone checks that Fetch waits and returns nothing.
func FetchNone(t testing.TB, s courier.Source) {
	t.Helper()
	items, err := s.Fetch(context.Background(), 10)
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	if len(items) != 0 {
		t.Fatalf("fetched %q, want nothing", Bodies(items))
	}
}

// Bodies are the items' bodies, as text.
func Bodies(items []*courier.InboundItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, string(it.Body))
	}
	return out
}
