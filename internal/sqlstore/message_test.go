package sqlstore

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"testing"
	"time"

	courier "github.com/courier-gw/courier"
)

func TestHeaders(t *testing.T) {
	tests := []struct {
		name     string
		headers  map[string]string
		wantText string
	}{
		{"none", nil, ""},
		{"empty", map[string]string{}, ""},
		// Keys in order, and what JSON must escape escaped: a NUL stays
		// "\u0000", which PostgreSQL's jsonb refuses, as it should.
		{"some", map[string]string{"X-Trace": "t<1>", "X-Nul": "a\x00b"}, `{"X-Nul":"a\u0000b","X-Trace":"t\u003c1\u003e"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text, err := EncodeHeaders(tt.headers)
			if err != nil || text != tt.wantText {
				t.Fatalf("EncodeHeaders = %q, %v; want %q", text, err, tt.wantText)
			}
			back, err := DecodeHeaders([]byte(text))
			if err != nil || !maps.Equal(back, tt.headers) || len(tt.headers) == 0 && back != nil {
				t.Fatalf("DecodeHeaders = %#v, %v; want %#v (nil for none)", back, err, tt.headers)
			}
		})
	}
	if _, err := DecodeHeaders([]byte(`{"a":`)); err == nil {
		t.Error("DecodeHeaders of broken JSON succeeded")
	}
}

func TestExisting(t *testing.T) {
	stored := &courier.Message{ID: "m", Hash: "h1"}
	tests := []struct {
		hash string
		want courier.IngestStatus
	}{
		{"h1", courier.IngestExists},
		{"h2", courier.IngestConflict},
	}
	for _, tt := range tests {
		got := Existing(stored, &courier.Message{ID: "m", Hash: tt.hash})
		if got.Status != tt.want || got.Message != stored {
			t.Errorf("Existing with hash %s = %+v, want %v with the stored message", tt.hash, got, tt.want)
		}
	}
}

func TestSortClaimed(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	msgs := []*courier.Message{
		{ID: "low-old", Priority: 0, NextAttemptAt: at},
		{ID: "high-new", Priority: 9, NextAttemptAt: at.Add(time.Minute)},
		{ID: "low-new", Priority: 0, NextAttemptAt: at.Add(time.Minute)},
		{ID: "high-old", Priority: 9, NextAttemptAt: at},
		{ID: "low-old-2", Priority: 0, NextAttemptAt: at}, // as due as low-old: keeps its place after it
	}
	SortClaimed(msgs)
	var got []string
	for _, m := range msgs {
		got = append(got, m.ID)
	}
	if want := "[high-old high-new low-old low-old-2 low-new]"; fmt.Sprint(got) != want {
		t.Errorf("sorted %v, want %s", got, want)
	}
}

func TestOrDefaultAndNonNil(t *testing.T) {
	at, def := time.Unix(100, 0), time.Unix(200, 0)
	if got := OrDefault(at, def); !got.Equal(at) {
		t.Errorf("OrDefault(t, def) = %v, want t", got)
	}
	if got := OrDefault(time.Time{}, def); !got.Equal(def) {
		t.Errorf("OrDefault(zero, def) = %v, want def", got)
	}
	if got := NonNil(nil); got == nil || len(got) != 0 {
		t.Errorf("NonNil(nil) = %#v, want an empty payload", got)
	}
	if got := NonNil([]byte("x")); string(got) != "x" {
		t.Errorf("NonNil(x) = %q", got)
	}
}

func TestAttempts(t *testing.T) {
	scan := func(row Scanner, a *courier.Attempt) error { return row.Scan(&a.N) }
	var gotQuery string
	var gotArgs []any
	query := func(q string, args ...any) (Rows, error) {
		gotQuery, gotArgs = q, args
		return &fakeRows{rows: []string{"1", "2"}}, nil
	}
	found := func() error { return nil }
	got, err := Attempts("o-1/erp", Where{Numbered: true}, found, query, scan)
	if err != nil {
		t.Fatal(err)
	}
	if want := "SELECT " + AttemptColumns + " FROM attempts WHERE message_id = $1 ORDER BY n"; gotQuery != want || fmt.Sprint(gotArgs) != "[o-1/erp]" {
		t.Errorf("query %q %v, want %q [o-1/erp]", gotQuery, gotArgs, want)
	}
	want := []courier.Attempt{{MessageID: "o-1", Subscription: "erp", N: 1}, {MessageID: "o-1", Subscription: "erp", N: 2}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attempts %+v, want %+v", got, want)
	}

	// A message that is not stored is the answer, and nothing is read.
	gotQuery = ""
	missing := MessageNotFound("o-2")
	if _, err := Attempts("o-2", Where{}, func() error { return missing }, query, scan); !errors.Is(err, missing) || gotQuery != "" {
		t.Errorf("a message not stored: %v (query %q), want %v and no query", err, gotQuery, missing)
	}
	// One without attempts has none, not nil.
	none := func(string, ...any) (Rows, error) { return &fakeRows{}, nil }
	if got, err := Attempts("o-3", Where{}, found, none, scan); err != nil || got == nil || len(got) != 0 {
		t.Errorf("no attempts: %#v, %v; want an empty list", got, err)
	}
}
