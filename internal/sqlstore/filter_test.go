package sqlstore

import (
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestWhere(t *testing.T) {
	after := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	before := after.Add(time.Hour)
	all := courier.MessageFilter{State: courier.StateSuspended, Type: "invoice", Route: "acme", Endpoint: "e",
		Reason: courier.ReasonRejected, Sender: "erp", CreatedAfter: after, CreatedBefore: before}
	micros := func(t time.Time) any { return t.UnixMicro() }
	tests := []struct {
		name     string
		w        Where
		build    func(w *Where)
		wantSQL  string
		wantArgs string
	}{
		{name: "nothing", build: func(w *Where) {}, wantSQL: "", wantArgs: "[]"},
		{
			name:     "every field of a filter, with ? and times as kept",
			w:        Where{Time: micros},
			build:    func(w *Where) { w.Filter(all) },
			wantSQL:  " WHERE state = ? AND type = ? AND route = ? AND endpoint = ? AND reason = ? AND sender = ? AND created_at >= ? AND created_at < ?",
			wantArgs: fmt.Sprint([]any{"suspended", "invoice", "acme", "e", "rejected", "erp", after.UnixMicro(), before.UnixMicro()}),
		},
		{
			name:     "every field of a filter, numbered, times as they are",
			w:        Where{Numbered: true},
			build:    func(w *Where) { w.Filter(all) },
			wantSQL:  " WHERE state = $1 AND type = $2 AND route = $3 AND endpoint = $4 AND reason = $5 AND sender = $6 AND created_at >= $7 AND created_at < $8",
			wantArgs: fmt.Sprint([]any{"suspended", "invoice", "acme", "e", "rejected", "erp", after, before}),
		},
		{
			name:     "one of several, without arrays",
			build:    func(w *Where) { w.Add("seq > ?", 7); w.In("state", []string{"queued", "suspended"}) },
			wantSQL:  " WHERE seq > ? AND state IN (?,?)",
			wantArgs: "[7 queued suspended]",
		},
		{
			name: "a batch of a bulk operation",
			build: func(w *Where) {
				w.BulkBatch(courier.BulkOp{Kind: courier.ActionDiscard, Filter: courier.MessageFilter{State: courier.StateQueued, Route: "acme"}}, 10, 99)
			},
			// Discarding queued messages is for those only; the filter's
			// state is not a condition of its own.
			wantSQL:  " WHERE route = ? AND state IN (?) AND seq > ? AND seq <= ?",
			wantArgs: "[acme queued 10 99]",
		},
		{
			name:     "one of several, as an array",
			w:        Where{Numbered: true},
			build:    func(w *Where) { w.Add("seq > ?", 7); w.In("state", []string{"queued", "suspended"}) },
			wantSQL:  " WHERE seq > $1 AND state = ANY($2)",
			wantArgs: "[7 [queued suspended]]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			tt.build(&w)
			if got := w.SQL(); got != tt.wantSQL {
				t.Errorf("SQL %q, want %q", got, tt.wantSQL)
			}
			if got := fmt.Sprint(append([]any{}, w.Args...)); got != tt.wantArgs {
				t.Errorf("args %s, want %s", got, tt.wantArgs)
			}
		})
	}
}

// pageQueryCase is a case of a statement that reads a page (ListQuery,
// AuditQuery), built with placeholders w for filter f.
type pageQueryCase[F any] struct {
	name      string
	w         Where
	f         F
	wantQuery string
	wantArgs  string
	wantLimit int
}

// testPageQuery checks that build (named name) makes each case's
// statement, arguments and page size, and refuses a cursor that is not
// one as an invalid argument.
func testPageQuery[F any](t *testing.T, name string, build func(w *Where, f F) (string, int, error), tests []pageQueryCase[F], badCursor F) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.w
			q, limit, err := build(&w, tt.f)
			if err != nil {
				t.Fatal(err)
			}
			if q != tt.wantQuery || limit != tt.wantLimit {
				t.Errorf("%s = %q, %d; want %q, %d", name, q, limit, tt.wantQuery, tt.wantLimit)
			}
			if got := fmt.Sprint(w.Args); got != tt.wantArgs {
				t.Errorf("args %s, want %s", got, tt.wantArgs)
			}
		})
	}
	var w Where
	if _, _, err := build(&w, badCursor); courier.ErrorCode(err) != courier.CodeInvalidArgument {
		t.Errorf("a bad cursor: %v, want invalid_argument", err)
	}
}

func TestListQuery(t *testing.T) {
	tests := []pageQueryCase[courier.MessageFilter]{
		{
			name:      "the default page",
			f:         courier.MessageFilter{},
			wantQuery: "SELECT c FROM messages ORDER BY seq DESC LIMIT ?",
			wantArgs:  fmt.Sprint([]any{courier.DefaultListLimit + 1}),
			wantLimit: courier.DefaultListLimit,
		},
		{
			name:      "a page after a cursor, with a filter",
			w:         Where{Numbered: true},
			f:         courier.MessageFilter{Route: "acme", Limit: 5, Cursor: EncodeCursor(42)},
			wantQuery: "SELECT c FROM messages WHERE route = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3",
			wantArgs:  "[acme 42 6]",
			wantLimit: 5,
		},
		{
			name:      "no larger than the largest page",
			f:         courier.MessageFilter{Limit: courier.MaxListLimit * 10},
			wantQuery: "SELECT c FROM messages ORDER BY seq DESC LIMIT ?",
			wantArgs:  fmt.Sprint([]any{courier.MaxListLimit + 1}),
			wantLimit: courier.MaxListLimit,
		},
	}
	testPageQuery(t, "ListQuery", func(w *Where, f courier.MessageFilter) (string, int, error) { return ListQuery(w, "c", f) },
		tests, courier.MessageFilter{Cursor: "not a cursor"})
}

func TestPage(t *testing.T) {
	msgs := []*courier.Message{{ID: "c"}, {ID: "b"}, {ID: "a"}}
	seqs := []int64{30, 20, 10}
	tests := []struct {
		name     string
		rows     int // read of msgs
		limit    int
		wantIDs  string
		wantNext int64 // 0: no next page
	}{
		{"none", 0, 2, "[]", 0},
		{"fewer than a page", 1, 2, "[c]", 0},
		{"a full page and nothing after", 2, 2, "[c b]", 0},
		{"a full page and more", 3, 2, "[c b]", 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page := Page(msgs[:tt.rows], seqs[:tt.rows], tt.limit)
			ids := []string{}
			for _, m := range page.Messages {
				ids = append(ids, m.ID)
			}
			if got := fmt.Sprint(ids); got != tt.wantIDs {
				t.Errorf("messages %s, want %s", got, tt.wantIDs)
			}
			wantNext(t, page.Next, tt.wantNext)
		})
	}
}

// wantNext fails t unless next is the cursor of the page after the row
// with sequence number want, or none when want is 0.
func wantNext(t *testing.T, next string, want int64) {
	t.Helper()
	switch {
	case want == 0 && next != "":
		t.Errorf("next %q, want none", next)
	case want != 0:
		if seq, err := DecodeCursor(next); err != nil || seq != want {
			t.Errorf("next %q is seq %d (%v), want %d", next, seq, err, want)
		}
	}
}

func TestCursor(t *testing.T) {
	for _, seq := range []int64{1, 42, 1 << 62} {
		if got, err := DecodeCursor(EncodeCursor(seq)); err != nil || got != seq {
			t.Errorf("cursor of %d decodes to %d, %v", seq, got, err)
		}
	}
	for _, bad := range []string{"", "!!", EncodeCursor(0), "LTE", "eA"} { // "LTE" is -1, "eA" is x
		if _, err := DecodeCursor(bad); courier.ErrorCode(err) != courier.CodeInvalidArgument {
			t.Errorf("DecodeCursor(%q): %v, want invalid_argument", bad, err)
		}
	}
}
