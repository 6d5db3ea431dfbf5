package sqlstore

import (
	"errors"
	"fmt"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestAuditQuery(t *testing.T) {
	since := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	until := since.Add(time.Hour)
	tests := []pageQueryCase[courier.AuditFilter]{
		{
			name:      "the default page",
			wantQuery: "SELECT c FROM actions ORDER BY seq DESC LIMIT ?",
			wantArgs:  fmt.Sprint([]any{courier.DefaultListLimit + 1}),
			wantLimit: courier.DefaultListLimit,
		},
		{
			name: "every field, numbered, after a cursor",
			w:    Where{Numbered: true},
			f: courier.AuditFilter{Who: "alice", Kind: courier.ActionReplace, Object: courier.KindRoute, Subject: "orders",
				Since: since, Until: until, Limit: 5, Cursor: EncodeCursor(42)},
			wantQuery: "SELECT c FROM actions WHERE who = $1 AND kind = $2 AND object = $3 AND subject = $4" +
				" AND at >= $5 AND at < $6 AND seq < $7 ORDER BY seq DESC LIMIT $8",
			wantArgs:  fmt.Sprint([]any{"alice", "replace", "route", "orders", since, until, 42, 6}),
			wantLimit: 5,
		},
		{
			name:      "times as the store keeps them, no larger than the largest page",
			w:         Where{Time: func(t time.Time) any { return t.UnixMicro() }},
			f:         courier.AuditFilter{Since: since, Limit: courier.MaxListLimit + 1},
			wantQuery: "SELECT c FROM actions WHERE at >= ? ORDER BY seq DESC LIMIT ?",
			wantArgs:  fmt.Sprint([]any{since.UnixMicro(), courier.MaxListLimit + 1}),
			wantLimit: courier.MaxListLimit,
		},
	}
	testPageQuery(t, "AuditQuery", func(w *Where, f courier.AuditFilter) (string, int, error) { return AuditQuery(w, "c", f) },
		tests, courier.AuditFilter{Cursor: "not a cursor"})
}

func TestAuditPage(t *testing.T) {
	scan := func(row Scanner) (courier.Action, error) {
		var seq int
		err := row.Scan(&seq)
		return courier.Action{Seq: int64(seq)}, err
	}
	tests := []struct {
		name     string
		rows     []string // seqs, as fakeRows has them
		limit    int
		wantSeqs string
		wantNext int64 // 0: no next page
	}{
		{"none", nil, 2, "[]", 0},
		{"a full page and nothing after", []string{"30", "20"}, 2, "[30 20]", 0},
		{"a full page and more", []string{"30", "20", "10"}, 2, "[30 20]", 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			page, err := Audit(Where{}, "seq", courier.AuditFilter{Limit: tt.limit},
				func(string, ...any) (Rows, error) { return &fakeRows{rows: tt.rows}, nil }, scan)
			if err != nil {
				t.Fatal(err)
			}
			seqs := []int64{}
			for _, a := range page.Actions {
				seqs = append(seqs, a.Seq)
			}
			if got := fmt.Sprint(seqs); got != tt.wantSeqs {
				t.Errorf("seqs %s, want %s", got, tt.wantSeqs)
			}
			wantNext(t, page.Next, tt.wantNext)
		})
	}
	failed := errors.New("connection lost")
	if _, err := Audit(Where{}, "seq", courier.AuditFilter{}, func(string, ...any) (Rows, error) { return nil, failed }, scan); !errors.Is(err, failed) {
		t.Errorf("a failed query: %v, want its error", err)
	}
}
