package sqlstore

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// fakeRows are rows of single integers; scanning the row "bad" fails.
type fakeRows struct {
	rows   []string
	next   int
	err    error // what Err says once the rows are read
	closed bool
}

func (r *fakeRows) Next() bool {
	r.next++
	return r.next <= len(r.rows)
}

func (r *fakeRows) Scan(dest ...any) error {
	n, err := strconv.Atoi(r.rows[r.next-1])
	*(dest[0].(*int)) = n
	return err
}

func (r *fakeRows) Err() error { return r.err }

func (r *fakeRows) Close() error { r.closed = true; return nil }

func TestCollect(t *testing.T) {
	scan := func(s Scanner) (int, error) {
		var n int
		err := s.Scan(&n)
		return n, err
	}
	failed := errors.New("connection lost")
	tests := []struct {
		name     string
		rows     *fakeRows
		queryErr error
		want     string
		wantErr  bool
	}{
		{"every row", &fakeRows{rows: []string{"1", "2", "3"}}, nil, "[0 1 2 3]", false},
		{"none", &fakeRows{}, nil, "[0]", false},
		{"a row that cannot be read", &fakeRows{rows: []string{"1", "bad", "3"}}, nil, "[]", true},
		{"rows that fail", &fakeRows{rows: []string{"1"}, err: failed}, nil, "[]", true},
		{"a query that fails", nil, failed, "[]", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rows Rows
			if tt.rows != nil {
				rows = tt.rows
			}
			got, err := Collect([]int{0}, rows, tt.queryErr, scan)
			if (err != nil) != tt.wantErr || fmt.Sprint(append([]int{}, got...)) != tt.want {
				t.Fatalf("Collect = %v, %v; want %s, error %v", got, err, tt.want, tt.wantErr)
			}
			if tt.rows != nil && !tt.rows.closed {
				t.Error("the rows were left open")
			}
		})
	}
}

func TestTimeScansEitherStoresColumn(t *testing.T) {
	want := time.Date(2026, 3, 1, 12, 30, 0, 123456000, time.UTC)
	for _, src := range []any{want.In(time.FixedZone("CET", 3600)), want.UnixMicro()} {
		var got Time
		if err := got.Scan(src); err != nil {
			t.Fatalf("Scan(%T): %v", src, err)
		}
		if got.Location() != time.UTC || !got.Equal(want) {
			t.Errorf("Scan(%T) = %v, want %v", src, got.Time, want)
		}
	}
	var got Time
	if err := got.Scan("2026-03-01"); err == nil {
		t.Error("Scan(string): no error")
	}
}
