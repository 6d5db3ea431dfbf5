// Package sourcetest has the checks the tests of receive locations' sources
// share: fetching an exact number of items, and fetching none, and a
// source that counts what it acknowledged.
package sourcetest

import (
	"context"
	"slices"
	"sync/atomic"
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

// FetchAgain fetches the items handed back to the source: their bodies,
// in order, are want, and each is marked redelivered.
func FetchAgain(t testing.TB, s courier.Source, want ...string) []*courier.InboundItem {
	t.Helper()
	got := FetchN(t, s, len(want))
	if !slices.Equal(Bodies(got), want) {
		t.Fatalf("fetched again %q, want %q", Bodies(got), want)
	}
	for _, it := range got {
		if !it.Redelivered {
			t.Errorf("%q, fetched again, is not marked redelivered", it.Body)
		}
	}
	return got
}

// Bodies are the items' bodies, as text.
func Bodies(items []*courier.InboundItem) []string {
	var out []string
	for _, it := range items {
		out = append(out, string(it.Body))
	}
	return out
}

// AckCounter is a source that counts the items it acknowledged.
type AckCounter struct {
	courier.Source
	Acked *atomic.Int64
}

func (c *AckCounter) Ack(ctx context.Context, items []*courier.InboundItem) error {
	err := c.Source.Ack(ctx, items)
	if err == nil {
		c.Acked.Add(int64(len(items)))
	}
	return err
}
